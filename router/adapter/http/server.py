"""HTTP listeners (``http: yes``): the connections they accept, served from
the router's own event loop.

Owns the HTTP connections (parsed by h11): reading requests, answering
``/metrics`` with what the exposition function returns, ``/healthz``
with whether the router is serving, handing the web console's paths to
``router.adapter.http.console`` (whose answer may come later: the connection's
next requests wait for it), any other path with a file of the listener's
``httpRootDir``, writing the responses, and closing
connections idle for a minute.  A request to upgrade to AMQP over
WebSockets is answered by ``router.adapter.connections.websockets`` and its socket
handed over (``upgraded``) to be served as an AMQP connection.  A part
of the loop.  What the metrics say is ``router.adapter.http.metrics``'s.
"""

from __future__ import annotations

import logging
import mimetypes
import select
import socket
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import unquote

import h11

from router.adapter.connections import websockets
from router.adapter.connections.listeners import HttpHandoff, Upgrades
from router.adapter.connections.state import Listener
from router.adapter.connections.tls_pipe import TlsPipe, looks_like_tls
from router.adapter.http.console import Console, HttpCall, Reply, is_console_path
from router.adapter.loop.eventloop import READ, WRITE, EventLoop

__all__ = ["HttpServer", "static_file"]

log = logging.getLogger(__name__)

_IDLE_S = 60.0
_TICK_S = 1.0
_MAX_REQUEST = 16384
_MAX_BODY = 65536
_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain\r\n"
              b"Content-Length: 16\r\nConnection: close\r\n\r\nrequest timeout\n")
_READABLE = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR


def static_file(root: str, target: bytes) -> Path | None:
    """The file under ``root`` a request target names (its query dropped,
    %-escapes decoded; a folder stands for its ``index.html``), or None
    when there is none or the name leads outside ``root``."""
    name = unquote(target.split(b"?", 1)[0].decode("utf-8", "replace"))
    base = Path(root).resolve()
    try:
        path = (base / name.lstrip("/")).resolve()
    except (OSError, RuntimeError, ValueError):
        return None
    if not path.is_relative_to(base):
        return None
    if path.is_dir():
        path = path / "index.html"
    return path if path.is_file() else None


class _HttpConn:
    __slots__ = ("body", "closing", "h11", "last", "out", "plain", "request", "since", "sniff",
                 "sock", "tls", "waiting", "want_write")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_REQUEST)
        #: What is to be written to the socket; with TLS, ``plain`` holds
        #: the responses not yet encrypted.
        self.out = bytearray()
        self.plain = bytearray()
        #: HTTPS (the listener's sslProfile); ``sniff``: plain HTTP is
        #: allowed too (no requireSsl), told apart by the first bytes.
        self.tls: TlsPipe | None = None
        self.sniff = False
        self.want_write = False
        self.closing = False
        self.last = now
        self.request: h11.Request | None = None
        #: The request's body so far; ``waiting``: its answer is to come
        #: (the console asked another router).
        self.body = bytearray()
        self.waiting = False
        #: When the request being read began arriving, or the connection
        #: was accepted (None: no request is awaited).
        self.since: float | None = now


