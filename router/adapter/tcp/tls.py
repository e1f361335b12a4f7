"""TLS on either side of a carried TCP connection (docs/tcp.md#tls).

A ``tcpListener`` with an ``sslProfile`` takes TLS clients, a
``tcpConnector`` with one speaks TLS to its service.  ``TlsRelay`` sits
between the TLS socket and one end of a socket pair: what the peer sends
is decrypted onto the pair, what comes back from the pair is encrypted to
the peer.  The bridge carries the pair's other end exactly as it carries a
plain TCP socket (on one router with ``splice``, across the network as
streams), so half-close, resets and flow control stay theirs: a peer's
``close_notify`` (or its end of stream) ends the plaintext stream, the
plaintext stream's end sends ``close_notify`` and ends the TCP stream, and
a reset either side resets the other.  Neither side buffers more than
``HELD_BYTES``: past that it stops reading the other.

The contexts come from the ``sslProfile`` sections, with Python's ``ssl``
(``TlsProfile.http_context`` for a listener, ``client_context`` for a
connector: ``router.adapter.connections.tls``).
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import ssl
from collections.abc import Callable
from typing import Final

from router.adapter.loop.eventloop import READ, WRITE, EventLoop
from router.adapter.tcp.carry import reset

__all__ = ["HELD_BYTES", "TlsRelay"]

log = logging.getLogger(__name__)

#: The most bytes held each way before reading the other side stops.
HELD_BYTES: Final = 1 << 20
_CHUNK: Final = 65536
_HUP: Final = select.EPOLLHUP | select.EPOLLERR


class TlsRelay:
    """One TLS connection and the plaintext socket pair it is relayed to.

    ``plain`` is the end the bridge carries.  ``on_handshake`` is called
    once the handshake is done, ``on_failed`` with the reason once when the
    handshake or a record fails (both sides are reset then).
    """

    def __init__(self, loop: EventLoop, sock: socket.socket, context: ssl.SSLContext, *,
                 server_side: bool, server_hostname: str | None = None,
                 on_failed: Callable[[str], None] | None = None,
                 on_handshake: Callable[[], None] | None = None) -> None:
        self.loop = loop
        self.sock = sock
        mine, plain = socket.socketpair()
        mine.setblocking(False)
        plain.setblocking(False)
        self.mine = mine
        self.plain = plain
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=server_side,
                                    server_hostname=server_hostname)
        self.on_failed = on_failed
        self.on_handshake = on_handshake
        self.handshaken = False
        #: Plaintext from the peer, to write to ``mine``.
        self.to_plain = bytearray()
        #: Plaintext from ``mine`` before the handshake is done.
        self.pending = bytearray()
        #: TLS records to write to the peer.
        self.to_peer = bytearray()
        self.peer_ended = False  # close_notify or end of stream from the peer
        self.plain_ended = False  # end of stream from the bridge
        self.plain_shut = False
        self.peer_shut = False
        self.over = False
        self._masks = {sock.fileno(): 0, mine.fileno(): 0}
        loop.add(sock.fileno(), 0, self._peer_event)
        loop.add(mine.fileno(), 0, self._mine_event)
        if not server_side:
            self._handshake()
        self._watch()

    # -- watching ------------------------------------------------------------------

    def _set(self, fd: int, mask: int, ended: bool, handler: Callable[[int, int], None]) -> None:
        """Watch ``fd`` for ``mask``; a side whose stream ``ended`` with
        nothing to do is not watched at all, since a hang-up is reported
        whatever the mask."""
        current = self._masks.get(fd)
        if mask == 0 and ended:
            if current is not None:
                del self._masks[fd]
                self.loop.remove(fd)
            return
        if current is None:
            self._masks[fd] = mask
            self.loop.add(fd, mask, handler)
        elif current != mask:
            self._masks[fd] = mask
            self.loop.modify(fd, mask)

    def _watch(self) -> None:
        if self.over:
            return
        peer = 0
        if not self.peer_ended and len(self.to_plain) < HELD_BYTES:
            peer |= READ
        if self.to_peer:
            peer |= WRITE
        mine = 0
        if not self.plain_ended and len(self.to_peer) < HELD_BYTES:
            mine |= READ
        if self.to_plain:
            mine |= WRITE
        self._set(self.sock.fileno(), peer, self.peer_ended, self._peer_event)
        self._set(self.mine.fileno(), mine, self.plain_ended, self._mine_event)

    def _peer_event(self, fd: int, mask: int) -> None:
        self._guard(self._peer_ready, fd, mask)

    def _mine_event(self, fd: int, mask: int) -> None:
        self._guard(self._mine_ready, fd, mask)

    def _guard(self, handler: Callable[[int, int], None], fd: int, mask: int) -> None:
        """A fault ends this connection only: the router serves on."""
        try:
            handler(fd, mask)
        except Exception:
            log.exception("TCP TLS relay failed")
            self._reset("an internal error (logged)")

    # -- the TLS side --------------------------------------------------------------

    def _peer_ready(self, _fd: int, mask: int) -> None:
        if self.over:
            return
        if mask & WRITE:
            self._flush_peer()
        if mask & (READ | _HUP) and not self.peer_ended:
            try:
                data = self.sock.recv(_CHUNK)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError as exc:
                self._reset(f"the TLS peer: {exc.strerror or exc}")
                return
            if data is not None:
                if data:
                    self.incoming.write(data)
                else:
                    self.incoming.write_eof()
                self._decrypt()
        elif mask & select.EPOLLERR:
            self._reset("the TLS peer reset the connection")
            return
        self._after()

    def _handshake(self) -> bool:
        try:
            self.obj.do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            self._collect()
            return False
        except (ssl.SSLError, OSError) as exc:
            self._collect()
            self._fail(f"TLS handshake failed: {_reason(exc)}")
            return False
        self.handshaken = True
        self._collect()
        if self.on_handshake is not None:
            self.on_handshake()
        if self.pending:
            self._encrypt(bytes(self.pending))
            self.pending.clear()
        return True

    def _decrypt(self) -> None:
        if not self.handshaken and not self._handshake():
            if self.incoming.eof and not self.over:
                self._fail("the TLS peer ended the connection during the handshake")
            return
        try:
            while True:
                chunk = self.obj.read(_CHUNK)
                if not chunk:
                    break
                self.to_plain += chunk
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            # close_notify, or an end of stream without one: its stream ends.
            self.peer_ended = True
        except ssl.SSLError as exc:
            self._fail(f"a TLS record failed: {_reason(exc)}")
            return
        if self.incoming.eof and not self.incoming.pending:
            self.peer_ended = True
        self._collect()

    def _encrypt(self, plain: bytes) -> None:
        try:
            self.obj.write(plain)
        except ssl.SSLError as exc:
            self._fail(f"TLS failed: {_reason(exc)}")
            return
        self._collect()

    def _collect(self) -> None:
        if self.outgoing.pending:
            self.to_peer += self.outgoing.read()

    def _flush_peer(self) -> None:
        while self.to_peer:
            try:
                sent = self.sock.send(self.to_peer)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._reset(f"writing to the TLS peer: {exc.strerror or exc}")
                return
            del self.to_peer[:sent]

    # -- the plaintext side ----------------------------------------------------------

    def _mine_ready(self, _fd: int, mask: int) -> None:
        if self.over:
            return
        if mask & WRITE:
            self._flush_plain()
        if mask & (READ | _HUP) and not self.plain_ended:
            try:
                data = self.mine.recv(_CHUNK)
            except (BlockingIOError, InterruptedError):
                data = None
            except OSError:
                self._reset("the bridge reset the connection")
                return
            if data is not None:
                if data:
                    if self.handshaken:
                        self._encrypt(data)
                    else:
                        self.pending += data
                else:
                    self.plain_ended = True
        elif mask & select.EPOLLERR:
            self._reset("the bridge reset the connection")
            return
        self._after()

    def _flush_plain(self) -> None:
        while self.to_plain:
            try:
                sent = self.mine.send(self.to_plain)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._reset("the bridge reset the connection")
                return
            del self.to_plain[:sent]

    # -- both ------------------------------------------------------------------------

    def _after(self) -> None:
        """Write what waits, pass ends of stream on, watch again."""
        if self.over:
            return
        self._flush_plain()
        if not self.over:
            self._flush_peer()
        if self.over:
            return
        if self.peer_ended and not self.to_plain and not self.plain_shut:
            self.plain_shut = True
            with contextlib.suppress(OSError):
                self.mine.shutdown(socket.SHUT_WR)
        if self.plain_ended and self.handshaken and not self.pending and not self.peer_shut:
            self.peer_shut = True
            with contextlib.suppress(ssl.SSLError, OSError):
                self.obj.unwrap()  # sends close_notify; the peer's may come later
            self._collect()
            self._flush_peer()
        if self.peer_shut and not self.to_peer and not self.over:
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)
        if self.plain_shut and self.peer_shut and not self.to_peer:
            self._close()
            return
        self._watch()

    def _fail(self, why: str) -> None:
        if self.over:
            return
        log.warning("TCP TLS: %s", why)
        self._flush_peer()  # an alert, where the handshake made one
        if self.on_failed is not None:
            self.on_failed(why)
        self._reset(why)

    def _reset(self, why: str) -> None:
        if self.over:
            return
        log.debug("TCP TLS relay reset: %s", why)
        self._end()
        reset(self.sock)
        reset(self.mine)

    def _close(self) -> None:
        self._end()
        self.sock.close()
        self.mine.close()

    def _end(self) -> None:
        self.over = True
        for fd in list(self._masks):
            with contextlib.suppress(OSError, ValueError, KeyError):
                self.loop.remove(fd)
        self._masks.clear()

    def abort(self) -> None:
        """The router is ending."""
        self._reset("the router is ending")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    return str(exc)
