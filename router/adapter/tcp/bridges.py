"""The TCP bridges of a router: listening, connecting, carrying (docs/tcp.md).

Owns the sockets of every ``tcpListener`` (accepting clients), the
connections being made to services for ``tcpConnector``s (a name resolved
in a thread, a non-blocking connect) and the carried connections
(``carry.Carried``).  Where each client connection goes, which connector is
passed over and what is held is ``router.core.tcp.TcpServices``'s; this part
does what it says and reports back.  A client whose address has a connector
that cannot be reached, nor any other, is reset; one whose address has no
connector at all is held, unread, until one is added.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import ssl
from collections.abc import Callable, Mapping
from typing import Final

import conf
from router import logs
from router.adapter.connections.dialing import dial, family_of, is_address, resolve
from router.adapter.connections.listeners import listening_socket
from router.adapter.connections.tls import TlsError, TlsProfile
from router.adapter.loop.eventloop import WRITE, EventLoop
from router.adapter.tcp.carry import Carried, reset
from router.adapter.tcp.streams import Attach, ClientStream, Streams
from router.adapter.tcp.tls import TlsRelay
from router.core.tcp import BridgeKind, TcpBridge, TcpConnection, TcpServices

__all__ = ["TcpBridges", "bridge_of"]

log = logging.getLogger(__name__)

#: An accept that fails for want of descriptors is tried again after this long.
ACCEPT_PAUSE_S: Final = 1.0
#: A held client is watched for its hang-up only (EPOLLHUP and EPOLLERR
#: are always reported): its bytes wait in the kernel, unread.
_HELD_MASK: Final = select.EPOLLRDHUP


def bridge_of(section: conf.TcpListenerSection | conf.TcpConnectorSection) -> TcpBridge:
    """The core's record of a configured bridge."""
    kind = (BridgeKind.LISTENER if isinstance(section, conf.TcpListenerSection)
            else BridgeKind.CONNECTOR)
    # Unnamed: named by its host and port once bound (``add_listener``).
    return TcpBridge(kind=kind, name=section.name or "", address=section.address, host=section.host,
                     port=section.port, site_id=section.site_id, ssl_profile=section.ssl_profile)


class _Dialing:
    """A connection being made to a connector's service for ``conn``."""

    __slots__ = ("client", "conn", "sock")

    def __init__(self, conn: TcpConnection, client: socket.socket) -> None:
        self.conn = conn
        self.client = client
        self.sock: socket.socket | None = None


