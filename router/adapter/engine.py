"""The event loop: sockets, proton transports, and dispatch of proton events.

Owns the epoll loop, the listening sockets, every connection's transport,
and the dispatch of collector events on their integer type to the
forwarder (per message) or the endpoint handlers (set-up).  It decides
nothing about routing.  One collector serves every connection; each loop
wake-up reads what arrived, processes all events, tops up credit once, and
writes every transport that has output (reference/python-data-plane.md,
lessons 2-5).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import random
import select
import socket
import time
from collections.abc import Callable, Container, Iterable
from typing import Any, Final

from proton import SASL, SSL, Transport
from proton import Connection as PnConnection

import conf
import router
from router import logs
from router.adapter.connections import (
    Conn,
    Connector,
    Listener,
    Settings,
    open_properties,
    symbols,
)
from router.adapter.discovery import DiscoverySettings, PeerDiscovery
from router.adapter.forwarder import Forwarder
from router.adapter.lifecycle import Lifecycle
from router.adapter.managed import build_agent, router_counts
from router.adapter.management import ManagementNode
from router.adapter.metrics import HttpServer
from router.adapter.pn import ffi, lib, to_str
from router.adapter.settings import (
    ConnectorSettings,
    ListenerSettings,
    SaslError,
    connector_settings,
    listener_settings,
)
from router.adapter.settling import settle_with
from router.adapter.tls import TlsError, TlsProfile, load_profiles
from router.core import (
    Connection,
    ConnectionId,
    Fanout,
    InLink,
    OutLink,
    Role,
    RoutedEnd,
    Router,
    Transfer,
    describe_counters,
)
from router.core.policy import Grant, Policy
from router.core.settlement import RELEASED
from router.core.watch import Watch

log = logging.getLogger(__name__)
server_log = logging.getLogger("router.adapter.server")
policy_log = logging.getLogger("router.core.policy")

_READ = select.EPOLLIN | select.EPOLLRDHUP
_WRITE = select.EPOLLOUT
_TICK_S = 1.0
_CLOSE_GRACE_S = 2.0
_IO_BUFFER = 65536
# The most read from one connection in one wake-up: a little, so that small
# messages are forwarded while their sender's next ones are on the way (a
# window of 250 100-byte messages is 35 KiB); more while one of its links
# is in the middle of a message, which nothing can forward before more of it.
_READ_BUDGET = 16384
_READ_BUDGET_MID_MESSAGE = 262144

PN_DELIVERY: Final = lib.PN_DELIVERY
PN_TRANSPORT: Final = lib.PN_TRANSPORT
PN_LINK_FLOW: Final = lib.PN_LINK_FLOW


def accepted(listener: Listener, now: float) -> None:
    """A connection was accepted: a listener that had to pause says it recovered."""
    failures = listener.backoff.succeeded(now)
    if failures:
        server_log.log(logs.NOTICE, "Accepting on %s:%d again after %d failure%s",
                       listener.host, listener.port, failures, "" if failures == 1 else "s")


class Engine(Lifecycle):
    """Runs the router's I/O until ``stop()``.

    Args:
        router: the routing core.
        router_id: container id announced on every connection.
        listeners: what to listen on.
        clock: monotonic clock (seconds).
    """

    def __init__(self, *, router: Router, router_id: str, listeners: list[ListenerSettings],
                 connectors: list[ConnectorSettings] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 shutdown_grace_s: float = 0.0) -> None:
        super().__init__()
        self.router = router
        self.router_id = router_id
        self.listener_settings = listeners
        self.connectors = [Connector(c) for c in connectors or ()]
        self.connecting: dict[int, Connector] = {}
        self.clock = clock
        self.collector = lib.pn_collector()
        self.epoll = select.epoll()
        self.listeners: dict[int, Listener] = {}
        self.conns: dict[int, Conn] = {}
        self.by_transport: dict[Any, Conn] = {}
        self.by_connection: dict[Any, Conn] = {}
        self.links: dict[Any, InLink | OutLink | RoutedEnd] = {}
        self.forwarder = Forwarder(router, router_id, clock)
        # Connections with output to write: the forwarder adds the ones it
        # touches (a disposition or settlement raises no PN_TRANSPORT event).
        self.dirty: set[Conn] = self.forwarder.dirty
        self._next_conn_id = 0
        # Graceful shutdown: how many stop requests came, how long in-flight
        # deliveries may take to settle, and until when (set once draining).
        self._stop_requests = 0
        self.shutdown_grace_s = shutdown_grace_s
        self._drain_until: float | None = None
        #: Called once when the graceful shutdown begins (systemd STOPPING=1).
        self.on_drain: Callable[[], None] | None = None
        self._deferred: list[Callable[[], None]] = []
        self._rbuf = bytearray(_IO_BUFFER)
        self._rcbuf = ffi.from_buffer(self._rbuf)
        self._wbuf = bytearray(_IO_BUFFER)
        self._wcbuf = ffi.from_buffer(self._wbuf)
        self._wview = memoryview(self._wbuf)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.epoll.register(self._wake_r.fileno(), select.EPOLLIN)
        self._next_tick = 0.0
        self.management: ManagementNode | None = None
        self.watch = Watch()
        # The earliest connector retry (the loop wakes for it).
        self._next_retry: float | None = None
        # The earliest end of a listener's pause in accepting (out of descriptors).
        self._accept_resume: float | None = None
        #: The peer group this router announces itself to, if any.
        self.discovery: PeerDiscovery | None = None
        self.http: HttpServer | None = None
        #: The checked sslProfiles by name (listeners and connectors made at run time use them).
        self.tls_profiles: dict[str, TlsProfile] = {}
        #: The router's conf section (listeners made at run time take its SASL settings).
        self.router_section: conf.RouterSection | None = None
        #: Who may connect and attach what (``router.core.policy``), and its conf.
        self.policy = Policy()
        self.policy_section = conf.PolicySection()
        #: The vhost sections behind the policy's vhosts (management's ``vhost``).
        self.vhost_sections: dict[str, conf.VhostSection] = {}
        # The ``router`` entity's row, for /metrics (management sets the full one).
        self.router_row: Callable[[], dict[str, object]] = lambda: dict(router_counts(self))

    # -- start and stop --------------------------------------------------------

    def bind(self) -> list[Listener]:
        """Open every listening socket; raises OSError if one cannot listen."""
        return [self.listen(settings) for settings in self.listener_settings]

    def listen(self, settings: ListenerSettings) -> Listener:
        """Open one listening socket (at start-up or at run time); raises OSError."""
        family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((settings.host, settings.port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        listener = Listener(settings, sock)
        if settings.http and self.http is None:
            self.http = HttpServer.for_engine(self, lambda: self.router_row())
        self.listeners[sock.fileno()] = listener
        self.epoll.register(sock.fileno(), select.EPOLLIN)
        return listener

    def close_listener(self, listener: Listener) -> None:
        """Stop listening; the connections it accepted stay up."""
        fd = listener.sock.fileno()
        if self.listeners.pop(fd, None) is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.epoll.unregister(fd)
        listener.sock.close()
        server_log.log(logs.NOTICE, "Stopped listening on %s:%d", listener.host, listener.port)

    def add_connector(self, settings: ConnectorSettings) -> Connector:
        """A connector created at run time: it starts connecting at once."""
        connector = Connector(settings)
        self.connectors.append(connector)
        self._connect(connector)
        return connector

    def remove_connector(self, connector: Connector) -> None:
        """Delete a connector: no more attempts, and its connection is closed."""
        self.connectors.remove(connector)
        connector.retry_at = None
        sock = connector.sock
        if sock is not None:
            connector.sock = None
            self.connecting.pop(sock.fileno(), None)
            with contextlib.suppress(OSError, ValueError):
                self.epoll.unregister(sock.fileno())
            sock.close()
        conn = connector.conn
        if conn is not None:
            connector.conn = None  # no reconnect when it closes
            self.close_connection(conn, "Connector deleted")

    def close_connection(self, conn: Conn, why: str) -> None:
        """Close a connection from this side with ``amqp:connection:forced``;
        what it held is settled as for any lost connection."""
        if conn.closed:
            return
        cond = lib.pn_connection_condition(conn.cptr)
        lib.pn_condition_set_name(cond, b"amqp:connection:forced")
        lib.pn_condition_set_description(cond, why.encode())
        lib.pn_connection_close(conn.cptr)
        # A peer that never answers the close loses its socket a little later.
        conn.deadline = self.clock() + _CLOSE_GRACE_S
        server_log.info("[C%d] Closing connection: %s", conn.core.conn_id, why)
        self.dirty.add(conn)

    def load_tls(self, sections: Iterable[conf.SslProfileSection]) -> dict[str, TlsProfile]:
        """Read ``sections``' files as the sslProfiles of their names (new ones
        are added) and move the listeners and connectors that use them onto
        the new domains: connections made from now on use the new
        certificates, keys and CAs; open ones keep theirs.  All or nothing:
        when a profile, or a listener's or connector's use of it, does not
        load, nothing changes.

        Returns:
            The profiles read, by name.

        Raises:
            TlsError: naming the profile and the file that does not load.
            SaslError: a connector's saslPassword can no longer be read.
        """
        loaded = load_profiles(sections)
        profiles = {**self.tls_profiles, **loaded}
        using_listeners, using_connectors = self.using_tls(loaded)
        listeners = [(li, listener_settings(li.settings.section, profiles,
                                            self.router_section)) for li in using_listeners]
        connectors = [(c, connector_settings(c.settings.section, profiles))
                      for c in using_connectors]
        self.tls_profiles = profiles
        for listener, listener_new in listeners:
            listener.settings = listener_new
        for connector, connector_new in connectors:
            connector.settings = connector_new
        return loaded

    def using_tls(self, names: Container[str]) -> tuple[list[Listener], list[Connector]]:
        """The listeners and connectors whose conf names one of the sslProfiles ``names``."""
        def uses(settings: Settings) -> bool:
            section = settings.section
            return section is not None and section.ssl_profile in names
        return ([li for li in self.listeners.values() if uses(li.settings)],
                [c for c in self.connectors if uses(c.settings)])

    def reload_tls(self) -> bool:
        """Read every sslProfile's files again (SIGHUP), as ``load_tls``; when
        a profile no longer loads, the previous files stay in use and the
        error is logged.  Returns whether the new files took effect."""
        if not self.tls_profiles:
            return True
        try:
            loaded = self.load_tls([p.section for p in self.tls_profiles.values()])
        except (TlsError, SaslError) as exc:
            server_log.error("TLS profiles not reloaded, the previous ones stay in use: %s", exc)
            return False
        server_log.log(logs.NOTICE, "TLS profiles reloaded (%d): new connections use the "
                       "files as they are now", len(loaded))
        return True

    def enable_management(self, section: conf.RouterSection) -> None:
        """Serve the management agent at ``$management`` and ``_local/$management``
        (``section``: the router's conf section; the ``sslProfile`` entities
        are the loaded ``tls_profiles``)."""
        self.router_section = section
        agent, self.router_row = build_agent(self, section, self.router_id)
        self.management = ManagementNode(self.router, self.forwarder, agent, self.apply,
                                         self._may_manage)

    def _may_manage(self, ref: Transfer | Fanout | None, operation: str,
                    entity_type: str) -> str | None:
        """Policy on a management request: why its sender may not make it."""
        grant = None
        if ref is not None:
            origin = ref.in_link.conn
            if origin.role is Role.INTER_ROUTER:
                return None  # the router the client is on applies its own policy
            conn = origin.handle
            grant = conn.grant if conn is not None and isinstance(conn.grant, Grant) else None
        denied = self.policy.may_manage(grant, operation, entity_type)
        return None if denied is None else denied.reason

    @property
    def stopping(self) -> bool:
        return self._stop_requests > 0

    def wakeup_fd(self) -> int:
        """A descriptor that wakes the loop when written (for signal.set_wakeup_fd)."""
        return self._wake_w.fileno()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def stop(self) -> None:
        """Begin the graceful shutdown; a second call ends its grace period at
        once.  Safe in a signal handler: it only counts and wakes the loop."""
        self._stop_requests += 1
        self._wake()

    def defer(self, call: Callable[[], None]) -> None:
        """Run ``call`` in the loop at its next wake-up (from a signal handler)."""
        self._deferred.append(call)
        self._wake()

    def run(self) -> None:
        """Serve until ``stop()``; drain for the grace period; close everything."""
        while True:
            now = self.clock()
            wake = self._next_tick
            if self._stop_requests:
                if self._drain_until is None:
                    self._begin_drain(now)
                assert self._drain_until is not None
                if self._stop_requests > 1 or now >= self._drain_until or self._drained():
                    break
                wake = min(wake, self._drain_until)
            deadline = self.router.next_deadline()
            if deadline is not None:
                wake = min(wake, deadline)
            if self._next_retry is not None:
                wake = min(wake, self._next_retry)
            if self.discovery is not None:
                wake = min(wake, self.discovery.next_due)
            if self._accept_resume is not None:
                wake = min(wake, self._accept_resume)
            self.run_once(max(0.0, min(wake - now, _TICK_S)))
        self._shutdown()

    def _begin_drain(self, now: float) -> None:
        """Stop accepting connections and granting credit; let what is in
        flight settle until the grace period ends."""
        self._drain_until = now + self.shutdown_grace_s
        for listener in list(self.listeners.values()):
            self.close_listener(listener)
        for connector in self.connectors:
            connector.retry_at = None
        self.forwarder.frozen = True
        unsettled = self._unsettled()
        server_log.log(logs.NOTICE, "Shutting down: %d unsettled deliver%s may settle for up "
                       "to %g s", unsettled, "y" if unsettled == 1 else "ies",
                       self.shutdown_grace_s)
        if self.on_drain is not None:
            self.on_drain()

    def _unsettled(self) -> int:
        return sum(len(il.unsettled) for conn in self.conns.values()
                   for il in conn.core.in_links.values())

    def _drained(self) -> bool:
        return all(not il.unsettled for conn in self.conns.values()
                   for il in conn.core.in_links.values())

    def run_once(self, timeout: float) -> None:
        """One wake-up: wait up to ``timeout`` s for I/O, then handle all of it."""
        try:
            ready = self.epoll.poll(timeout)
        except InterruptedError:
            return
        if self._deferred:
            deferred, self._deferred = self._deferred, []
            for call in deferred:
                call()
        for fd, mask in ready:
            conn = self.conns.get(fd)
            if conn is not None:
                if mask & (select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR):
                    if conn.holds and not mask & (select.EPOLLHUP | select.EPOLLERR):
                        self._arm(conn)  # a streamed message's copies are behind
                    else:
                        self._read(conn)
                if mask & select.EPOLLOUT:
                    self.dirty.add(conn)
            elif fd in self.listeners:
                listener = self.listeners[fd]
                try:
                    if listener.settings.http and self.http is not None:
                        self.http.accept(listener)
                    else:
                        self._accept(listener)
                except OSError as exc:
                    self._pause_accepting(listener, exc)
            elif fd in self.connecting:
                self._connected(self.connecting.pop(fd))
            elif self.http is not None and fd in self.http.conns:
                self.http.ready(fd, mask)
            elif self.discovery is not None and fd == self.discovery.fd:
                self.discovery.readable(self.clock())
            else:
                self._drain_wakeup()
        now = self.clock()
        if self._accept_resume is not None and now >= self._accept_resume:
            self._resume_accepting(now)
        if now >= self._next_tick:
            self._tick(now)
        elif self._next_retry is not None and now >= self._next_retry:
            self._retry_connectors(now)
        discovery = self.discovery
        if discovery is not None and now >= discovery.next_due:
            discovery.tick(now)
        deadline = self.router.next_deadline()
        if deadline is not None and now >= deadline:
            self.apply(self.router.tick(now))
        self.process()

    @staticmethod
    def _orphan(d: Any) -> None:
        """A delivery on a link the router no longer serves (it detached it, and
        the peer's transfers were already on their way): nothing forwarded it,
        so the producer is told RELEASED."""
        if lib.pn_link_is_receiver(lib.pn_delivery_link(d)) and not lib.pn_delivery_settled(d):
            settle_with(d, RELEASED)
        else:
            lib.pn_delivery_settle(d)

    def _drain_wakeup(self) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(512):
                pass

    def _shutdown(self) -> None:
        """Give every producer delivery still unsettled RELEASED, then close
        every connection with ``amqp:connection:forced``."""
        released = 0
        for conn in self.conns.values():
            if conn.closed:
                continue
            for il in conn.core.in_links.values():
                for d, ref in il.unsettled.items():
                    ref.in_delivery = None  # a consumer's outcome now goes nowhere
                    settle_with(d, RELEASED)
                    released += 1
                il.unsettled.clear()
        if released:
            server_log.info("Shutting down: released %d unsettled deliver%s", released,
                            "y" if released == 1 else "ies")
        for conn in list(self.conns.values()):
            self.close_connection(conn, "Router shutting down")
        self.process()
        for conn in list(self.conns.values()):
            self._close(conn)
        self._close_sockets()
        if self.http is not None:
            self.http.close_all()

    def _close_sockets(self) -> None:
        for listener in self.listeners.values():
            listener.sock.close()
        self.listeners.clear()
        if self.discovery is not None:
            self.discovery.close()

    def close(self) -> None:
        """Release the engine's descriptors (listeners, peer-group socket, the
        loop's own); for an engine that never ran or has finished running."""
        self._close_sockets()
        self.epoll.close()
        self._wake_r.close()
        self._wake_w.close()

    # -- sockets ---------------------------------------------------------------

    def _accept(self, listener: Listener) -> None:
        """Accept every pending connection; raises OSError when ``accept``
        fails for another reason than an aborted or no pending connection."""
        while True:
            try:
                sock, addr = listener.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            accepted(listener, self.clock())
            denied = self.policy.socket_accepted()
            if denied is not None:
                policy_log.info("DENY Connection '%s' based on %s", addr[0], denied.reason)
                sock.close()
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.adopt(sock, listener, f"{addr[0]}:{addr[1]}")

    def _pause_accepting(self, listener: Listener, exc: OSError) -> None:
        """``accept`` failed (out of file descriptors, ENFILE, ENOMEM...): stop
        watching the listener for a back-off delay instead of spinning on a
        backlog it cannot take; the connections it has are served as ever."""
        now = self.clock()
        report = listener.backoff.failed(now)
        resume_at = listener.backoff.resume_at
        assert resume_at is not None
        with contextlib.suppress(OSError, ValueError):
            self.epoll.modify(listener.sock.fileno(), 0)
        if self._accept_resume is None or resume_at < self._accept_resume:
            self._accept_resume = resume_at
        if report is not None:
            server_log.error("Accepting on %s:%d failed %d time%s: %s; paused for %g s "
                             "(reported at most every %g s)", listener.host, listener.port,
                             report, "" if report == 1 else "s", exc.strerror or exc,
                             resume_at - now, listener.backoff.report_every_s)

    def _resume_accepting(self, now: float) -> None:
        self._accept_resume = None
        for listener in self.listeners.values():
            resume_at = listener.backoff.resume_at
            if resume_at is None:
                continue
            if now >= resume_at:
                listener.backoff.resume()
                with contextlib.suppress(OSError, ValueError):
                    self.epoll.modify(listener.sock.fileno(), select.EPOLLIN)
            elif self._accept_resume is None or resume_at < self._accept_resume:
                self._accept_resume = resume_at

    def adopt(self, sock: socket.socket, listener: Listener, peer: str) -> None:
        """Serve an accepted (non-blocking) socket as a connection of ``listener``."""
        conn = self._start(sock, listener.settings, peer)
        server_log.info("[C%d] Accepted connection to %s:%s from %s", conn.core.conn_id,
                        listener.host, listener.port, peer)

    def _start(self, sock: socket.socket, s: Settings, peer: str,
               connector: Connector | None = None) -> Conn:
        self._next_conn_id += 1
        core = Connection(ConnectionId(self._next_conn_id), role=s.role,
                          link_capacity=s.link_capacity, strip_in=s.strip_in,
                          strip_out=s.strip_out, name=s.name)
        transport = Transport(Transport.CLIENT if connector else Transport.SERVER)
        transport.max_frame_size = s.max_frame_size
        transport.channel_max = max(0, min(s.max_sessions, 32768) - 1)
        if s.idle_timeout_s:
            transport.idle_timeout = float(s.idle_timeout_s)
        sasl: SASL = transport.sasl()
        sasl.allowed_mechs(s.sasl_mechanisms)
        if isinstance(s, ListenerSettings):
            transport.require_auth(s.authenticate_peer)
            if s.require_encryption:
                transport.require_encryption(True)
            sasl.allow_insecure_mechs = s.allow_insecure_mechanisms
            if s.sasl_config_dir is not None:
                sasl.config_path(s.sasl_config_dir)
            sasl.config_name(s.sasl_config_name)
        else:
            sasl.allow_insecure_mechs = True  # the conf chose to send these credentials
        ssl = None
        if s.tls is not None:
            ssl = SSL(transport, s.tls)
            if connector is not None:
                ssl.peer_hostname = connector.failover.current.host  # SNI, name check
        pn_conn = PnConnection()
        if isinstance(s, ConnectorSettings) and s.sasl_username is not None:
            pn_conn.user = s.sasl_username
            if s.sasl_password is not None:
                pn_conn.password = s.sasl_password
        transport.bind(pn_conn)
        lib.pn_connection_collect(pn_conn._impl, self.collector)
        conn = Conn(sock, core, s, transport, pn_conn, peer, self.clock(), connector)
        conn.ssl = ssl
        core.handle = conn
        self.conns[conn.fd] = conn
        self.by_transport[conn.tptr] = conn
        self.by_connection[conn.cptr] = conn
        self.epoll.register(conn.fd, _READ)
        if connector is not None:
            connector.conn = conn
            pn_conn.container = self.router_id
            pn_conn.hostname = connector.failover.current.host
            pn_conn.offered_capabilities = symbols("ANONYMOUS-RELAY")
            pn_conn.properties = open_properties(conn)
            pn_conn.open()
            self.dirty.add(conn)
        self._tick_one(conn, self.clock())
        return conn

    # -- connectors ----------------------------------------------------------------

    def _connect(self, connector: Connector) -> None:
        """Start a non-blocking connection attempt to the connector's current peer."""
        peer = connector.failover.current
        connector.address = f"{peer.host}:{peer.port}"
        connector.retry_at = None
        family = socket.AF_INET6 if ":" in peer.host else socket.AF_INET
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as exc:  # out of descriptors: a failed attempt, retried later
            self._connect_failed(connector, exc.strerror or str(exc))
            return
        sock.setblocking(False)
        error = sock.connect_ex((peer.host, peer.port))
        if error not in (0, errno.EINPROGRESS):
            sock.close()
            self._connect_failed(connector, os.strerror(error))
            return
        connector.sock = sock
        self.connecting[sock.fileno()] = connector
        self.epoll.register(sock.fileno(), select.EPOLLOUT)

    def _connected(self, connector: Connector) -> None:
        sock = connector.sock
        assert sock is not None
        connector.sock = None
        self.epoll.unregister(sock.fileno())
        error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            sock.close()
            self._connect_failed(connector, os.strerror(error))
            return
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = self._start(sock, connector.settings, connector.address, connector)
        server_log.info("[C%d] Connected to %s", conn.core.conn_id, connector.address)
        connector.message = f"[C{conn.core.conn_id}] Connected to {connector.address}"

    def _connect_failed(self, connector: Connector, why: str) -> None:
        server_log.info("Connection to %s failed: %s", connector.address, why)
        connector.message = f"Connection to {connector.address} failed: {why}"
        self._retry_later(connector, opened=False)

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
            server_log.warning("Connector to %s failed: gave up after %d attempts",
                               connector.failover.listing(), connector.failures)
            return
        connector.retry_at = retry_at = self.clock() + delay
        if self._next_retry is None or retry_at < self._next_retry:
            self._next_retry = retry_at

    def _retry_connectors(self, now: float) -> None:
        """Start every connector attempt that is due."""
        self._next_retry = None
        for connector in self.connectors:
            retry_at = connector.retry_at
            if retry_at is None or connector.conn is not None or connector.sock is not None:
                continue
            if now >= retry_at:
                self._connect(connector)
            elif self._next_retry is None or retry_at < self._next_retry:
                self._next_retry = retry_at

    def join_group(self, settings: DiscoverySettings, instance: int) -> None:
        """Announce this router to a peer group and connect to its peers
        (raises OSError when the multicast socket cannot be set up)."""
        discovery = PeerDiscovery(self, settings, self.router_id, instance)
        self.discovery = discovery
        self.epoll.register(discovery.fd, select.EPOLLIN)

    def start_connectors(self) -> None:
        """Begin connecting every configured connector."""
        for connector in self.connectors:
            self._connect(connector)

    def _read(self, conn: Conn) -> None:
        """Read what the socket has, up to a budget: proton's input buffer
        takes 8-16 KiB at a time, so one wake-up reads as many times as the
        budget allows, instead of one large message costing several
        wake-ups (and their writes)."""
        tptr = conn.tptr
        total = 0
        while True:
            capacity = lib.pn_transport_capacity(tptr)
            if capacity < 0:
                # The transport takes no more input; wait for it to finish writing.
                self.epoll.modify(conn.fd, _WRITE if conn.want_write else 0)
                self.dirty.add(conn)
                return
            if capacity == 0:
                break
            want = capacity if capacity < _IO_BUFFER else _IO_BUFFER
            try:
                n = conn.sock.recv_into(self._rbuf, want)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self._socket_failed(conn, exc)
                return
            if n == 0:
                lib.pn_transport_close_tail(tptr)
                self.dirty.add(conn)
                return
            lib.pn_transport_push(tptr, self._rcbuf, n)
            total += n
            if n < want or total >= _READ_BUDGET_MID_MESSAGE or (
                    total >= _READ_BUDGET and not conn.core.partials):
                break
        if total:
            self.dirty.add(conn)

    def _arm(self, conn: Conn) -> None:
        """Watch ``conn`` for input unless it holds, and for output while it waits to write."""
        mask = (0 if conn.holds else _READ) | (_WRITE if conn.want_write else 0)
        with contextlib.suppress(OSError, ValueError):
            self.epoll.modify(conn.fd, mask)

    def _socket_failed(self, conn: Conn, exc: OSError) -> None:
        server_log.info("[C%d] Connection from %s failed: %s", conn.core.conn_id, conn.peer, exc)
        lib.pn_transport_close_tail(conn.tptr)
        lib.pn_transport_close_head(conn.tptr)
        self.dirty.add(conn)

    def _write(self, conn: Conn) -> None:
        tptr = conn.tptr
        sock = conn.sock
        ended = False
        while True:
            # peek asks the transport for its output itself: < 0 once it has ended.
            n = lib.pn_transport_peek(tptr, self._wcbuf, _IO_BUFFER)
            if n < 0:
                ended = True
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_WR)
                break
            if n == 0:
                break
            try:
                sent = sock.send(self._wview[:n])
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._socket_failed(conn, exc)
                return
            if sent > 0:
                lib.pn_transport_pop(tptr, sent)
            if sent < n:
                if not conn.want_write:
                    conn.want_write = True
                    self._arm(conn)
                return
        if conn.want_write:
            conn.want_write = False
            self._arm(conn)
        if ended and lib.pn_transport_closed(tptr):
            self._close(conn)

    # -- time --------------------------------------------------------------------

    def _tick(self, now: float) -> None:
        self._next_tick = now + _TICK_S
        self._retry_connectors(now)
        for conn in list(self.conns.values()):
            self._tick_one(conn, now)
        self._watch_links(now)
        if self.http is not None:
            self.http.tick(now)

    def _watch_links(self, now: float) -> None:
        """Once a second: ages of unsettled deliveries, links without credit."""
        links: list[InLink | OutLink] = []
        for conn in self.conns.values():
            core = conn.core
            links.extend(core.in_links.values())
            links.extend(core.out_links.values())
        found = self.watch.sweep(links, now)
        for link, count in found.stuck:
            log.warning("[%r][L%d] %d deliver%s unsettled for more than %g seconds "
                        "(%d on this link so far)", link.conn, link.link_id, count,
                        "y" if count == 1 else "ies", self.watch.stuck_s, link.stuck)
        for out in found.blocked:
            log.warning("[%r][L%d] Link blocked with zero credit for %g seconds", out.conn,
                        out.link_id, self.watch.blocked_s)

    def _tick_one(self, conn: Conn, now: float) -> None:
        s = conn.settings
        if (not conn.opened and s.initial_handshake_timeout_s
                and now - conn.started > s.initial_handshake_timeout_s):
            cond = lib.pn_transport_condition(conn.tptr)
            lib.pn_condition_set_name(cond, b"amqp:not-allowed")
            lib.pn_condition_set_description(cond, b"Timeout waiting for initial handshake")
            server_log.info("[C%d] Timeout waiting for initial handshake from %s",
                            conn.core.conn_id, conn.peer)
            conn.opened = True  # report once
            lib.pn_transport_close_tail(conn.tptr)
            lib.pn_transport_close_head(conn.tptr)
        if conn.deadline and now >= conn.deadline:
            conn.deadline = 0.0
            lib.pn_transport_close_tail(conn.tptr)
            lib.pn_transport_close_head(conn.tptr)
        lib.pn_transport_tick(conn.tptr, int(now * 1000))
        self.dirty.add(conn)

    # -- events --------------------------------------------------------------------

    def process(self) -> None:
        """Dispatch every pending event, top up credit, write all output.

        Writing can close a connection, and settling what it held changes
        others (released deliveries, drained senders): go round until nothing
        is left to dispatch or write, so none of it waits for the next wake-up.
        """
        while True:
            self._dispatch()
            management = self.management
            if management is not None and management.pending:
                management.serve()
            self.forwarder.flush_credit()
            if self.forwarder.oversized:
                self._close_oversized()
            self._dispatch()
            if not self.dirty:
                return
            dirty = list(self.dirty)
            self.dirty.clear()
            for conn in dirty:
                if not conn.closed:
                    self._write(conn)
            fwd = self.forwarder
            if fwd.paused:
                fwd.check_paused()
            if fwd.resumed:
                resumed, fwd.resumed = fwd.resumed, []
                for conn in resumed:
                    if not conn.closed:
                        self._arm(conn)
            if not self.dirty and not lib.pn_collector_peek(self.collector):
                return

    def _close_oversized(self) -> None:
        """Links that sent a message above the policy's size limit: the link
        and its connection are closed, as qdrouterd does (reference 5.3)."""
        oversized, self.forwarder.oversized = self.forwarder.oversized, []
        for il in oversized:
            conn = il.conn.handle
            self.policy.oversized(conn.grant if isinstance(conn.grant, Grant) else None)
            policy_log.info("[C%d][L%d] DENY message larger than %d bytes on '%s'",
                            il.conn.conn_id, il.link_id, il.conn.max_message_size, conn.peer)
            lptr = il.handle
            if lptr is not None and lib.pn_link_state(lptr) & lib.PN_LOCAL_ACTIVE:
                cond = lib.pn_link_condition(lptr)
                lib.pn_condition_set_name(cond, b"amqp:link:message-size-exceeded")
                lib.pn_condition_set_description(cond, b"Message size exceeded")
                lib.pn_link_close(lptr)
            if not conn.closed:
                self.close_connection(conn, "Message size exceeded")

    def _dispatch(self) -> None:
        collector = self.collector
        peek = lib.pn_collector_peek
        pop = lib.pn_collector_pop
        etype = lib.pn_event_type
        event_delivery = lib.pn_event_delivery
        delivery_link = lib.pn_delivery_link
        links = self.links
        fwd = self.forwarder
        while True:
            e = peek(collector)
            if not e:
                if fwd.settle_later:
                    fwd.settle_deferred()
                    continue
                return
            t = etype(e)
            try:
                if t == PN_DELIVERY:
                    d = event_delivery(e)
                    link = links.get(delivery_link(d))
                    if type(link) is InLink:
                        fwd.incoming(d, link)
                    elif type(link) is OutLink:
                        fwd.outgoing(d, link)
                    elif type(link) is RoutedEnd:
                        fwd.relay(d, link)
                    else:
                        self._orphan(d)
                        self._touched(e)
                elif t == PN_TRANSPORT:
                    # Raised for every change with output to write; the handlers
                    # mark the connections they change instead (self.dirty),
                    # which costs less than looking each event's transport up.
                    pass
                elif t == PN_LINK_FLOW:
                    link = links.get(lib.pn_event_link(e))
                    if type(link) is OutLink:
                        fwd.outgoing_flow(link)
                    elif type(link) is InLink:
                        fwd.credit_dirty.add(link)
                    elif type(link) is RoutedEnd:
                        fwd.relay_flow(link)
                else:
                    if fwd.settle_later:
                        fwd.settle_deferred()
                    self._lifecycle(t, e)
            except Exception:
                log.exception("internal error handling proton event %s",
                              to_str(lib.pn_event_type_name(t)))
                if router.RAISE_INTERNAL_ERRORS:
                    raise
            pop(collector)

    def _close(self, conn: Conn) -> None:
        """The transport is done: release everything the connection held."""
        if conn.closed:
            return
        conn.closed = True
        core = conn.core
        links: list[InLink | OutLink | RoutedEnd] = [
            *core.in_links.values(), *core.out_links.values(), *core.routed.values()]
        for link in links:
            lptr = link.handle
            if lptr is not None:
                self.links.pop(lptr, None)
                self._forget_link(link)
                log.info("[%r][L%d] Link closed due to connection loss: %s", core,
                         link.link_id, describe_counters(link))
        self._forget_connection(conn)
        if conn.connector is None:
            self.policy.socket_closed()
            if isinstance(conn.grant, Grant):
                self.policy.closed(conn.grant)
        self.apply(self.router.connection_closed(core, self.clock()))
        with contextlib.suppress(OSError, ValueError):
            self.epoll.unregister(conn.fd)
        conn.sock.close()
        del self.conns[conn.fd]
        self.by_transport.pop(conn.tptr, None)
        self.by_connection.pop(conn.cptr, None)
        conn.transport.unbind()
        log.info("[C%d] Connection Closed", core.conn_id)
        connector = conn.connector
        if connector is not None and connector.conn is conn and not self.stopping:
            connector.conn = None
            self._retry_later(connector, opened=conn.opened)


__all__ = ["Engine", "Listener"]
