"""AMQP connections on their sockets: proton transports fed from and
drained to non-blocking sockets.

Owns every connection's socket and transport: starting one (an accepted
socket, or a connector's socket once connected) with its SASL and TLS
layers and the OPEN of a connecting side, reading what arrived (up to a
budget per wake-up), writing what the transports have, the per-connection
timers (idle timeout, the initial handshake timeout, a close the peer
never answered), and closing a connection from this side.  A transport
that has ended is handed to ``finished`` for the layers above to tear
down; what a connection's frames mean is theirs too.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
from typing import Any, Final, Protocol

from proton import SSL, Transport

from router.adapter.connections import tracing
from router.adapter.connections.settings import (
    AuthServiceSettings,
    ConnectorSettings,
    ListenerSettings,
)
from router.adapter.connections.state import (
    Conn,
    Connector,
    Ended,
    OpenFrames,
    Settings,
)
from router.adapter.connections.websockets import Channel
from router.adapter.loop.eventloop import READ, WRITE, EventLoop
from router.adapter.pending import Pending
from router.adapter.pn import ffi, lib, set_condition
from router.core import Connection, ConnectionId

log = logging.getLogger(__name__)

_CLOSE_GRACE_S = 2.0
_IO_BUFFER = 65536
# The most read from one connection in one wake-up: a little, so that small
# messages are forwarded while their sender's next ones are on the way (a
# window of 250 100-byte messages is 35 KiB); more while one of its links
# is in the middle of a message, which nothing can forward before more of it.
_READ_BUDGET = 16384
_READ_BUDGET_MID_MESSAGE = 262144
_FAILED: Final = select.EPOLLHUP | select.EPOLLERR
_READABLE: Final = select.EPOLLIN | select.EPOLLRDHUP | _FAILED


class SaslRelays(Protocol):
    """Where a listener's SASL goes when it names a ``saslPlugin``
    (``router.adapter.connections.authservice.AuthRelays``)."""

    def relay(self, conn: Conn, settings: AuthServiceSettings) -> None: ...


class Transports:
    """The AMQP connections and their I/O.

    Args:
        loop: where their sockets are watched.
        pending: the wake-up's shared work (connections with output).
        router_id: the container id a connecting side announces.
        relays: relays the SASL of listeners with a ``saslPlugin``.
    """

    def __init__(self, loop: EventLoop, pending: Pending, router_id: str,
                 first_id: int = 1, id_step: int = 1,
                 relays: SaslRelays | None = None) -> None:
        self.loop = loop
        self.relays = relays
        self.clock = loop.clock
        self.router_id = router_id
        self.dirty = pending.output
        #: The OPEN of a connection this side begins (a connector's).
        self.opens = OpenFrames()
        #: One collector for every connection's events.
        self.collector = lib.pn_collector()
        self.conns: dict[int, Conn] = {}
        self.by_transport: dict[Any, Conn] = {}
        self.by_connection: dict[Any, Conn] = {}
        #: Connections whose transport has ended, to be torn down.
        self.finished: list[Conn] = []
        # Connection ids: first_id, then every id_step (workers of one router
        # number theirs apart, docs/scaling.md#workers).
        self._next_conn_id = first_id - id_step
        self._id_step = id_step
        self._rbuf = bytearray(_IO_BUFFER)
        self._rcbuf = ffi.from_buffer(self._rbuf)
        self._wbuf = bytearray(_IO_BUFFER)
        self._wcbuf = ffi.from_buffer(self._wbuf)
        self._wview = memoryview(self._wbuf)

    def listed(self) -> list[Conn]:
        """The connections management shows: all but those between this
        router's workers (docs/scaling.md#workers)."""
        return [conn for conn in self.conns.values() if not conn.internal]

    # -- starting --------------------------------------------------------------------

    def start(self, sock: socket.socket, s: Settings, peer: str,
              connector: Connector | None = None, ws: Channel | None = None) -> Conn:
        """Serve ``sock`` (non-blocking) as an AMQP connection with settings ``s``:
        accepted by a listener, or made by ``connector``; with ``ws``, the
        AMQP bytes travel in WebSocket messages."""
        self._next_conn_id += self._id_step
        core = Connection(ConnectionId(self._next_conn_id), role=s.role,
                          link_capacity=s.link_capacity, strip_in=s.strip_in,
                          strip_out=s.strip_out, name=s.name)
        core.logged_fields = s.logged_fields
        # Made and set up on the raw pointers: the binding's wrapper objects
        # cost a churning client tens of microseconds, and every idle
        # connection their memory (docs/performance.md#connection-churn).
        tptr = lib.pn_transport()
        if connector is None:
            lib.pn_transport_set_server(tptr)
        lib.pn_transport_set_max_frame(tptr, s.max_frame_size)
        lib.pn_transport_set_channel_max(tptr, s.max_sessions - 1)
        if s.idle_timeout_s:
            lib.pn_transport_set_idle_timeout(tptr, s.idle_timeout_s * 1000)
        sasl = lib.pn_sasl(tptr)
        lib.pn_sasl_allowed_mechs(sasl, s.sasl_mechanisms.encode())
        if isinstance(s, ListenerSettings):
            # A listener whose SASL is delegated lets no client skip it.
            lib.pn_transport_require_auth(tptr, s.authenticate_peer
                                          or s.auth_service is not None)
            # Over WebSockets, TLS wraps the WebSocket, not the AMQP inside it.
            if s.require_encryption and ws is None:
                lib.pn_transport_require_encryption(tptr, True)
            lib.pn_sasl_set_allow_insecure_mechs(sasl, s.allow_insecure_mechanisms)
            if s.sasl_config_dir is not None:
                lib.pn_sasl_config_path(sasl, s.sasl_config_dir.encode())
            lib.pn_sasl_config_name(sasl, s.sasl_config_name.encode())
        else:
            # The conf chose to send these credentials.
            lib.pn_sasl_set_allow_insecure_mechs(sasl, True)
        ssl = None
        if s.tls is not None and ws is None:
            ssl = SSL(Transport.wrap(tptr), s.tls)
            if connector is not None:
                ssl.peer_hostname = connector.failover.current.host  # SNI, name check
        cptr = lib.pn_connection()
        if isinstance(s, ConnectorSettings) and s.sasl_username is not None:
            lib.pn_connection_set_user(cptr, s.sasl_username.encode())
            if s.sasl_password is not None:
                lib.pn_connection_set_password(cptr, s.sasl_password.encode())
        lib.pn_transport_bind(tptr, cptr)
        lib.pn_connection_collect(cptr, self.collector)
        conn = Conn(sock, core, s, tptr, cptr, peer, self.clock(), connector)
        conn.ssl = ssl
        if isinstance(s, ListenerSettings) and s.auth_service is not None:
            relays = self.relays
            assert relays is not None, "a router with saslPlugin listeners relays their SASL"
            relays.relay(conn, s.auth_service)  # before the transport reads or writes
        conn.ws = ws
        tracing.apply(conn)
        core.handle = conn
        self.conns[conn.fd] = conn
        self.by_transport[conn.tptr] = conn
        self.by_connection[conn.cptr] = conn
        self.loop.add(conn.fd, READ, self.ready)
        if connector is not None:
            connector.conn = conn
            lib.pn_connection_set_hostname(cptr, connector.failover.current.host.encode())
            self.opens.open(conn, self.router_id.encode())
            self.dirty.add(conn)
        if ws is not None:
            self.dirty.add(conn)  # the handshake's answer
        self.tick_one(conn, self.clock())
        return conn

    def trace_all(self) -> None:
        """The log settings changed: every connection's frame tracing follows
        the PROTOCOL module again."""
        for conn in self.conns.values():
            conn.protocol_trace = None
            tracing.apply(conn)

    # -- I/O ---------------------------------------------------------------------------

    def ready(self, fd: int, mask: int) -> None:
        """The loop found a connection's socket ready."""
        conn = self.conns[fd]
        if mask & _READABLE:
            if conn.holds and not mask & _FAILED:
                self.arm(conn)  # a streamed message's copies are behind
            else:
                self.read(conn)
        if mask & WRITE:
            self.dirty.add(conn)

    def read(self, conn: Conn) -> None:
        """Read what the socket has, up to a budget: proton's input buffer
        takes 8-16 KiB at a time, so one wake-up reads as many times as the
        budget allows, instead of one large message costing several
        wake-ups (and their writes)."""
        if conn.ws is not None:
            self._read_ws(conn)
            return
        tptr = conn.tptr
        total = 0
        while True:
            capacity = lib.pn_transport_capacity(tptr)
            if capacity < 0:
                # The transport takes no more input; wait for it to finish writing.
                self.loop.modify(conn.fd, WRITE if conn.want_write else 0)
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
                self.socket_failed(conn, exc)
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

    def arm(self, conn: Conn) -> None:
        """Watch ``conn`` for input unless it holds, and for output while it waits to write."""
        self.loop.modify(conn.fd, (0 if conn.holds else READ) | (WRITE if conn.want_write else 0))

    def socket_failed(self, conn: Conn, exc: OSError) -> None:
        if not conn.failure_logged:
            conn.failure_logged = True
            log.info("[C%d] Connection from %s failed: %s", conn.core.conn_id, conn.peer, exc)
        lib.pn_transport_close_tail(conn.tptr)
        lib.pn_transport_close_head(conn.tptr)
        self.dirty.add(conn)

    def write(self, conn: Conn) -> None:
        """Write what the transport has; a transport that has ended, and is
        closed, goes to ``finished``."""
        if conn.ws is not None:
            self._write_ws(conn)
            return
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
                self.socket_failed(conn, exc)
                return
            if sent > 0:
                lib.pn_transport_pop(tptr, sent)
            if sent < n:
                self._wait_to_write(conn, True)
                return
        self._wait_to_write(conn, False)
        if ended and lib.pn_transport_closed(tptr) and not conn.closed:
            self.finished.append(conn)

    # -- AMQP over WebSockets ----------------------------------------------------------

    def _read_ws(self, conn: Conn) -> None:
        """Read a WebSocket connection's socket once: its messages' AMQP
        bytes go to the transport."""
        try:
            data = conn.sock.recv(_IO_BUFFER)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.socket_failed(conn, exc)
            return
        self.received_ws(conn, data)

    def received_ws(self, conn: Conn, data: bytes, decrypted: bool = False) -> None:
        """What a WebSocket connection's socket read (``b""``: its end;
        ``decrypted``: already through its TLS)."""
        channel = conn.ws
        assert channel is not None
        channel.received(data or None, decrypted)
        self._push_ws(conn, channel)
        if channel.closed or not data:
            # The peer closed the WebSocket or broke its protocol: the AMQP
            # connection has lost its peer, as when a socket closes.
            lib.pn_transport_close_tail(conn.tptr)
        self.dirty.add(conn)

    def _push_ws(self, conn: Conn, channel: Channel) -> None:
        inbound = channel.inbound
        tptr = conn.tptr
        while inbound:
            capacity = lib.pn_transport_capacity(tptr)
            if capacity < 0:
                inbound.clear()  # the transport takes no more input
                return
            if capacity == 0:
                return  # pushed again once the transport has written
            n = min(capacity, len(inbound), _IO_BUFFER)
            self._rbuf[:n] = inbound[:n]
            lib.pn_transport_push(tptr, self._rcbuf, n)
            del inbound[:n]

    def _write_ws(self, conn: Conn) -> None:
        """Frame what the transport has as binary messages and write them;
        once the transport has ended, close the WebSocket too."""
        channel = conn.ws
        assert channel is not None
        tptr = conn.tptr
        if channel.inbound:
            self._push_ws(conn, channel)
        out = channel.out
        ended = False
        # Output stays in the transport while the socket is behind.
        while len(out) < _IO_BUFFER:
            n = lib.pn_transport_peek(tptr, self._wcbuf, _IO_BUFFER)
            if n < 0:
                ended = True
                channel.close()
                break
            if n == 0:
                break
            channel.send(bytes(self._wview[:n]))
            lib.pn_transport_pop(tptr, n)
        while out:
            try:
                sent = conn.sock.send(out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                out.clear()
                channel.closed = True  # nothing more can go out
                self.socket_failed(conn, exc)
                return
            del out[:sent]
        if out or (not ended and lib.pn_transport_pending(tptr) > 0):
            self._wait_to_write(conn, True)
            return
        self._wait_to_write(conn, False)
        if ended:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)
            if lib.pn_transport_closed(tptr) and not conn.closed:
                self.finished.append(conn)

    def _wait_to_write(self, conn: Conn, waiting: bool) -> None:
        """Watch ``conn``'s socket for room to write while output waits."""
        if conn.want_write != waiting:
            conn.want_write = waiting
            self.arm(conn)

    def write_all(self) -> bool:
        """Write every connection with output; whether there was any."""
        dirty = self.dirty
        if not dirty:
            return False
        conns = list(dirty)
        dirty.clear()
        for conn in conns:
            if not conn.closed:
                self.write(conn)
        return True

    # -- time --------------------------------------------------------------------------

    def tick_all(self, now: float) -> None:
        """Once a second: every connection's timers."""
        for conn in list(self.conns.values()):
            self.tick_one(conn, now)

    def tick_one(self, conn: Conn, now: float) -> None:
        s = conn.settings
        ended = False
        if (not conn.opened and s.initial_handshake_timeout_s
                and now - conn.started > s.initial_handshake_timeout_s):
            set_condition(lib.pn_transport_condition(conn.tptr), "amqp:not-allowed",
                          "Timeout waiting for initial handshake")
            log.info("[C%d] Timeout waiting for initial handshake from %s",
                     conn.core.conn_id, conn.peer)
            conn.opened = True  # report once
            lib.pn_transport_close_tail(conn.tptr)
            lib.pn_transport_close_head(conn.tptr)
            ended = True
        if conn.deadline and now >= conn.deadline:
            conn.deadline = 0.0
            lib.pn_transport_close_tail(conn.tptr)
            lib.pn_transport_close_head(conn.tptr)
            ended = True
        lib.pn_transport_tick(conn.tptr, int(now * 1000))
        if ended or not conn.want_write:
            # A full socket is watched: its next write takes whatever the tick
            # made, so a peer that reads nothing costs no copy and no failed
            # send each second (docs/reliability.md#stalled-consumers). A
            # transport ended here is written at once: the write finds it
            # ended and lets the connection go, full socket or not.
            self.dirty.add(conn)

    # -- closing -----------------------------------------------------------------------

    def close_connection(self, conn: Conn, why: str) -> None:
        """Close a connection from this side with ``amqp:connection:forced``;
        what it held is settled as for any lost connection."""
        if conn.closed:
            return
        set_condition(lib.pn_connection_condition(conn.cptr), "amqp:connection:forced", why)
        lib.pn_connection_close(conn.cptr)
        # A peer that never answers the close loses its socket a little later.
        conn.deadline = self.clock() + _CLOSE_GRACE_S
        log.info("[C%d] Closing connection: %s", conn.core.conn_id, why)
        self.dirty.add(conn)

    def release(self, conn: Conn) -> None:
        """Forget a torn-down connection and close its socket; the core's
        record keeps an ``Ended`` in its place (no cycle left between them)."""
        conn.core.handle = Ended(conn)
        self.loop.remove(conn.fd)
        conn.sock.close()
        del self.conns[conn.fd]
        self.by_transport.pop(conn.tptr, None)
        self.by_connection.pop(conn.cptr, None)
        conn.free()


__all__ = ["Transports"]
