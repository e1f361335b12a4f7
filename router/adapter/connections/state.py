"""Connections as the event loop holds them: listeners, connectors and the
per-socket record of a transport, plus what a router says in its OPEN.

Owns no behaviour beyond that state; the loop (``router.adapter.engine``)
drives them.
"""

from __future__ import annotations

import secrets
import socket
import string
from typing import Any

from proton import UNDESCRIBED, Array, Data, Transport, symbol

import router
from router.adapter.connections.settings import (
    TCP_ADAPTOR_NAME,
    ConnectorSettings,
    ListenerSettings,
    internal,
)
from router.adapter.pn import decoded, lib
from router.core import Connection, Role
from router.core.reconnect import AcceptBackoff, Endpoint, Failover


class Listener:
    """A bound listening socket and the settings of what it accepts."""

    def __init__(self, settings: ListenerSettings, sock: socket.socket) -> None:
        self.settings = settings
        self.sock = sock
        name = sock.getsockname()
        # A Unix socket (a worker's mesh, docs/scaling.md) has a path, no port.
        host, port = (name, 0) if isinstance(name, str) else name[:2]
        self.host: str = host
        self.port: int = port
        # Paused while ``accept`` fails for want of descriptors or memory.
        self.backoff = AcceptBackoff()


class Connector:
    """A connector: the connection it keeps trying to have
    (docs/networks.md#connectors-back-off-and-failover)."""

    def __init__(self, settings: ConnectorSettings) -> None:
        self.settings = settings
        # Where it connects: the configured peer, then the failover URLs.
        self.failover = Failover([Endpoint(settings.host, settings.port),
                                  *settings.failover])
        self.address = f"{settings.host}:{settings.port}"
        self.sock: socket.socket | None = None  # while connecting
        self.conn: Conn | None = None  # while connected
        self.retry_at: float | None = 0.0
        # Failed attempts (or drops) in a row; ``failed`` once the policy gave up.
        self.failures = 0
        self.failed = False
        # The last status line (management ``connectionMsg``).
        self.message: str | None = None
        # Counts attempts: a host name resolved for an attempt that is no
        # longer the current one is dropped.
        self.attempt = 0


Settings = ListenerSettings | ConnectorSettings


class Conn:
    """One socket with its proton transport and connection.

    The transport and connection are held as raw pointers (``tptr``,
    ``cptr``): the binding's wrapper objects cost every connection time to
    make and memory while it stays (docs/performance.md#connection-churn).
    ``transport`` makes a wrapper when one is needed (TLS, frame tracing);
    ``free`` gives both back to proton when the connection is released.
    """

    __slots__ = ("authz", "closed", "connector", "core", "cost", "cptr", "deadline",
                 "failure_logged", "fd", "grant",
                 "holds", "internal", "opened",
                 "peer", "protocol_trace", "settings", "sock", "ssl", "started",
                 "tptr", "tracing", "user", "want_write", "ws")

    def __init__(self, sock: socket.socket, core: Connection, settings: Settings,
                 tptr: Any, cptr: Any, peer: str, now: float,
                 connector: Connector | None = None) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.core = core
        self.settings = settings
        self.connector = connector
        self.cost = settings.cost
        #: A connection between two workers of this router
        #: (docs/scaling.md#workers): management does not list it.
        self.internal = internal(settings.name) or settings.name == TCP_ADAPTOR_NAME
        #: proton's SSL layer of the transport, for a listener or connector with TLS.
        self.ssl: Any = None
        #: The WebSocket framing around the AMQP bytes (``router.adapter.connections.websockets``;
        #: None: AMQP straight on the socket).
        self.ws: Any = None
        #: Who the peer is, once it opened: the SASL user, or for EXTERNAL the
        #: user its certificate makes with the profile's ``uidFormat``.
        self.user: str | None = None
        #: What policy admitted this client connection to (None: not checked,
        #: or refused: then ``denied``).
        self.grant: Any = None
        #: What the authentication service that authenticated the user allows
        #: it (``router.adapter.connections.authservice``; None: none did).
        self.authz: Any = None
        #: The ``pn_transport_t`` and ``pn_connection_t``, each with the one
        #: reference this record holds.
        self.tptr = tptr
        self.cptr = cptr
        self.peer = peer
        self.want_write = False
        #: Whether this connection's failure was logged: a peer that vanishes
        #: fails the read, the write and the transport in turn, and is logged once.
        self.failure_logged = False
        self.closed = False
        self.opened = False
        self.started = now
        #: Management turned this connection's frame trace on or off
        #: (``enableProtocolTrace``; None: as the PROTOCOL module's level says);
        #: ``tracing``: its frames are traced now.
        self.protocol_trace: bool | None = None
        self.tracing = False
        # When a connection this side closed is dropped if the peer has not
        # answered the close by then (0: none).
        self.deadline = 0.0
        #: Streamed messages from this peer whose copies are too far behind:
        #: while any, the socket is not read (``router.adapter.forwarding.forwarder``).
        self.holds = 0

    @property
    def transport(self) -> Transport:
        """The binding's wrapper of the transport, made on demand."""
        return Transport.wrap(self.tptr)

    def free(self) -> None:
        """Unbind the transport and drop this record's references to it and
        to the connection (proton frees each once no event holds it)."""
        lib.pn_transport_unbind(self.tptr)
        lib.pn_decref(self.tptr)
        lib.pn_decref(self.cptr)


