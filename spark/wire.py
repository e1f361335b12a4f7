"""One AMQP connection driven from the calling thread: a socket, proton's C
transport, connection and collector, and a loop of its own.

python-qpid-proton's reactor turns every proton event into Python objects
and passes each through a chain of handlers; for a data source that sends
or receives tens of thousands of messages a second, that is most of the
time a row costs (docs/spark.md#where-the-time-goes). A :class:`Wire`
calls proton's C engine through the binding's cffi module instead and
hands its owner the raw events, so the owner deals with a batch of
messages per wake-up and with nothing it does not need.

TLS (``amqps://``) and SASL (ANONYMOUS, or PLAIN with a user) are proton's
own, as with the reactor.
"""

from __future__ import annotations

import select
import socket
import time
import uuid
from typing import Any, Final
from urllib.parse import unquote, urlsplit

from cproton_ffi import ffi, lib

from spark.errors import AmqpConnectError
from spark.options import Endpoint as Where

__all__ = ["Wire", "condition_text"]

#: Bytes read from or written to the socket at most at once.
IO_CHUNK: Final = 1 << 16


def condition_text(cond: Any) -> str:
    """``name: description`` of a proton condition (empty: none set)."""
    if cond == ffi.NULL or not lib.pn_condition_is_set(cond):
        return ""
    name = lib.pn_condition_get_name(cond)
    text = lib.pn_condition_get_description(cond)
    name_s = ffi.string(name).decode() if name != ffi.NULL else "error"
    return f"{name_s}: {ffi.string(text).decode()}" if text != ffi.NULL else name_s


