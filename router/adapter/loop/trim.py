"""Giving the C heap's free pages back to the system, once a minute.

Owns calling glibc's ``malloc_trim(0)`` on a timer.  What a router frees is
kept by the C allocator for its next allocation; where it was freed from
the middle of the heap (a connection's transport buffers, the frames of a
neighbour that went away, a burst of link-state work), glibc keeps those
pages resident until the heap's top is free too, which a busy heap seldom
is.  Its dynamic mmap threshold makes this worse after a burst: once a
large block allocated with mmap is freed, blocks of that size come from the
heap from then on.  The resident memory of a long-running router then grows
in steps at each such burst without anything being held
(docs/reliability.md#what-grows).  ``malloc_trim(0)`` returns every free
page of every arena to the system (it stays mapped and comes back zeroed
on its next use), so resident memory follows what is in use.

Where the C library has no ``malloc_trim`` (not glibc), the part does
nothing.  A part of the loop.  ``c_heap()`` reads what the C allocator holds
(glibc's ``mallinfo2``) for the ``router`` entity's ``heapInUse`` and
``heapFree``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

#: Seconds between trims: often enough that a burst's pages go back within
#: a minute, seldom enough that the walk over the heap (well under a
#: millisecond for a router's heap) costs nothing per message.
TRIM_EVERY_S = 60.0


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


_LIBC = _libc()


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (glibc 2.33 and later), in its order."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


def _mallinfo2() -> Callable[[], _MallInfo2] | None:
    info = getattr(_LIBC, "mallinfo2", None)
    if info is None:
        return None
    info.argtypes = []
    info.restype = _MallInfo2
    return info  # type: ignore[no-any-return]


_MALLINFO2 = _mallinfo2()


def c_heap() -> tuple[int, int] | None:
    """Bytes the C allocator has handed out (its arenas' blocks in use and
    the blocks it mapped on their own) and bytes it holds free in its
    arenas; None where the C library cannot say (not glibc 2.33 or later).
    Python's objects of up to 512 bytes are not in it: Python's own
    allocator takes them from memory it maps itself."""
    if _MALLINFO2 is None:
        return None
    info = _MALLINFO2()
    return int(info.uordblks + info.hblkhd), int(info.fordblks)


class HeapTrim:
    """Every ``every`` seconds, the C heap's free pages given back.

    Args:
        clock: the loop's monotonic clock.
        every: seconds between trims.
        trim: the trimming call (``malloc_trim``; None: the C library has
            none, and the part has no deadline).
    """

    def __init__(self, clock: Callable[[], float], every: float = TRIM_EVERY_S,
                 trim: Callable[[int], int] | None = None) -> None:
        self.every = every
        self._trim = trim
        self._next = clock() + every if trim is not None else None
        #: How many trims ran, and how many gave pages back.
        self.trims = 0
        self.released = 0
        #: The longest one took (seconds).
        self.longest_s = 0.0

    @classmethod
    def for_this_process(cls, clock: Callable[[], float]) -> HeapTrim:
        return cls(clock, trim=_malloc_trim())

    def next_deadline(self) -> float | None:
        return self._next

    def tick(self, now: float) -> None:
        if self._trim is None:
            return
        self._next = now + self.every
        started = time.perf_counter()
        gave = self._trim(0)
        took = time.perf_counter() - started
        self.trims += 1
        self.released += 1 if gave else 0
        if took > self.longest_s:
            self.longest_s = took
            log.debug("Giving free heap pages back took %.1f ms", took * 1e3)

    def close(self) -> None:
        """Nothing to close."""


__all__ = ["TRIM_EVERY_S", "HeapTrim", "c_heap"]
