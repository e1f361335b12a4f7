"""Connectors: the connections the router keeps trying to have
(docs/networks.md#connectors-back-off-and-failover).

Owns each connector's attempts: a non-blocking connect to the current peer
of its failover list (a host name is resolved in a thread of its own, so
that a slow or failing name server never stops the loop, and a name that
does not resolve is a failed attempt like a refused connection), the
connection started once the socket connects,
and the next attempt after a failure or a drop, on the next failover peer,
after qdrouterd's delays or the connector's back-off policy (giving up
when the policy says so).  A part of the loop: it is due when the earliest
attempt is.
"""

from __future__ import annotations

import logging
import os
import random
import select
import socket
from collections.abc import Callable
from typing import Final

from router.adapter.connections.dialing import dial, family_of, is_address, resolve
from router.adapter.connections.settings import ConnectorSettings
from router.adapter.connections.state import Connector
from router.adapter.connections.transports import Transports
from router.adapter.loop.eventloop import EventLoop

log = logging.getLogger(__name__)

#: A held connector's status line (management ``connectionMsg``).
HELD: Final = "made by the router's first worker (docs/scaling.md#workers)"


class Connectors:
    """Every connector and its attempts.

    Args:
        loop: where connecting sockets are watched.
        transports: starts a connection once its socket connects.
        connectors: the configured connectors.
        held: connectors this router lists and never connects (a worker's
            inter-router connectors, which the router's first worker makes;
            docs/scaling.md#workers).
    """

    def __init__(self, loop: EventLoop, transports: Transports,
                 connectors: list[ConnectorSettings],
                 held: Callable[[ConnectorSettings], bool] | None = None) -> None:
        self.loop = loop
        self.held = held
        self.clock = loop.clock
        self.transports = transports
        self.connectors = [Connector(c) for c in connectors]
        self._connecting: dict[int, Connector] = {}
        # The earliest attempt due (the loop wakes for it).
        self._next_retry: float | None = None

    def start(self) -> None:
        """Begin connecting every configured connector."""
        for connector in self.connectors:
            self._connect(connector)

    def add(self, settings: ConnectorSettings) -> Connector:
        """A connector created at run time: it starts connecting at once."""
        connector = Connector(settings)
        self.connectors.append(connector)
        self._connect(connector)
        return connector

    def remove(self, connector: Connector) -> None:
        """Delete a connector: no more attempts, and its connection is closed."""
        self.connectors.remove(connector)
        connector.retry_at = None
        sock = connector.sock
        if sock is not None:
            connector.sock = None
            self._connecting.pop(sock.fileno(), None)
            self.loop.remove(sock.fileno())
            sock.close()
        conn = connector.conn
        if conn is not None:
            connector.conn = None  # no reconnect when it closes
            self.transports.close_connection(conn, "Connector deleted")

    def stop_retrying(self) -> None:
        """The router is stopping: no more attempts."""
        for connector in self.connectors:
            connector.retry_at = None

    # -- attempts --------------------------------------------------------------------

    def _connect(self, connector: Connector) -> None:
        """Start an attempt to the connector's current peer: at once for an IP
        address, after resolving it for a host name."""
        if self.held is not None and self.held(connector.settings):
            connector.retry_at = None
            connector.message = HELD
            return
        peer = connector.failover.current
        connector.address = f"{peer.host}:{peer.port}"
        connector.retry_at = None
        connector.attempt += 1
        refused = connector.settings.refused
        if refused is not None:  # its sslProfile did not load (hopd --tls-errors log)
            log.error("SSL%s configuration failed for connection to %s: %s",
                      " CA" if connector.settings.refused_ca else "", connector.address, refused)
            self._failed(connector, "its sslProfile did not load")
            return
        if peer.host.startswith("/"):  # a Unix socket: a worker's mesh (docs/scaling.md)
            connector.address = f"unix:{peer.host}"
            self._open(connector, socket.AF_UNIX, peer.host)
            return
        family = family_of(peer.host)
        if is_address(peer.host):
            self._open(connector, family, (peer.host, peer.port))
            return
        attempt = connector.attempt
        resolve(self.loop, peer.host, peer.port, family,
                lambda address, why: self._resolved(connector, attempt, family, address, why))

    def _resolved(self, connector: Connector, attempt: int, family: int,
                  address: tuple[str, int] | None, why: str) -> None:
        """A host name was resolved, or not, for attempt ``attempt``."""
        if connector.attempt != attempt or connector not in self.connectors \
                or self.loop.stopping:
            return
        if address is None:
            self._failed(connector, f"cannot resolve the host name: {why}")
            return
        self._open(connector, family, address)

    def _open(self, connector: Connector, family: int, address: tuple[str, int] | str) -> None:
        """Start a non-blocking connect to ``address``."""
        sock = dial(family, address)
        if isinstance(sock, str):  # a failed attempt, retried later
            self._failed(connector, sock)
            return
        connector.sock = sock
        self._connecting[sock.fileno()] = connector
        self.loop.add(sock.fileno(), select.EPOLLOUT, self._connected)

    def _connected(self, fd: int, _mask: int) -> None:
        connector = self._connecting.pop(fd)
        sock = connector.sock
        assert sock is not None
        connector.sock = None
        self.loop.remove(fd)
        error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            sock.close()
            self._failed(connector, os.strerror(error))
            return
        if sock.family != socket.AF_UNIX:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = self.transports.start(sock, connector.settings, connector.address, connector)
        log.info("[C%d] Connected to %s", conn.core.conn_id, connector.address)
        connector.message = f"[C{conn.core.conn_id}] Connected to {connector.address}"

    def _failed(self, connector: Connector, why: str) -> None:
        log.info("Connection to %s failed: %s", connector.address, why)
        connector.message = f"Connection to {connector.address} failed: {why}"
        self._retry_later(connector, opened=False)

    def connection_lost(self, connector: Connector, *, opened: bool) -> None:
        """``connector``'s connection is gone (unless the router is stopping,
        it is tried again)."""
        if self.loop.stopping:
            return
        connector.conn = None
        self._retry_later(connector, opened=opened)

    def _retry_later(self, connector: Connector, *, opened: bool) -> None:
        """The connector's attempt failed or its connection went: schedule the
        next attempt, on the next failover peer, after the policy's delay."""
        if opened:
            connector.failures = 0
        connector.failures += 1
        if len(connector.failover.entries) > 1:
            connector.failover.advance()
        s = connector.settings
        policy = s.reconnect
        if policy is None:
            # qdrouterd's delays; 1 s between the entries of a failover list.
            delay: float | None = 1.0 if len(connector.failover.entries) > 1 \
                else s.retry_dropped_s if opened else s.retry_failed_s
        else:
            delay = policy.delay(connector.failures, random.random())
        if delay is None:
            connector.failed = True
            connector.retry_at = None
            connector.message = (f"Gave up after {connector.failures} attempts; last: "
                                 f"{connector.message}")
            log.warning("Connector to %s failed: gave up after %d attempts",
                        connector.failover.listing(), connector.failures)
            return
        connector.retry_at = retry_at = self.clock() + delay
        if self._next_retry is None or retry_at < self._next_retry:
            self._next_retry = retry_at

    # -- the loop's part ---------------------------------------------------------------

    def next_deadline(self) -> float | None:
        return self._next_retry

    def tick(self, now: float) -> None:
        """Start every attempt that is due."""
        self._next_retry = None
        for connector in self.connectors:
            retry_at = connector.retry_at
            if retry_at is None or connector.conn is not None or connector.sock is not None:
                continue
            if now >= retry_at:
                self._connect(connector)
            elif self._next_retry is None or retry_at < self._next_retry:
                self._next_retry = retry_at

    def close(self) -> None:
        """Close the sockets still connecting."""
        for connector in list(self._connecting.values()):
            sock = connector.sock
            if sock is not None:
                connector.sock = None
                self.loop.remove(sock.fileno())
                sock.close()
        self._connecting.clear()


__all__ = ["Connectors"]
