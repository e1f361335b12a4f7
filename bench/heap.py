"""What grew in a router's Python heap between two of its snapshots
(``HOP_TRACEMALLOC``, router/heap.py): the allocation sites whose traced
size grew most, for the soak's report (docs/reliability.md#what-grows).

    python -m bench.heap OLD.tracemalloc NEW.tracemalloc [--top N]
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def growth(old: Path, new: Path, top: int = 10) -> list[dict[str, Any]]:
    """The ``top`` sites (file and line of the allocation) whose size grew most
    from ``old`` to ``new``: growth in bytes and in blocks, size in ``new``."""
    own = [tracemalloc.Filter(False, tracemalloc.__file__)]  # tracing's own allocations
    before = tracemalloc.Snapshot.load(str(old)).filter_traces(own)
    after = tracemalloc.Snapshot.load(str(new)).filter_traces(own)
    stats = [s for s in after.compare_to(before, "lineno") if s.size_diff > 0]
    stats.sort(key=lambda s: s.size_diff, reverse=True)
    return [{"site": f"{s.traceback[0].filename}:{s.traceback[0].lineno}",
             "growth_bytes": s.size_diff, "growth_blocks": s.count_diff,
             "size_bytes": s.size} for s in stats[:top]]


def lines(sites: list[dict[str, Any]]) -> list[str]:
    """One line a site, as the soak's report prints them."""
    return [f"+{s['growth_bytes'] / 1024:.1f} KiB ({s['growth_blocks']:+d} blocks, "
            f"{s['size_bytes'] / 1024:.1f} KiB now) {_short(s['site'])}" for s in sites]


def _short(site: str) -> str:
    """A site's file from the project's top folder, or from site-packages."""
    for marker in ("/site-packages/", "/lib/python3"):
        if marker in site:
            return site.split(marker, 1)[1]
    for top in ("/router/", "/addressing/", "/linkroute/", "/autolink/", "/conf/"):
        if top in site:
            return top[1:] + site.rsplit(top, 1)[1]
    return site


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.heap", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    for line in lines(growth(args.old, args.new, args.top)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
