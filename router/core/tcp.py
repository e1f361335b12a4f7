"""TCP services: which connector each client connection goes to (docs/tcp.md).

Owns the TCP bridges (``tcpListener`` and ``tcpConnector``) as records with
their counters, the connections they carry, the choice of a connector for
a new connection (the one of its address with the fewest open connections,
passing over one whose service refused a moment ago) and the connections
held while their address has no connector.  It is pure: no sockets, the
time is passed in; the adapter (``router.adapter.tcp``) moves the bytes and
asks here where a connection goes and tells what became of it.
"""

from __future__ import annotations

import enum
import itertools
from collections import deque
from collections.abc import Iterator
from typing import Final

import attrs

__all__ = [
    "REFUSED_HOLDOFF_S",
    "BridgeKind",
    "TcpBridge",
    "TcpConnection",
    "TcpServices",
]

#: A connector whose service refused (or could not be reached) is passed over
#: for this long while the address has another connector to try.
REFUSED_HOLDOFF_S: Final = 2.0


class BridgeKind(enum.Enum):
    LISTENER = "tcpListener"
    CONNECTOR = "tcpConnector"


@attrs.define(eq=False)
class TcpBridge:
    """One ``tcpListener`` or ``tcpConnector`` and what went through it.

    ``bytes_in`` counts what clients sent to services, ``bytes_out`` what
    services sent back, on both kinds (qdrouterd's meaning).
    """

    kind: BridgeKind
    name: str
    address: str
    host: str
    port: str
    site_id: str | None = None
    #: Its TLS (docs/tcp.md#tls): the sslProfile's name, None for plain TCP.
    ssl_profile: str | None = None
    identity: str = ""
    opened: int = 0
    closed: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    #: Connections now open through this bridge.
    open: int = 0
    #: Until when a connector that was refused is passed over (monotonic s).
    refused_until: float = 0.0
    #: Connections its service refused, or that could not reach it.
    refused: int = 0
    #: When it was last chosen, to break ties between equally loaded connectors.
    last_chosen: int = 0


@attrs.define(eq=False)
class TcpConnection:
    """One client connection carried to a service.

    ``tried`` holds the connectors already tried for it (each once).  A
    connection whose client is on another router (it came as a stream,
    docs/tcp.md#across-the-network) has no ``listener`` here: ``peer`` is
    then the stream's connection id.
    """

    id: int
    listener: TcpBridge | None
    peer: str
    started: float
    address: str = ""
    connector: TcpBridge | None = None
    #: The service's host and port once connected.
    service: str = ""
    tried: list[TcpBridge] = attrs.field(factory=list)
    bytes_in: int = 0
    bytes_out: int = 0
    last_in: float = 0.0
    last_out: float = 0.0
    #: Its last connector is connecting to the service now.
    connecting: bool = False
    closed: bool = False