class Ended:
    """What the core's record of a torn-down connection keeps as its handle
    in place of the ``Conn``: the two referred to each other, so reference
    counting could not free either, nor the links and transfers they hold,
    until Python's full collection ran (docs/reliability.md#connections-that-end).
    Closed, with what is still read of a closed connection: its policy grant
    and peer (a late oversized message) and its holds (a streamed copy's
    producer, ``router.adapter.forwarding.streaming``)."""

    __slots__ = ("grant", "holds", "peer")

    closed = True

    def __init__(self, conn: Conn) -> None:
        self.grant = conn.grant
        self.holds = conn.holds
        self.peer = conn.peer


def symbols(*names: str) -> list[Any]:
    return [symbol(n) for n in names]


#: The connection capability of a router that takes a link of its own per
#: streamed message (qdrouterd's name; docs/routing.md#large-messages).
STREAMING_LINKS = "qd.streaming-links"


def remote_properties(conn: Conn) -> dict[Any, Any]:
    """The properties of the peer's OPEN (``{}`` when it sent none)."""
    props = decoded(lib.pn_connection_remote_properties(conn.cptr))
    return props if isinstance(props, dict) else {}


def peer_offers(conn: Conn, capability: str) -> bool:
    """Whether the peer's OPEN offered ``capability`` (one symbol or an array)."""
    offered = decoded(lib.pn_connection_remote_offered_capabilities(conn.cptr))
    if offered is None:
        return False
    values = getattr(offered, "elements", offered)
    if isinstance(values, str):
        return values == capability
    return any(str(value) == capability for value in values)


def offered_capabilities(conn: Conn) -> list[Any]:
    """What the router offers and desires in its OPEN, on every connection
    as qdrouterd: anonymous relay, and streaming links (which only another
    router's offer puts to use)."""
    return symbols("ANONYMOUS-RELAY", STREAMING_LINKS)


def open_properties(conn: Conn, conn_id: bool = True) -> dict[Any, Any]:
    """OPEN properties as qdrouterd sends them (docs/networks.md#inter-router-connections);
    without ``qd.conn-id`` when ``conn_id`` is false."""
    props: dict[Any, Any] = {symbol("product"): "hop", symbol("version"): router.__version__}
    if conn_id:
        props[symbol("qd.conn-id")] = conn.core.conn_id
    failover = conn.settings.failover if isinstance(conn.settings, ListenerSettings) else ()
    if failover:
        # An entry has a scheme only where the listener's failoverUrls gave
        # one, as qdrouterd announces it.
        props[symbol("failover-server-list")] = [
            {symbol("network-host"): e.host, symbol("port"): str(e.port),
             **({symbol("scheme"): e.scheme} if e.scheme else {})} for e in failover]
    if conn.core.role is Role.INTER_ROUTER and conn.settings.cost > 1:
        props[symbol("qd.inter-router-cost")] = conn.settings.cost
    if conn.core.role in (Role.INTER_ROUTER, Role.EDGE):
        props[symbol("qd.annotations-version")] = 1
    section = conn.settings.section
    configured = getattr(section, "open_properties", None)
    if configured:
        # The listener's or connector's openProperties after the router's
        # own, each key a symbol, as qdrouterd sends them (its keys are
        # refused there, docs/operations.md#configuration-files).
        for key, value in configured.items():
            props[symbol(key)] = value
    return props


