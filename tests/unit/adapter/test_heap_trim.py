"""The loop's once-a-minute trim of the C heap (router/adapter/loop/trim.py)."""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest

from router.adapter.loop.trim import TRIM_EVERY_S, HeapTrim, _malloc_trim


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_trims_on_its_timer_and_counts_what_gave_pages_back() -> None:
    calls: list[int] = []
    answers = iter([1, 0, 1])

    def trim(pad: int) -> int:
        calls.append(pad)
        return next(answers)

    clock = Clock()
    part = HeapTrim(clock, trim=trim)
    assert part.next_deadline() == 100.0 + TRIM_EVERY_S
    for _ in range(3):
        clock.now = part.next_deadline() or 0.0
        part.tick(clock.now)
        assert part.next_deadline() == clock.now + TRIM_EVERY_S
    assert calls == [0, 0, 0]  # keep nothing above the heap's top
    assert (part.trims, part.released) == (3, 2)
    assert part.longest_s >= 0.0


def test_without_malloc_trim_the_part_has_no_deadline() -> None:
    part = HeapTrim(Clock(), trim=None)
    assert part.next_deadline() is None
    part.tick(1000.0)
    assert part.trims == 0


def _resident_anonymous_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(_malloc_trim() is None, reason="the C library has no malloc_trim (not glibc)")
def test_pages_freed_in_the_middle_of_the_heap_go_back() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    size = 100 * 1024  # below glibc's mmap threshold: from the heap
    blocks = [libc.malloc(size) for _ in range(400)]
    guard = libc.malloc(size)  # keeps the freed blocks off the heap's top
    for block in blocks:
        libc.memset(block, 1, size)  # resident
    for block in blocks:
        libc.free(block)
    held = _resident_anonymous_kib()
    clock = Clock()
    part = HeapTrim.for_this_process(clock)
    clock.now = part.next_deadline() or 0.0
    part.tick(clock.now)
    after = _resident_anonymous_kib()
    libc.free(guard)
    assert part.released == 1
    assert held - after > 20 * 1024, (held, after)  # of the 40 MB freed
