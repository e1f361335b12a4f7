"""Very large messages through one router: the router's memory while a
message much larger than its buffers passes, and the bytes per second.

The router's resident memory is sampled every 20 ms from just before the
first byte is sent until the last message is accepted; the figure is the
peak above the resident memory it had, idle with both clients attached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.processes import HOP, Flavour, RouterProcess, finish, router_conf, start

Record = dict[str, Any]

MIB = 1 << 20


class _Peak:
    """The largest resident size seen of a process, sampled in a thread."""

    def __init__(self, router: RouterProcess, every_s: float = 0.02) -> None:
        self.router = router
        self.every_s = every_s
        self.peak = router.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.peak = max(self.peak, self.router.rss())
            except (OSError, RuntimeError):
                return

    def __enter__(self) -> _Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def large_message(flavour: Flavour = HOP) -> Callable[[dict[str, Path], Any], Record]:
    """``scale.large_count`` messages of ``scale.large_size`` bytes, unsettled
    (``scale`` is a ``bench.scenarios.Scale``)."""
    def run(bins: dict[str, Path], scale: Any) -> Record:
        size, n = scale.large_size, scale.large_count
        with RouterProcess(router_conf(flavour=flavour), flavour=flavour) as router:
            recv = start([str(bins["hop-recv"]), router.url, "large", "--count", str(n),
                          "--credit", "2", "--timeout", str(int(scale.timeout))])
            time.sleep(0.5)  # attached, and the router's memory settled
            base = router.rss()
            cpu0 = router.cpu()
            with _Peak(router) as peak:
                sent = finish(start([str(bins["hop-send"]), router.url, "large", "--count",
                                     str(n), "--size", str(size), "--timeout",
                                     str(int(scale.timeout))]), scale.timeout)
                received = finish(recv, scale.timeout)
            cpu = router.cpu() - cpu0
        if received["received"] != n or sent["accepted"] != n:
            raise RuntimeError(f"{n} sent, {received['received']} received, "
                               f"{sent['accepted']} accepted")
        seconds = (received["end_ns"] - sent["start_ns"]) / 1e9
        return {"messages": n, "size_mib": size / MIB, "rate": n / seconds,
                "mib_per_s": n * size / MIB / seconds, "router_cpu_s_per_gib":
                cpu * 1024 * MIB / (n * size), "baseline_rss_mb": base / 2**20,
                "rss_growth_mb": (peak.peak - base) / 2**20}
    return run
