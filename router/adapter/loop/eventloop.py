"""The event loop: one epoll, the descriptors registered with it, and the
parts that have timed work.

Owns waiting for I/O and for the earliest deadline, calling the handler
registered for each descriptor that is ready, running the calls other
threads and signal handlers hand in (``defer``), and counting stop
requests.  It knows nothing of what a descriptor is (an AMQP connection,
a listening socket, an HTTP client, a multicast socket): each part
registers its own descriptors with a handler, and a part with timed work
answers ``next_deadline()`` and is ``tick``ed when that time comes.
"""

from __future__ import annotations

import contextlib
import select
import socket
from collections.abc import Callable
from typing import Protocol

__all__ = ["READ", "WRITE", "EventLoop", "Handler", "Part"]

READ = select.EPOLLIN | select.EPOLLRDHUP
WRITE = select.EPOLLOUT

#: Called with a ready descriptor and its epoll event mask.
Handler = Callable[[int, int], None]


class Part(Protocol):
    """Something the loop runs on time."""

    def next_deadline(self) -> float | None:
        """When the part next has work (monotonic seconds), or None."""

    def tick(self, now: float) -> None:
        """Do the work that is due at ``now``."""

    def close(self) -> None:
        """Close the part's descriptors (the router is ending)."""


class EventLoop:
    """Waits on every registered descriptor and on the parts' deadlines.

    Args:
        clock: monotonic clock (seconds).
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.epoll = select.epoll()
        self._handlers: dict[int, Handler] = {}
        self._parts: list[Part] = []
        self._deferred: list[Callable[[], None]] = []
        #: How many stop requests came (``stop``).
        self.stop_requests = 0
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.add(self._wake_r.fileno(), select.EPOLLIN, self._drain_wakeup)

    # -- registration ------------------------------------------------------------

    def add(self, fd: int, mask: int, handler: Handler) -> None:
        """Watch ``fd`` for the events of ``mask``; ``handler`` runs when it is ready."""
        self._handlers[fd] = handler
        self.epoll.register(fd, mask)

    def modify(self, fd: int, mask: int) -> None:
        """Watch ``fd`` for other events (0: none, for now)."""
        with contextlib.suppress(OSError, ValueError):
            self.epoll.modify(fd, mask)

    def remove(self, fd: int) -> None:
        """Stop watching ``fd`` (before it is closed)."""
        if self._handlers.pop(fd, None) is not None:
            with contextlib.suppress(OSError, ValueError):
                self.epoll.unregister(fd)

    def add_part(self, part: Part) -> None:
        """Run ``part`` on time from now on."""
        self._parts.append(part)

    # -- waking up -----------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self.stop_requests > 0

    def wakeup_fd(self) -> int:
        """A descriptor that wakes the loop when written (for signal.set_wakeup_fd)."""
        return self._wake_w.fileno()

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def stop(self) -> None:
        """Count a stop request and wake the loop (safe in a signal handler)."""
        self.stop_requests += 1
        self.wake()

    def defer(self, call: Callable[[], None]) -> None:
        """Run ``call`` in the loop at its next wake-up (from a signal
        handler or another thread)."""
        self._deferred.append(call)
        self.wake()

    def _drain_wakeup(self, _fd: int, _mask: int) -> None:
        with contextlib.suppress(OSError):
            while self._wake_r.recv(512):
                pass

    # -- running ---------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The earliest time a part has work."""
        due: float | None = None
        for part in self._parts:
            when = part.next_deadline()
            if when is not None and (due is None or when < due):
                due = when
        return due

    def run_once(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for I/O; handle what is ready, the
        deferred calls, and every part that is due."""
        try:
            ready = self.epoll.poll(timeout)
        except InterruptedError:
            return
        if self._deferred:
            deferred, self._deferred = self._deferred, []
            for call in deferred:
                call()
        handlers = self._handlers
        for fd, mask in ready:
            handler = handlers.get(fd)
            if handler is not None:
                handler(fd, mask)
        now = self.clock()
        for part in self._parts:
            when = part.next_deadline()
            if when is not None and now >= when:
                part.tick(now)

    def close_parts(self) -> None:
        """Close every part (the router is ending)."""
        for part in self._parts:
            part.close()

    def close(self) -> None:
        """Release the loop's own descriptors (after every part closed its own)."""
        self.epoll.close()
        self._wake_r.close()
        self._wake_w.close()