class TcpServices:
    """The bridges of one router and the connections they carry."""

    def __init__(self) -> None:
        self.listeners: list[TcpBridge] = []
        self.connectors: list[TcpBridge] = []
        self.connections: dict[int, TcpConnection] = {}
        #: Connections waiting for their address to have a connector, oldest first.
        self.held: dict[str, deque[TcpConnection]] = {}
        self._ids = itertools.count(1)
        self._choices = itertools.count(1)

    # -- bridges -------------------------------------------------------------------

    def add(self, bridge: TcpBridge) -> list[TcpConnection]:
        """Add a bridge; for a connector, the held connections of its
        address, which are no longer held and are to be started now."""
        if not bridge.identity:
            bridge.identity = f"{bridge.kind.value}/{bridge.name}"
        if bridge.kind is BridgeKind.LISTENER:
            self.listeners.append(bridge)
            return []
        self.connectors.append(bridge)
        return list(self.held.pop(bridge.address, ()))

    def remove(self, bridge: TcpBridge) -> None:
        """Forget a bridge; the connections it carries go on until they end,
        and connections of a listener's that are held are the caller's to close."""
        bridges = self.listeners if bridge.kind is BridgeKind.LISTENER else self.connectors
        bridges.remove(bridge)

    def find(self, kind: BridgeKind, name: str) -> TcpBridge | None:
        bridges = self.listeners if kind is BridgeKind.LISTENER else self.connectors
        return next((b for b in bridges if b.name == name), None)

    def bridges(self) -> Iterator[TcpBridge]:
        yield from self.listeners
        yield from self.connectors

    # -- connections -----------------------------------------------------------------

    def accepted(self, listener: TcpBridge, peer: str, now: float) -> TcpConnection:
        """A client connected to ``listener`` from ``peer``."""
        conn = TcpConnection(id=next(self._ids), listener=listener, peer=peer, started=now,
                             address=listener.address, last_in=now, last_out=now)
        listener.opened += 1
        listener.open += 1
        self.connections[conn.id] = conn
        return conn

    def streamed(self, connector: TcpBridge, peer: str, now: float) -> TcpConnection:
        """A stream from another router's listener came to ``connector``,
        named ``peer``; the connector is connecting to its service for it."""
        conn = TcpConnection(id=next(self._ids), listener=None, peer=peer, started=now,
                             address=connector.address, last_in=now, last_out=now,
                             connecting=True)
        conn.tried.append(connector)
        connector.open += 1
        self.connections[conn.id] = conn
        return conn

    def unheld(self, conn: TcpConnection) -> None:
        """``conn`` is no longer held (it went to the network instead)."""
        held = self.held.get(conn.address)
        if held is not None and conn in held:
            held.remove(conn)
            if not held:
                del self.held[conn.address]

    def route(self, conn: TcpConnection, now: float) -> TcpBridge | None:
        """The connector ``conn`` is to try next, or None: then it is held
        (the address has no connector) or to be refused (``conn.tried`` is
        not empty: every connector was tried and none could take it)."""
        address = conn.address
        candidates = [c for c in self.connectors
                      if c.address == address and c not in conn.tried]
        if not candidates:
            if not conn.tried and not any(c.address == address for c in self.connectors):
                self.held.setdefault(address, deque()).append(conn)
            return None
        ready = [c for c in candidates if c.refused_until <= now] or candidates
        chosen = min(ready, key=lambda c: (c.open, c.last_chosen))
        chosen.last_chosen = next(self._choices)
        conn.tried.append(chosen)
        conn.connecting = True
        chosen.open += 1
        return chosen

    def connected(self, conn: TcpConnection, service: str) -> None:
        """The connector ``route`` gave reached its service at ``service``."""
        connector = conn.tried[-1]
        conn.connecting = False
        conn.connector = connector
        conn.service = service
        connector.opened += 1
        connector.refused_until = 0.0

    def refused(self, conn: TcpConnection, now: float) -> None:
        """The connector ``route`` gave could not reach its service."""
        connector = conn.tried[-1]
        conn.connecting = False
        connector.open -= 1
        connector.refused += 1
        connector.refused_until = now + REFUSED_HOLDOFF_S

    def moved(self, conn: TcpConnection, in_bytes: int, out_bytes: int, now: float) -> None:
        """``in_bytes`` went from the client to the service, ``out_bytes`` back."""
        if in_bytes:
            conn.bytes_in += in_bytes
            if conn.listener is not None:
                conn.listener.bytes_in += in_bytes
            conn.last_in = now
            if conn.connector is not None:
                conn.connector.bytes_in += in_bytes
        if out_bytes:
            conn.bytes_out += out_bytes
            if conn.listener is not None:
                conn.listener.bytes_out += out_bytes
            conn.last_out = now
            if conn.connector is not None:
                conn.connector.bytes_out += out_bytes

    def ended(self, conn: TcpConnection) -> None:
        """``conn`` is over (both sides closed, or it was refused or reset)."""
        if conn.closed:
            return
        conn.closed = True
        self.connections.pop(conn.id, None)
        if conn.listener is not None:
            conn.listener.open -= 1
            conn.listener.closed += 1
        self.unheld(conn)
        if conn.connector is not None:
            conn.connector.open -= 1
            conn.connector.closed += 1
        elif conn.connecting:
            conn.tried[-1].open -= 1  # it ended while its connector was connecting
            conn.connecting = False
