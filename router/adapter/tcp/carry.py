"""One client connection carried to its service: the bytes both ways.

Owns the two sockets of a carried connection and the two directions
between them (client to service, service to client).  Bytes move through a
kernel pipe with ``splice(2)``, never into Python: the router reads what a
side sent only as far as the other side takes it (the pipe holds at most
``PIPE_BYTES``), so a slow receiver holds its sender back through TCP's own
window and the router buffers nothing more.  A side that ends its stream
(FIN) has it ended on the other side once everything it sent is written
(half-close); a side that resets, or that cannot be written because its
peer went, has the other side reset (docs/tcp.md#what-the-router-does-with-a-connection).
Which connector a connection goes to is ``router.core.tcp``'s; this module
only moves bytes and says how the connection ended.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import struct
from collections.abc import Callable
from typing import Final

from router.adapter.loop.eventloop import READ, WRITE, EventLoop

__all__ = ["PIPE_BYTES", "Carried", "Direction", "reset"]

#: What one direction's pipe may hold (asked of the kernel; it may give less).
PIPE_BYTES: Final = 1 << 20
#: At most this many bytes move in one direction per wake-up, so that one
#: busy connection does not starve the others (the rest moves next time).
TURN_BYTES: Final = 4 << 20
_SPLICE: Final = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
_F_SETPIPE_SZ: Final = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_LINGER_RESET: Final = struct.pack("ii", 1, 0)


def reset(sock: socket.socket) -> None:
    """Close ``sock`` with a reset (RST) rather than an orderly end (FIN)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    sock.close()


class Direction:
    """Bytes from ``src`` to ``dst`` through a pipe of their own.

    ``pump`` moves what it can now and says what it waits for; ``eof``:
    ``src`` ended its stream; ``shut``: that end was passed on to ``dst``.
    ``failed``: the side (``"src"`` or ``"dst"``) that went away.
    """

    __slots__ = ("buffered", "capacity", "dst", "eof", "error", "failed", "moved", "pipe_r",
                 "pipe_w", "shut", "src", "want_read", "want_write")

    def __init__(self, src: socket.socket, dst: socket.socket) -> None:
        self.src = src
        self.dst = dst
        self.pipe_r, self.pipe_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            self.capacity = fcntl.fcntl(self.pipe_w, _F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:  # above the system's pipe-max-size: keep the default
            self.capacity = 65536
        self.buffered = 0
        self.moved = 0
        self.eof = False
        self.shut = False
        self.failed = ""
        self.error = ""
        self.want_read = True
        self.want_write = False

    def pump(self) -> int:
        """Move what can be moved now; the bytes written to ``dst``."""
        written = 0
        src, dst = self.src.fileno(), self.dst.fileno()
        while written < TURN_BYTES and not self.failed:
            if self.buffered:
                try:
                    n = os.splice(self.pipe_r, dst, self.buffered, flags=_SPLICE)
                except BlockingIOError:
                    # dst is full: wait for it, and read no more meanwhile.
                    self.want_read, self.want_write = False, True
                    break
                except OSError as exc:
                    self._fail("dst", exc)
                    break
                self.buffered -= n
                written += n
                continue
            if self.eof:
                if not self.shut:
                    self.shut = True
                    try:
                        self.dst.shutdown(socket.SHUT_WR)
                    except OSError as exc:
                        self._fail("dst", exc)
                self.want_read = self.want_write = False
                break
            try:
                n = os.splice(src, self.pipe_w, self.capacity, flags=_SPLICE)
            except BlockingIOError:
                self.want_read, self.want_write = True, False
                break
            except OSError as exc:
                self._fail("src", exc)
                break
            if n == 0:
                self.eof = True
            else:
                self.buffered += n
        else:
            # A turn's worth moved: come back at the next wake-up.
            self.want_read = not self.eof and not self.buffered
            self.want_write = bool(self.buffered)
        self.moved += written
        return written

    def _fail(self, side: str, exc: OSError) -> None:
        # ECONNRESET, EPIPE, ETIMEDOUT...: whatever the error, that side is gone.
        self.failed = side
        self.error = exc.strerror or str(exc)
        self.want_read = self.want_write = False

    def close(self) -> None:
        for fd in (self.pipe_r, self.pipe_w):
            with contextlib.suppress(OSError):
                os.close(fd)


#: Called once when a carried connection is over, with how: ``"closed"``
#: (both streams ended), ``"client reset"`` or ``"service reset"``.
Ended = Callable[[str], None]
#: Called with the bytes a wake-up moved: client to service, service to client.
Moved = Callable[[int, int], None]


class Carried:
    """A client's socket and its service's, joined.

    Args:
        loop: the event loop both sockets are watched in.
        client, service: the two connected, non-blocking sockets.
        moved: told the bytes moved each wake-up (client to service, back).
        ended: told once how it ended; both sockets are closed by then.
    """

    def __init__(self, loop: EventLoop, client: socket.socket, service: socket.socket,
                 moved: Moved, ended: Ended) -> None:
        self.loop = loop
        self.client = client
        self.service = service
        self.up = Direction(client, service)
        self.down = Direction(service, client)
        self._moved = moved
        self._ended = ended
        self._masks: dict[int, int] = {}
        self.over = False
        self._fds = (client.fileno(), service.fileno())

    def start(self) -> None:
        """Begin: whatever the client sent while its service was found moves now."""
        self._run()

    def ready(self, _fd: int, _mask: int) -> None:
        self._run()

    def _run(self) -> None:
        if self.over:
            return
        up = self.up.pump()
        down = self.down.pump()
        if up or down:
            self._moved(up, down)
        if self.up.failed or self.down.failed:
            self._end(self._who_failed())
            return
        if self.up.shut and self.down.shut:
            self._end("closed")
            return
        self._watch(self._fds[0], (READ if self.up.want_read else 0)
                    | (WRITE if self.down.want_write else 0))
        self._watch(self._fds[1], (READ if self.down.want_read else 0)
                    | (WRITE if self.up.want_write else 0))

    def _who_failed(self) -> str:
        up, down = self.up.failed, self.down.failed
        if up == "src" or down == "dst":
            return "client reset"
        return "service reset"

    def _watch(self, fd: int, mask: int) -> None:
        """Watch ``fd`` for ``mask``; a descriptor nothing is waited for is
        not watched at all, so that a peer's hang-up cannot wake the loop
        again and again while its bytes wait for the other side."""
        old = self._masks.get(fd, 0)
        if mask == old:
            return
        if not mask:
            self.loop.remove(fd)
            del self._masks[fd]
        elif not old:
            self.loop.add(fd, mask, self.ready)
            self._masks[fd] = mask
        else:
            self.loop.modify(fd, mask)
            self._masks[fd] = mask

    def _end(self, how: str) -> None:
        self.over = True
        for fd in list(self._masks):
            self.loop.remove(fd)
        self._masks.clear()
        if how == "client reset":
            reset(self.service)
            reset(self.client)
        elif how == "service reset":
            reset(self.client)
            reset(self.service)
        else:
            self.client.close()
            self.service.close()
        self.up.close()
        self.down.close()
        self._ended(how)

    def abort(self) -> None:
        """End it now with resets both ways (the router is ending, or its
        bridge was deleted)."""
        if not self.over:
            self._end("client reset")
