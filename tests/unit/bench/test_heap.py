"""bench.heap: what grew between two snapshots of a heap."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from bench.heap import growth, lines

KEPT: list[bytes] = []


def _grow(n: int) -> None:
    for _ in range(n):
        KEPT.append(bytes(1000))  # the site that grows


def test_the_site_that_grew_comes_first_with_its_growth(tmp_path: Path) -> None:
    tracemalloc.start(1)
    try:
        _grow(10)
        tracemalloc.take_snapshot().dump(str(tmp_path / "old"))
        _grow(500)
        tracemalloc.take_snapshot().dump(str(tmp_path / "new"))
    finally:
        tracemalloc.stop()
        KEPT.clear()
    sites = growth(tmp_path / "old", tmp_path / "new", top=3)
    first = sites[0]
    appended = _grow.__code__.co_firstlineno + 2  # the line of KEPT.append
    assert first["site"].endswith(f"test_heap.py:{appended}"), sites
    assert first["growth_blocks"] >= 500 and first["growth_bytes"] >= 500 * 1000
    assert first["size_bytes"] >= 510 * 1000
    assert all(s["growth_bytes"] > 0 for s in sites)
    assert lines(sites)[0].endswith(f"test_heap.py:{appended}")
    assert not any(s["site"].startswith(tracemalloc.__file__) for s in sites)
