"""``HOP_TRACEMALLOC``: the router's Python heap traced, a snapshot written
on each SIGUSR2 (router/heap.py, docs/reliability.md#what-grows)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import tracemalloc
from pathlib import Path

from proton import Delivery

from router.heap import ENV_DIRECTORY, ENV_FRAMES
from tests.system.clients import deliver_across
from tests.system.harness import hopd_command, router_conf, start

WAIT_S = 15.0


def _snapshots(directory: Path, count: int) -> list[Path]:
    deadline = time.monotonic() + WAIT_S
    while True:
        found = sorted(directory.glob("hopd-*.tracemalloc"))
        if len(found) >= count:
            return found
        assert time.monotonic() < deadline, f"{len(found)} snapshots in {directory}"
        time.sleep(0.05)


def test_each_sigusr2_writes_a_snapshot_that_compares_with_the_last(tmp_path: Path) -> None:
    snaps = tmp_path / "snaps"
    hop = start(tmp_path, router_conf(), env={ENV_DIRECTORY: str(snaps), ENV_FRAMES: "4"})
    try:
        assert "Tracing Python's allocations (4 frames each)" in hop.log_text()
        hop.proc.send_signal(signal.SIGUSR2)
        [first] = _snapshots(snaps, 1)
        for i in range(20):
            assert deliver_across(hop.url, hop.url, f"heap/{i}", "x") == Delivery.ACCEPTED
        hop.proc.send_signal(signal.SIGUSR2)
        later = _snapshots(snaps, 2)[-1]
        assert first.name == f"hopd-{hop.proc.pid}-1.tracemalloc"
        assert later.name == f"hopd-{hop.proc.pid}-2.tracemalloc"
        assert not list(snaps.glob("*.partial"))
        old, new = tracemalloc.Snapshot.load(str(first)), tracemalloc.Snapshot.load(str(later))
        assert new.traceback_limit == 4
        sites = {stat.traceback[0].filename for stat in new.statistics("filename")}
        assert any("/router/" in name for name in sites), "the router's own allocations"
        assert not any(name == tracemalloc.__file__ for name in sites)
        assert new.compare_to(old, "lineno"), "the two compare site by site"
        deadline = time.monotonic() + WAIT_S
        while f"Memory snapshot written to {later}" not in hop.log_text():
            assert time.monotonic() < deadline, hop.log_text()
            time.sleep(0.05)
        # The router served on while it traced.
        assert deliver_across(hop.url, hop.url, "heap/after", "y") == Delivery.ACCEPTED
    finally:
        assert hop.stop() == 0


def test_a_snapshot_that_cannot_be_written_is_logged_and_the_router_serves_on(
        tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    hop = start(tmp_path, router_conf(), env={ENV_DIRECTORY: str(blocked / "snaps")})
    try:
        hop.proc.send_signal(signal.SIGUSR2)
        deadline = time.monotonic() + WAIT_S
        while "Cannot write the memory snapshot" not in hop.log_text():
            assert time.monotonic() < deadline, hop.log_text()
            time.sleep(0.05)
        assert deliver_across(hop.url, hop.url, "heap/q", "x") == Delivery.ACCEPTED
        assert "Traceback" not in hop.log_text()
    finally:
        assert hop.stop() == 0


def test_a_bad_frame_count_stops_the_start_with_the_reason(tmp_path: Path) -> None:
    conf_path = tmp_path / "hop.conf"
    conf_path.write_text(router_conf())
    done = subprocess.run(hopd_command("-c", str(conf_path)), capture_output=True, text=True,
                          timeout=60, env={**os.environ,
                                           ENV_DIRECTORY: str(tmp_path), ENV_FRAMES: "0"})
    assert done.returncode == 1
    assert f"{ENV_FRAMES} must be a whole number from 1, got '0'" in done.stderr