class HttpServer:
    """The HTTP side of the event loop: accepted sockets, requests, responses.

    Args:
        loop: where the connections are watched (``loop.stopping`` makes
            ``/healthz`` answer 503).
        metrics: makes what ``/metrics`` answers with and gives it to the
            callable it is called with (now, or once the other workers of
            the router answered), and its content type.
        handoff: the sockets the HTTP listeners accepted, taken at the next tick.
        upgrades: takes a WebSocket upgrade as an AMQP connection (None:
            upgrades are answered as plain requests).
        console: serves the web console and its JSON endpoint (None: no console).
    """

    def __init__(self, loop: EventLoop, metrics: Callable[[Callable[[bytes], None]], None],
                 metrics_type: str,
                 handoff: HttpHandoff, upgrades: Upgrades | None = None,
                 console: Console | None = None) -> None:
        self._loop = loop
        self._metrics = metrics
        self._metrics_type = metrics_type
        self._clock = loop.clock
        self._handoff = handoff
        self.upgrades = upgrades
        self.console = console
        self.conns: dict[int, tuple[_HttpConn, Listener]] = {}
        self._next_tick = 0.0

    # -- sockets ----------------------------------------------------------------

    def adopt(self, sock: socket.socket, listener: Listener) -> None:
        """Serve an accepted (non-blocking) socket of an HTTP listener."""
        conn = _HttpConn(sock, self._clock())
        context = listener.settings.http_tls
        if context is not None:
            conn.tls = TlsPipe(context)
            conn.sniff = not listener.settings.require_ssl
        self.conns[sock.fileno()] = (conn, listener)
        self._loop.add(sock.fileno(), READ, self.ready)

    def ready(self, fd: int, mask: int) -> None:
        """I/O on one of the HTTP connections."""
        entry = self.conns.get(fd)
        if entry is None:
            return
        conn, listener = entry
        conn.last = self._clock()
        if mask & WRITE:
            self._flush(fd, conn)
        if fd in self.conns and not conn.closing and \
                mask & _READABLE:
            try:
                data = conn.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._close(fd)
                return
            if conn.tls is None:
                self._handle(fd, conn, listener, data)
            else:
                self._received_tls(fd, conn, listener, conn.tls, data)

    def _received_tls(self, fd: int, conn: _HttpConn, listener: Listener, tls: TlsPipe,
                      data: bytes) -> None:
        if conn.sniff:
            conn.sniff = False
            if data and not looks_like_tls(data):
                conn.tls = None  # plain HTTP on a listener that allows it
                self._handle(fd, conn, listener, data)
                return
        try:
            plain = tls.received(data)
        except ssl.SSLError as error:
            log.info("TLS failed on %s:%d: %s", listener.host, listener.port,
                     error.reason or error)
            # The alert OpenSSL wrote tells the client why; then the end.
            conn.out += tls.wire()
            conn.closing = True
            self._flush(fd, conn)
            return
        if plain:
            self._handle(fd, conn, listener, plain)
        if fd in self.conns and conn.tls is tls and (not data or tls.closed):
            self._handle(fd, conn, listener, b"")  # the end of the connection
        elif fd in self.conns and conn.tls is tls:
            self._flush(fd, conn)

    def next_deadline(self) -> float | None:
        if self._handoff:
            return 0.0
        return self._next_tick if self.conns else None

    def tick(self, now: float) -> None:
        """Take the sockets the listeners handed over; once a second, close
        connections idle for a minute, and those whose request (its TLS
        handshake included) has not arrived complete within the listener's
        handshake time: a slow client holds a connection for a bounded time
        only."""
        handoff = self._handoff
        while handoff:
            self.adopt(*handoff.popleft())
        if now < self._next_tick:
            return
        self._next_tick = now + _TICK_S
        for fd, (conn, listener) in list(self.conns.items()):
            limit = listener.settings.initial_handshake_timeout_s
            if now - conn.last > _IDLE_S:
                self._close(fd)
            elif conn.since is not None and limit and not conn.waiting and \
                    not conn.closing and now - conn.since > limit:
                log.info("HTTP request on %s:%d not complete within %d s: closed",
                         listener.host, listener.port, limit)
                if conn.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE) and (
                        conn.tls is None or conn.tls.handshaken):
                    # Written by hand: h11 answers only a request it has read.
                    (conn.out if conn.tls is None else conn.plain).extend(_TIMED_OUT)
                conn.closing = True
                self._flush(fd, conn)

    def close(self) -> None:
        """Close every HTTP connection, and those not taken over yet."""
        for fd in list(self.conns):
            self._close(fd)
        while self._handoff:
            self._handoff.popleft()[0].close()

    def _close(self, fd: int) -> None:
        entry = self.conns.pop(fd, None)
        if entry is None:
            return
        self._loop.remove(fd)
        entry[0].sock.close()

    # -- HTTP ---------------------------------------------------------------------

    def _handle(self, fd: int, conn: _HttpConn, listener: Listener, data: bytes) -> None:
        if data and conn.since is None:
            conn.since = conn.last
        conn.h11.receive_data(data)
        self._process(fd, conn, listener)

    def _process(self, fd: int, conn: _HttpConn, listener: Listener) -> None:
        """Answer the requests read so far, in order; one the console
        answers later (another router's agent) holds up those behind it."""
        parser = conn.h11
        try:
            while not conn.waiting:
                event = parser.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    break
                if isinstance(event, h11.ConnectionClosed):
                    self._close(fd)
                    return
                if isinstance(event, h11.Request):
                    conn.request = event
                    conn.body.clear()
                elif isinstance(event, h11.Data):
                    conn.body += event.data
                    if len(conn.body) > _MAX_BODY:
                        raise h11.RemoteProtocolError("request body too large",
                                                      error_status_hint=413)
                elif isinstance(event, h11.EndOfMessage) and conn.request is not None:
                    if self._upgrade(fd, conn, listener, conn.request):
                        return
                    self._respond(fd, conn, listener, conn.request)
                    if conn.waiting:
                        return
                    if not self._next_cycle(conn):
                        break
        except h11.RemoteProtocolError as error:
            log.info("bad HTTP request on %s:%d: %s", listener.host, listener.port, error)
            if parser.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                status = error.error_status_hint if error.error_status_hint >= 400 else 400
                self._send(conn, status, f"bad request: {error}\n".encode(), "text/plain")
            conn.closing = True
            self._flush(fd, conn)
            return
        conn.closing = parser.our_state is h11.MUST_CLOSE
        self._flush(fd, conn)

    def _next_cycle(self, conn: _HttpConn) -> bool:
        """Ready for the connection's next request (false: it must close)."""
        conn.request = None
        conn.body.clear()
        # The next request's time starts now if it has begun arriving.
        conn.since = self._clock() if conn.h11.trailing_data[0] else None
        if conn.h11.our_state is h11.MUST_CLOSE:
            return False
        conn.h11.start_next_cycle()
        return True

    def _upgrade(self, fd: int, conn: _HttpConn, listener: Listener,
                 request: h11.Request) -> bool:
        """A WebSocket upgrade on a listener with ``websockets: yes``: the
        socket goes to ``upgraded`` as an AMQP connection (true), or the
        request is refused with ``400`` (a bad upgrade) or ``503`` (policy)
        and the reason, and the socket closed."""
        upgrades = self.upgrades
        if (upgrades is None or not listener.settings.websockets
                or not websockets.is_upgrade(request)):
            return False
        channel = websockets.upgrade(request, conn.tls)
        if isinstance(channel, str):
            log.info("WebSocket upgrade refused on %s:%d: %s", listener.host, listener.port,
                     channel)
            self._send(conn, 400, (channel + "\n").encode(), "text/plain")
            conn.request = None
            conn.closing = True
            self._flush(fd, conn)
            return True
        refused = upgrades.admit(conn.sock)
        if refused is not None:
            self._send(conn, 503, (refused + "\n").encode(), "text/plain")
            conn.request = None
            conn.closing = True
            self._flush(fd, conn)
            return True
        trailing = bytes(conn.h11.trailing_data[0])
        del self.conns[fd]
        self._loop.remove(fd)
        upgrades.adopt(conn.sock, listener, channel, trailing)
        return True

    def _respond(self, fd: int, conn: _HttpConn, listener: Listener,
                 request: h11.Request) -> None:
        settings = listener.settings
        path = request.target.split(b"?", 1)[0]
        method = request.method
        if path == b"/metrics" and settings.metrics:
            if method not in (b"GET", b"HEAD"):
                self._send(conn, 405, b"method not allowed\n", "text/plain")
                return
            self._later(fd, conn, listener, method == b"HEAD", lambda reply: self._metrics(
                lambda body: reply(200, body, self._metrics_type, ())))
        elif path == b"/healthz" and settings.healthz:
            ok = not self._loop.stopping
            body = b"OK\n" if ok else b"shutting down\n"
            self._send(conn, 200 if ok else 503, body if method != b"HEAD" else b"",
                       "text/plain", length=len(body))
        elif self.console is not None and settings.console and is_console_path(
                path.decode("latin-1"), settings.http_root_dir is not None):
            self._console(fd, conn, listener, request)
        elif settings.http_root_dir is not None:
            self._file(conn, settings.http_root_dir, request)
        else:
            self._send(conn, 404, b"not found\n", "text/plain")

    def _console(self, fd: int, conn: _HttpConn, listener: Listener,
                 request: h11.Request) -> None:
        """Hand the request to the console; its reply may come later (then
        the connection's next requests wait for it)."""
        assert self.console is not None
        headers = dict(request.headers)
        try:
            peer = conn.sock.getpeername()
        except OSError:  # the client is gone already; its answer goes nowhere
            peer = ("", 0)
        tls = conn.tls
        call = HttpCall(method=request.method.decode("latin-1"),
                        target=request.target.decode("latin-1"), body=bytes(conn.body),
                        authorization=headers.get(b"authorization"), host=str(peer[0]),
                        content_type=headers.get(b"content-type"),
                        origin=headers.get(b"origin"), host_header=headers.get(b"host"),
                        settings=listener.settings, encrypted=tls is not None,
                        certificate=tls.peer_certificate() if tls is not None else None)
        console = self.console
        self._later(fd, conn, listener, request.method == b"HEAD",
                    lambda reply: console.serve(call, reply))

    def _later(self, fd: int, conn: _HttpConn, listener: Listener, head: bool,
               start: Callable[[Reply], None]) -> None:
        """Have ``start`` answer the request, now or later by the reply it is
        given (until then the connection's next requests wait)."""
        answered = False
        synchronous = True

        def reply(status: int, body: bytes, content_type: str,
                  extra: Sequence[tuple[str, str]]) -> None:
            nonlocal answered
            if answered or self.conns.get(fd, (None,))[0] is not conn:
                return  # answered, or the client went away meanwhile
            answered = True
            self._send(conn, status, b"" if head else body, content_type, length=len(body),
                       extra=extra)
            conn.waiting = False
            if not synchronous:
                if self._next_cycle(conn):
                    self._process(fd, conn, listener)
                else:
                    conn.closing = True
                    self._flush(fd, conn)

        conn.waiting = True
        start(reply)
        synchronous = False

    def _file(self, conn: _HttpConn, root: str, request: h11.Request) -> None:
        """A file of the listener's ``httpRootDir`` (a folder's
        ``index.html``); nothing outside the folder."""
        if request.method not in (b"GET", b"HEAD"):
            self._send(conn, 405, b"method not allowed\n", "text/plain")
            return
        path = static_file(root, request.target)
        try:
            body = path.read_bytes() if path is not None else None
        except OSError:
            body = None
        if path is None or body is None:
            self._send(conn, 404, b"not found\n", "text/plain")
            return
        kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if kind.startswith("text/"):
            kind += "; charset=utf-8"
        self._send(conn, 200, body if request.method == b"GET" else b"", kind,
                   length=len(body))

    @staticmethod
    def _send(conn: _HttpConn, status: int, body: bytes, content_type: str,
              length: int | None = None, extra: Sequence[tuple[str, str]] = ()) -> None:
        headers = [("Content-Type", content_type),
                   ("Content-Length", str(len(body) if length is None else length)), *extra]
        parser = conn.h11
        out = conn.out if conn.tls is None else conn.plain
        out += parser.send(h11.Response(status_code=status, headers=headers)) or b""
        if body:
            out += parser.send(h11.Data(data=body)) or b""
        out += parser.send(h11.EndOfMessage()) or b""

    def _flush(self, fd: int, conn: _HttpConn) -> None:
        tls = conn.tls
        if tls is not None:
            if conn.plain:
                tls.send(bytes(conn.plain))
                conn.plain.clear()
            conn.out += tls.wire()
        while conn.out:
            try:
                sent = conn.sock.send(conn.out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._close(fd)
                return
            del conn.out[:sent]
        if conn.out:
            if not conn.want_write:
                conn.want_write = True
                self._loop.modify(fd, READ | WRITE)
            return
        if conn.want_write:
            conn.want_write = False
            self._loop.modify(fd, READ)
        if conn.closing:
            self._close(fd)