class TcpBridges:
    """Every TCP bridge's sockets, as a part of the loop.

    Args:
        loop: the event loop.
        services: the core's bridges and connections.
        attach: serves one end of a socket pair as an AMQP connection of
            the router: with it, connections cross the network as streams
            (``router.adapter.tcp.streams``); without, only the connectors
            of this router are reached.
    """

    def __init__(self, loop: EventLoop, services: TcpServices,
                 attach: Attach | None = None,
                 profiles: Mapping[str, TlsProfile] | None = None) -> None:
        self.loop = loop
        self.profiles = profiles if profiles is not None else {}
        #: Each TLS bridge's context, by ``id`` of the bridge.
        self.tls: dict[int, ssl.SSLContext] = {}
        self.relays: set[TlsRelay] = set()
        self.services = services
        self.clock = loop.clock
        #: Listening sockets by descriptor.
        self._listening: dict[int, tuple[socket.socket, TcpBridge]] = {}
        self._paused: dict[int, float] = {}
        #: The client sockets of held connections, by connection id.
        self._held: dict[int, socket.socket] = {}
        self._dialing: dict[int, _Dialing] = {}
        self.carried: dict[int, Carried] = {}
        self.streams = Streams(loop, services, attach) if attach is not None else None
        if self.streams is not None:
            self.streams.relay = self.relay

    # -- TLS -----------------------------------------------------------------------

    def tls_context(self, section: conf.TcpListenerSection | conf.TcpConnectorSection
                    ) -> ssl.SSLContext | None:
        """The TLS context of a bridge with an ``sslProfile`` (docs/tcp.md#tls).

        Raises:
            TlsError: the profile is not loaded (it could not be) or its
                files do not serve.
        """
        if section.ssl_profile is None:
            return None
        profile = self.profiles.get(section.ssl_profile)
        if profile is None:
            raise TlsError(f"sslProfile {section.ssl_profile!r} is not loaded: there is no "
                           "such profile, or it could not be loaded (logged)")
        if isinstance(section, conf.TcpListenerSection):
            return profile.http_context(verify_client=section.authenticate_peer)
        return profile.client_context(verify_hostname=section.verify_hostname)

    def _track(self, relay: TlsRelay) -> None:
        """Keep ``relay`` for the router's end, and forget those over."""
        self.relays = {r for r in self.relays if not r.over}
        self.relays.add(relay)

    def relay(self, bridge: TcpBridge, sock: socket.socket,
              ready: Callable[[socket.socket], None], failed: Callable[[str], None]) -> None:
        """Call ``ready`` with the socket a connector's connection to its
        service is carried on: ``sock`` itself, or for a TLS connector the
        plaintext end of its TLS relay once the handshake is done (``failed``
        with why, if it is not)."""
        context = self.tls.get(id(bridge))
        if context is None:
            ready(sock)
            return

        def handshaken() -> None:
            relay.on_failed = None
            ready(relay.plain)

        # A name or an address: Python checks either against the certificate.
        relay = TlsRelay(self.loop, sock, context, server_side=False,
                         server_hostname=bridge.host, on_failed=failed,
                         on_handshake=handshaken)
        self._track(relay)

    def _accept_tls(self, conn: TcpConnection, client: socket.socket,
                    context: ssl.SSLContext) -> None:
        """A TLS listener's client: routed once its handshake is done (a
        client that cannot do one never reaches a service)."""

        def failed(why: str) -> None:
            self.services.ended(conn)
            log.info("[T%d] TLS client %s refused: %s", conn.id, conn.peer, why)

        def ready() -> None:
            relay.on_failed = None
            self._route(conn, relay.plain)

        relay = TlsRelay(self.loop, client, context, server_side=True, on_failed=failed,
                         on_handshake=ready)
        self._track(relay)

    # -- bridges -------------------------------------------------------------------

    def add_listener(self, bridge: TcpBridge, tls: ssl.SSLContext | None = None) -> None:
        """Listen for ``bridge`` (its clients with TLS, given ``tls``); raises
        OSError when its port cannot be bound."""
        sock = listening_socket(bridge.host, int(bridge.port))
        if tls is not None:
            self.tls[id(bridge)] = tls
        sock.setblocking(False)
        if bridge.port == "0":
            bridge.port = str(sock.getsockname()[1])
        bridge.name = bridge.name or f"{bridge.host}:{bridge.port}"
        self.services.add(bridge)
        self._listening[sock.fileno()] = (sock, bridge)
        self.loop.add(sock.fileno(), select.EPOLLIN, self._accept_ready)
        log.log(logs.NOTICE, "Listening for TCP on %s:%s for address %s (%s)",
                bridge.host, bridge.port, bridge.address, bridge.name)

    def add_connector(self, bridge: TcpBridge, tls: ssl.SSLContext | None = None) -> None:
        """Serve ``bridge``'s address (its service with TLS, given ``tls``);
        the connections held for it start now."""
        if tls is not None:
            self.tls[id(bridge)] = tls
        bridge.name = bridge.name or f"{bridge.host}:{bridge.port}"
        log.info("TCP connector %s: address %s, service %s:%s", bridge.name, bridge.address,
                 bridge.host, bridge.port)
        for conn in self.services.add(bridge):
            held = self._held.pop(conn.id, None)
            if held is not None:
                self.loop.remove(held.fileno())
                self._route(conn, held)
            elif self.streams is not None:
                # Offered to the network and not taken yet: served here now.
                carrier = self.streams.carriers.get(conn.id)
                client = carrier.cancel() if isinstance(carrier, ClientStream) else None
                if client is not None:
                    self._route(conn, client)
        if self.streams is not None:
            self.streams.consume(bridge)

    def remove(self, bridge: TcpBridge) -> None:
        """Stop ``bridge``: a listener stops listening and resets the
        connections it holds; the connections already carried go on."""
        self.services.remove(bridge)
        self.tls.pop(id(bridge), None)
        if bridge.kind is BridgeKind.CONNECTOR and self.streams is not None:
            self.streams.unconsume(bridge)
        if bridge.kind is BridgeKind.LISTENER:
            for fd, (sock, b) in list(self._listening.items()):
                if b is bridge:
                    self._stop_listening(fd, sock)
            for conn_id, client in list(self._held.items()):
                conn = self.services.connections.get(conn_id)
                if conn is not None and conn.listener is bridge:
                    self._refuse(conn, client, "its listener was deleted")
            if self.streams is not None:
                for carrier in list(self.streams.carriers.values()):
                    if (isinstance(carrier, ClientStream) and carrier.conn.listener is bridge
                            and not carrier.started):
                        carrier.reset("its listener was deleted")
        log.info("TCP %s %s deleted", bridge.kind.value, bridge.name)

    def _stop_listening(self, fd: int, sock: socket.socket) -> None:
        self._listening.pop(fd, None)
        self._paused.pop(fd, None)
        self.loop.remove(fd)
        sock.close()

    # -- accepting -------------------------------------------------------------------

    def _accept_ready(self, fd: int, _mask: int) -> None:
        sock, bridge = self._listening[fd]
        while True:
            try:
                client, peer = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:  # out of descriptors: pause rather than spin
                log.error("TCP listener %s cannot accept (%s): paused for %g s",
                          bridge.name, exc.strerror or exc, ACCEPT_PAUSE_S)
                self.loop.modify(fd, 0)
                self._paused[fd] = self.clock() + ACCEPT_PAUSE_S
                return
            client.setblocking(False)
            with contextlib.suppress(OSError):
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = self.services.accepted(bridge, f"{peer[0]}:{peer[1]}", self.clock())
            log.info("[T%d] TCP connection from %s to listener %s (address %s)", conn.id,
                     conn.peer, bridge.name, bridge.address)
            context = self.tls.get(id(bridge))
            if context is not None:
                self._accept_tls(conn, client, context)
            else:
                self._route(conn, client)

    # -- connecting --------------------------------------------------------------------

    def _route(self, conn: TcpConnection, client: socket.socket) -> None:
        """Send ``conn`` to its next connector, hold it, or reset it."""
        connector = self.services.route(conn, self.clock())
        if connector is None:
            if conn.tried:
                self._refuse(conn, client, "no connector of its address could reach its "
                             "service")
            elif self.streams is not None:
                log.info("[T%d] held: address %s has no connector on this router; offered "
                         "to the network", conn.id, conn.address)
                self.streams.offer(conn, client)
            else:
                log.info("[T%d] held: address %s has no connector", conn.id,
                         conn.address)
                self._held[conn.id] = client
                self.loop.add(client.fileno(), _HELD_MASK, self._held_event(conn.id))
            return
        dialing = _Dialing(conn, client)
        self._dialing[conn.id] = dialing
        port = int(connector.port)
        if is_address(connector.host):
            self._dial(dialing, (connector.host, port))
            return

        def resolved(address: tuple[str, int] | None, why: str) -> None:
            if self._dialing.get(conn.id) is not dialing:
                return  # the client went meanwhile
            if address is None:
                self._failed(dialing, f"cannot resolve {connector.host}: {why}")
            else:
                self._dial(dialing, address)

        resolve(self.loop, connector.host, port, family_of(connector.host), resolved)

    def _dial(self, dialing: _Dialing, address: tuple[str, int]) -> None:
        sock = dial(family_of(address[0]), address)
        if isinstance(sock, str):
            self._failed(dialing, sock)
            return
        dialing.sock = sock
        fd = sock.fileno()
        self.loop.add(fd, WRITE, lambda _fd, _mask: self._guarded(dialing))

    def _guarded(self, dialing: _Dialing) -> None:
        """``_dialed``, whose fault ends this connection only: the router
        serves on."""
        try:
            self._dialed(dialing)
        except Exception:
            log.exception("[T%d] TCP connection failed", dialing.conn.id)
            if self._dialing.pop(dialing.conn.id, None) is dialing:
                if dialing.sock is not None:
                    with contextlib.suppress(OSError, ValueError, KeyError):
                        self.loop.remove(dialing.sock.fileno())
                    dialing.sock.close()
                self._refuse(dialing.conn, dialing.client, "an internal error (logged)")

    def _dialed(self, dialing: _Dialing) -> None:
        sock = dialing.sock
        assert sock is not None
        self.loop.remove(sock.fileno())
        error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            sock.close()
            self._failed(dialing, os.strerror(error))
            return
        conn = dialing.conn
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        host, port = sock.getpeername()[:2]
        connector = conn.tried[-1]

        def failed(why: str) -> None:
            if self._dialing.get(conn.id) is dialing:
                dialing.sock = None  # the relay has closed it
                self._failed(dialing, why)  # the next connector, if any

        # A TLS service is reached once its handshake is done.
        self.relay(connector, sock,
                   lambda plain: self._connected(dialing, plain, f"{host}:{port}"), failed)

    def _connected(self, dialing: _Dialing, sock: socket.socket, peer: str) -> None:
        conn = dialing.conn
        if self._dialing.get(conn.id) is not dialing:
            sock.close()  # the router is ending
            return
        del self._dialing[conn.id]
        self.services.connected(conn, peer)
        connector = conn.connector
        assert connector is not None
        log.info("[T%d] connected to %s for %s (connector %s)", conn.id, peer,
                 conn.peer, connector.name)
        carried = Carried(self.loop, dialing.client, sock,
                          moved=lambda up, down: self.services.moved(conn, up, down,
                                                                     self.clock()),
                          ended=lambda how: self._carried_ended(conn, how))
        self.carried[conn.id] = carried
        carried.start()

    def _failed(self, dialing: _Dialing, why: str) -> None:
        conn = dialing.conn
        connector = conn.tried[-1]
        del self._dialing[conn.id]
        self.services.refused(conn, self.clock())
        log.warning("[T%d] TCP connector %s cannot reach %s:%s: %s", conn.id, connector.name,
                    connector.host, connector.port, why)
        self._route(conn, dialing.client)

    def _refuse(self, conn: TcpConnection, client: socket.socket, why: str) -> None:
        self._held.pop(conn.id, None)
        with contextlib.suppress(OSError, ValueError):
            self.loop.remove(client.fileno())
        reset(client)
        self.services.ended(conn)
        log.info("[T%d] connection from %s reset: %s", conn.id, conn.peer, why)

    def _held_event(self, conn_id: int) -> Callable[[int, int], None]:
        def event(fd: int, mask: int) -> None:
            client = self._held.get(conn_id)
            conn = self.services.connections.get(conn_id)
            if client is None or conn is None:
                return
            if mask & (select.EPOLLHUP | select.EPOLLERR):
                self._held.pop(conn_id)
                self.loop.remove(fd)
                client.close()
                self.services.ended(conn)
                log.info("[T%d] held connection from %s closed by the client", conn_id,
                         conn.peer)
            else:
                # It ended its stream only: it may still want an answer, so it
                # stays held, watched for a hang-up alone.
                self.loop.modify(fd, 0)
        return event

    def _carried_ended(self, conn: TcpConnection, how: str) -> None:
        self.carried.pop(conn.id, None)
        self.services.ended(conn)
        log.info("[T%d] TCP connection from %s %s: %d bytes to the service, %d back", conn.id,
                 conn.peer, how, conn.bytes_in, conn.bytes_out)

    # -- the loop's part ---------------------------------------------------------------

    def next_deadline(self) -> float | None:
        when = min(self._paused.values()) if self._paused else None
        if self.streams is not None:
            due = self.streams.next_deadline()
            if due is not None and (when is None or due < when):
                when = due
        return when

    def tick(self, now: float) -> None:
        if self.streams is not None:
            self.streams.tick(now)
        for fd, when in list(self._paused.items()):
            if when <= now:
                del self._paused[fd]
                self.loop.modify(fd, select.EPOLLIN)

    def close(self) -> None:
        """The router is ending: stop listening, reset every connection."""
        for fd, (sock, _bridge) in list(self._listening.items()):
            self._stop_listening(fd, sock)
        if self.streams is not None:
            self.streams.close()
        for carried in list(self.carried.values()):
            carried.abort()
        for relay in list(self.relays):
            relay.abort()
        for conn_id, client in list(self._held.items()):
            conn = self.services.connections.get(conn_id)
            if conn is not None:
                self._refuse(conn, client, "the router is ending")
        for dialing in list(self._dialing.values()):
            if dialing.sock is not None:
                with contextlib.suppress(OSError, ValueError):
                    self.loop.remove(dialing.sock.fileno())
                dialing.sock.close()
            reset(dialing.client)
        self._dialing.clear()
