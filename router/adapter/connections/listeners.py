"""Listening sockets: AMQP listeners and HTTP ones.

Owns binding a listener (at start-up or when management creates one),
accepting every pending connection (policy may refuse a socket at once;
an AMQP one becomes a connection of ``router.adapter.connections.transports``, an HTTP
one goes to ``router.adapter.http.server``), and pausing a listener whose
``accept`` fails for want of descriptors or memory instead of spinning on
its backlog, with a back-off.  A part of the loop: it is due when a paused
listener is to accept again.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
from collections import deque

from router import logs
from router.adapter.connections.settings import ListenerSettings
from router.adapter.connections.state import Listener
from router.adapter.connections.transports import Transports
from router.adapter.connections.websockets import Channel
from router.adapter.loop.eventloop import EventLoop
from router.core.policy import Policy

log = logging.getLogger(__name__)
policy_log = log.getChild("policy")


#: Sockets an HTTP listener accepted, in order, for the HTTP server to take
#: (``router.adapter.http.server``; it is a part of the loop, due while any
#: wait, so it takes them in the wake-up that accepted them).
HttpHandoff = deque[tuple[socket.socket, Listener]]


class Listeners:
    """The listening sockets.

    Args:
        loop: where they are watched.
        transports: serves the AMQP connections they accept.
        policy: may refuse a connection as it is accepted.
        http: where the sockets an HTTP listener accepts go.
    """

    def __init__(self, loop: EventLoop, transports: Transports, policy: Policy,
                 http: HttpHandoff) -> None:
        self.loop = loop
        self.clock = loop.clock
        self.transports = transports
        self.http = http
        self.policy = policy
        self.listeners: dict[int, Listener] = {}
        # The earliest end of a listener's pause in accepting (out of descriptors).
        self._resume_at: float | None = None

    def listen(self, settings: ListenerSettings, sock: socket.socket | None = None) -> Listener:
        """Open one listening socket (at start-up or at run time), or serve
        ``sock``, one already listening (a worker's, docs/scaling.md);
        raises OSError."""
        if sock is None:
            sock = listening_socket(settings.host, settings.port)
        sock.setblocking(False)
        listener = Listener(settings, sock)
        self.listeners[sock.fileno()] = listener
        self.loop.add(sock.fileno(), select.EPOLLIN, self._ready)
        log.log(logs.NOTICE, "Listening on %s:%d%s", listener.host, listener.port,
                f" ({settings.name})" if settings.name else "")
        return listener

    def close_listener(self, listener: Listener) -> None:
        """Stop listening; the connections it accepted stay up."""
        fd = listener.sock.fileno()
        if self.listeners.pop(fd, None) is None:
            return
        self.loop.remove(fd)
        listener.sock.close()
        log.log(logs.NOTICE, "Stopped listening on %s:%d", listener.host, listener.port)

    def close(self) -> None:
        """Close every listening socket (nothing is logged: the router is ending)."""
        for fd, listener in list(self.listeners.items()):
            self.loop.remove(fd)
            listener.sock.close()
        self.listeners.clear()

    # -- accepting -------------------------------------------------------------------

    def _ready(self, fd: int, _mask: int) -> None:
        listener = self.listeners[fd]
        try:
            self._accept(listener)
        except OSError as exc:
            self._pause(listener, exc)

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
            if listener.settings.refused is not None:
                log.error("Connection from %s to %s:%s closed: its %s", addr[0], listener.host,
                          listener.port, listener.settings.refused)
                sock.close()
                continue
            if listener.settings.http:
                sock.setblocking(False)
                self.http.append((sock, listener))
                continue
            denied = self.policy.socket_accepted()
            if denied is not None:
                policy_log.info("DENY Connection '%s' based on %s", addr[0], denied.reason)
                sock.close()
                continue
            sock.setblocking(False)
            if sock.family == socket.AF_UNIX:
                self.adopt(sock, listener, f"unix:{listener.host}")
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.adopt(sock, listener, f"{addr[0]}:{addr[1]}")

    def adopt(self, sock: socket.socket, listener: Listener, peer: str) -> None:
        """Serve an accepted (non-blocking) socket as a connection of ``listener``."""
        conn = self.transports.start(sock, listener.settings, peer)
        log.info("[C%d] Accepted connection to %s:%s from %s", conn.core.conn_id,
                 listener.host, listener.port, peer)

    def _pause(self, listener: Listener, exc: OSError) -> None:
        """``accept`` failed (out of file descriptors, ENFILE, ENOMEM...): stop
        watching the listener for a back-off delay instead of spinning on a
        backlog it cannot take; the connections it has are served as ever."""
        now = self.clock()
        report = listener.backoff.failed(now)
        resume_at = listener.backoff.resume_at
        assert resume_at is not None
        self.loop.modify(listener.sock.fileno(), 0)
        if self._resume_at is None or resume_at < self._resume_at:
            self._resume_at = resume_at
        if report is not None:
            log.error("Accepting on %s:%d failed %d time%s: %s; paused for %g s "
                      "(reported at most every %g s)", listener.host, listener.port,
                      report, "" if report == 1 else "s", exc.strerror or exc,
                      resume_at - now, listener.backoff.report_every_s)

    # -- the loop's part ---------------------------------------------------------------

    def next_deadline(self) -> float | None:
        return self._resume_at

    def tick(self, now: float) -> None:
        """Paused listeners whose back-off is over accept again."""
        self._resume_at = None
        for listener in self.listeners.values():
            resume_at = listener.backoff.resume_at
            if resume_at is None:
                continue
            if now >= resume_at:
                listener.backoff.resume()
                self.loop.modify(listener.sock.fileno(), select.EPOLLIN)
            elif self._resume_at is None or resume_at < self._resume_at:
                self._resume_at = resume_at


class Upgrades:
    """HTTP connections upgraded to AMQP over WebSockets
    (docs/operations.md#amqp-over-websockets), taken on as AMQP connections.

    Args:
        transports: serves them from now on.
        policy: its connection limits count them, as any AMQP connection.
    """

    def __init__(self, transports: Transports, policy: Policy) -> None:
        self.transports = transports
        self.policy = policy

    def adopt(self, sock: socket.socket, listener: Listener, channel: Channel,
              trailing: bytes) -> None:
        """Serve an HTTP connection upgraded to AMQP over WebSockets (policy
        admitted it): from now on an AMQP connection like any other."""
        try:
            host, port = sock.getpeername()[:2]
        except OSError:
            host, port = "?", 0  # gone already: the transport finds out
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = f"{host}:{port}"
        conn = self.transports.start(sock, listener.settings, peer, ws=channel)
        log.info("[C%d] Accepted WebSocket connection to %s:%s from %s", conn.core.conn_id,
                 listener.host, listener.port, peer)
        if trailing:
            self.transports.received_ws(conn, trailing, decrypted=True)

    def admit(self, sock: socket.socket) -> str | None:
        """Policy's connection limits for a WebSocket upgrade about to become
        an AMQP connection: why it is refused, or None (then it counts)."""
        denied = self.policy.socket_accepted()
        if denied is None:
            return None
        try:
            host = sock.getpeername()[0]
        except OSError:
            host = "?"
        policy_log.info("DENY Connection '%s' based on %s", host, denied.reason)
        return f"connection refused by policy: {denied.reason}"


def accepted(listener: Listener, now: float) -> None:
    """A connection was accepted: a listener that had to pause says it recovered."""
    failures = listener.backoff.succeeded(now)
    if failures:
        log.log(logs.NOTICE, "Accepting on %s:%d again after %d failure%s",
                listener.host, listener.port, failures, "" if failures == 1 else "s")


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host``:``port`` (blocking); raises OSError."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


__all__ = ["HttpHandoff", "Listeners", "Upgrades", "accepted", "listening_socket"]