def _encoded(value: Any) -> bytes:
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


_CONN_ID_KEY = _encoded(symbol("qd.conn-id"))


def _map_entries(encoded: bytes) -> tuple[bytes, int]:
    """The entries of an encoded map (map8 or map32) and their count (keys and
    values both counted, as AMQP does)."""
    if encoded[0] == 0xC1:
        return encoded[3:], encoded[2]
    if encoded[0] == 0xD1:
        return encoded[9:], int.from_bytes(encoded[5:9], "big")
    raise ValueError(f"not an encoded map: {encoded[:1].hex()}")


class OpenFrames:
    """The router's OPEN: its container id, capabilities and properties
    (``offered_capabilities``, ``open_properties``) put into the connection
    encoded, instead of through the binding's wrapper classes, which cost a
    connection tens of microseconds (docs/performance.md#connection-churn).
    Everything but the connection's id is encoded once per listener or
    connector (and role), and kept here: each part that opens connections
    has one."""

    def __init__(self) -> None:
        self._capabilities: bytes | None = None
        # The encoded entries of the OPEN properties but the connection's id,
        # and their number, by the listener's or connector's settings (kept
        # with them: an id is only reused once its object is gone) and the
        # connection's role.
        self._properties: dict[tuple[int, Role], tuple[Any, bytes, int]] = {}

    def open(self, conn: Conn, container: bytes) -> None:
        """Send the router's OPEN on ``conn``."""
        cptr = conn.cptr
        lib.pn_connection_set_container(cptr, container)
        caps = self._capabilities
        if caps is None:
            # A field of multiple symbols is one symbol or an array of them
            # (AMQP 1.0 part 1, section 1.4); qdrouterd reads nothing from a list.
            caps = self._capabilities = _encoded(
                Array(UNDESCRIBED, Data.SYMBOL, *offered_capabilities(conn)))
        lib.pn_data_decode(lib.pn_connection_offered_capabilities(cptr), caps, len(caps))
        lib.pn_data_decode(lib.pn_connection_desired_capabilities(cptr), caps, len(caps))
        settings = conn.settings
        key = (id(settings), conn.core.role)
        known = self._properties.get(key)
        if known is None or known[0] is not settings:
            if len(self._properties) >= 1024:
                self._properties.clear()
            known = self._properties[key] = (settings, *_map_entries(
                _encoded(open_properties(conn, conn_id=False))))
        _settings, entries, count = known
        conn_id = conn.core.conn_id
        value = b"\x55" + conn_id.to_bytes(1, "big", signed=True) if -128 <= conn_id < 128 \
            else b"\x81" + conn_id.to_bytes(8, "big", signed=True)
        body = _CONN_ID_KEY + value + entries
        props = b"\xd1" + (len(body) + 4).to_bytes(4, "big") + (count + 2).to_bytes(4, "big") \
            + body
        lib.pn_data_decode(lib.pn_connection_properties(cptr), props, len(props))
        lib.pn_connection_open(cptr)


def failover_server_list(properties: object) -> list[Endpoint] | None:
    """The peers a connection's peer announced in its OPEN properties
    (``failover-server-list``, docs/networks.md#connectors-back-off-and-failover);
    None when it announced none."""
    if not isinstance(properties, dict) or "failover-server-list" not in properties:
        return None
    announced = properties["failover-server-list"]
    endpoints: list[Endpoint] = []
    for entry in announced if isinstance(announced, list) else ():
        if not isinstance(entry, dict):
            continue
        fields = {str(k): v for k, v in entry.items()}
        host = fields.get("network-host")
        port = str(fields.get("port") or "5672")
        if not isinstance(host, str) or not host or not (port.isascii() and port.isdigit()):
            continue
        scheme = fields.get("scheme")
        endpoints.append(Endpoint(host, int(port), scheme if isinstance(scheme, str) else None))
    return endpoints


_TOKEN_ALPHABET = string.ascii_letters + string.digits + "+_"


def token(length: int = 15) -> str:
    """Random link-name suffix, as qdrouterd's ``qdlink.<15 chars>``."""
    return "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(length))


__all__ = ["Conn", "Connector", "Ended", "Listener", "OpenFrames", "Settings",
           "failover_server_list", "open_properties", "peer_offers", "remote_properties",
           "symbols", "token"]