class Wire:
    """A client connection to the router at ``where``, opened at once.

    Raises:
        AmqpConnectError: the router cannot be reached.
    """

    def __init__(self, where: Where) -> None:
        self.where = where
        parts = urlsplit(where.url)
        tls = parts.scheme == "amqps"
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (5671 if tls else 5672)
        try:
            self.sock = socket.create_connection((host, port), timeout=where.connect_timeout_s)
        except OSError as exc:
            raise AmqpConnectError(f"cannot reach the router at {where.url} ({exc})") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.transport = lib.pn_transport()
        self.conn = lib.pn_connection()
        self.collector = lib.pn_collector()
        self._domain: Any = None
        lib.pn_connection_set_container(self.conn, f"hop-spark-{uuid.uuid4()}".encode())
        lib.pn_connection_set_hostname(self.conn, host.encode())
        sasl = lib.pn_sasl(self.transport)
        # The options' user and password, else those of the URL (user:password@host).
        user = where.user or (unquote(parts.username) if parts.username else None)
        password = where.password if where.user else (
            unquote(parts.password) if parts.password else None)
        if user:
            lib.pn_sasl_allowed_mechs(sasl, b"PLAIN")
            lib.pn_sasl_set_allow_insecure_mechs(sasl, True)
            lib.pn_connection_set_user(self.conn, user.encode())
            lib.pn_connection_set_password(self.conn, (password or "").encode())
        else:
            lib.pn_sasl_allowed_mechs(sasl, b"ANONYMOUS")
        if tls:
            self._domain = lib.pn_ssl_domain(lib.PN_SSL_MODE_CLIENT)
            ssl = lib.pn_ssl(self.transport)
            lib.pn_ssl_init(ssl, self._domain, ffi.NULL)
            lib.pn_ssl_set_peer_hostname(ssl, host.encode())
        lib.pn_transport_bind(self.transport, self.conn)
        lib.pn_connection_collect(self.conn, self.collector)
        lib.pn_connection_open(self.conn)
        self.closed = False  # the transport is done: no more I/O
        self.opened = False  # the router's OPEN arrived
        self._rbuf = ffi.new("char[]", IO_CHUNK)
        self._rview = ffi.buffer(self._rbuf)
        self._wbuf = ffi.new("char[]", IO_CHUNK)
        self._wview = memoryview(ffi.buffer(self._wbuf))

    # -- I/O ------------------------------------------------------------------------

    def pump(self, timeout_s: float, wake: socket.socket | None = None) -> None:
        """Write what proton has to send, wait up to ``timeout_s`` for the
        socket (or for ``wake`` to be readable: another thread has work for
        this one), and give proton what arrived."""
        if self.closed:
            return
        t = self.transport
        self._write()
        if self.closed:
            return
        want_write = lib.pn_transport_pending(t) > 0
        try:
            watched = [self.sock] if wake is None else [self.sock, wake]
            readable, writable, _ = select.select(watched, [self.sock] if want_write else [],
                                                  [], max(timeout_s, 0.0))
        except (OSError, ValueError):
            self._end()
            return
        if self.sock in readable:
            self._read()
        if writable:
            self._write()
        lib.pn_transport_tick(t, int(time.monotonic() * 1000))

    def _read(self) -> None:
        t = self.transport
        capacity = lib.pn_transport_capacity(t)
        if capacity <= 0:
            return
        try:
            got = self.sock.recv_into(self._rview, min(capacity, IO_CHUNK))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._end()
            return
        if got == 0:
            lib.pn_transport_close_tail(t)
            return
        lib.pn_transport_push(t, self._rbuf, got)

    def _write(self) -> None:
        t = self.transport
        while True:
            # peek asks the transport for its output: < 0 once it has ended.
            pending = lib.pn_transport_peek(t, self._wbuf, IO_CHUNK)
            if pending < 0:
                if lib.pn_transport_closed(t):
                    self._end()
                return
            if pending == 0:
                return
            try:
                sent = self.sock.send(self._wview[:pending])
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._end()
                return
            lib.pn_transport_pop(t, sent)
            if sent < pending:
                return

    def _end(self) -> None:
        """The socket is done: tell proton (its TRANSPORT_CLOSED follows)."""
        if not self.closed:
            self.closed = True
            lib.pn_transport_close_tail(self.transport)
            lib.pn_transport_close_head(self.transport)

    # -- events ---------------------------------------------------------------------

    def events(self) -> list[tuple[int, Any]]:
        """The events proton has now: (type, event) pairs, the event valid
        until the next call."""
        out: list[tuple[int, Any]] = []
        collector = self.collector
        while True:
            event = lib.pn_collector_peek(collector)
            if event == ffi.NULL:
                return out
            kind = lib.pn_event_type(event)
            if kind == lib.PN_CONNECTION_REMOTE_OPEN:
                self.opened = True
            out.append((kind, lib.pn_event_delivery(event) if kind == lib.PN_DELIVERY
                        else lib.pn_event_link(event)))
            lib.pn_collector_pop(collector)

    def lost(self, detail: str = "") -> str:
        """Why the transport ended, in words: the router never answered, or
        the connection was lost (``detail`` says with what)."""
        why = condition_text(lib.pn_transport_condition(self.transport))
        said = f" ({why})" if why else ""
        url = self.where.url
        if not self.opened:
            return f"cannot reach the router at {url}{said}"
        return f"lost the connection to the router at {url}{detail}{said}"

    def connection_failure(self) -> str:
        return condition_text(lib.pn_connection_remote_condition(self.conn))

    def close(self, linger_s: float = 1.0) -> None:
        """Close the connection, give the router up to ``linger_s`` to
        answer, and free everything."""
        if not self.closed:
            lib.pn_connection_close(self.conn)
            deadline = time.monotonic() + linger_s
            while not self.closed and time.monotonic() < deadline:
                self.pump(0.05)
                self.events()
                if lib.pn_transport_closed(self.transport):
                    break
        self.sock.close()
        self.closed = True
        lib.pn_transport_unbind(self.transport)
        lib.pn_decref(self.transport)
        lib.pn_decref(self.conn)
        lib.pn_collector_free(self.collector)
        if self._domain is not None:
            lib.pn_ssl_domain_free(self._domain)
