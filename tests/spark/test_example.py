"""The windowed-counts example runs end to end, with its demo, against a real router."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.harness import router_conf, start

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark" / "windowed_counts.py"
# A row of the printed table: window start, key, count, sum, avg.
ROW = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) +(\S+) +(\d+) +([\d.]+) +([\d.]+)$",
                 re.MULTILINE)
RUN_TIMEOUT_S = 300


def run_example(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the example; on a timeout, end it with its JVM and Python workers."""
    proc = subprocess.Popen([sys.executable, str(EXAMPLE), *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        pytest.fail(f"the example ran over {RUN_TIMEOUT_S} s\nstdout:\n{stdout}\n"
                    f"stderr:\n{stderr[-5000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.spark
def test_windowed_counts_demo(tmp_path: Path) -> None:
    hop = start(tmp_path, router_conf(), "hop")
    try:
        # From outside the checkout, so that the example finds the spark package itself.
        done = run_example("--url", hop.url, "--demo", "300",
                           "--checkpoint", str(tmp_path / "checkpoint"), cwd=tmp_path)
    finally:
        status = hop.stop()
    assert done.returncode == 0, \
        f"exit status {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr[-5000:]}"
    assert status == 0, f"hopd exit status {status}\n{hop.log_text()}"

    rows = [(window, key, int(count), float(total), float(avg))
            for window, key, count, total, avg in ROW.findall(done.stdout)]
    assert len(rows) == 12, done.stdout  # 4 windows x 3 keys
    assert {key for _, key, _, _, _ in rows} == {"sensor-a", "sensor-b", "sensor-c"}
    assert len({window for window, _, _, _, _ in rows}) == 4
    assert sum(count for _, _, count, _, _ in rows) == 300
    # 300 events evenly over 4 windows and 3 keys in turn; values 1.0 to 4.0 by 0.5 in turn.
    assert {count for _, _, count, _, _ in rows} == {25}
    assert sum(total for _, _, _, total, _ in rows) == \
        pytest.approx(sum(1.0 + 0.5 * (i % 7) for i in range(300)))
    for _, _, count, total, avg in rows:
        assert avg == pytest.approx(total / count, abs=0.0005)
    assert "300 events in 12 (window, key) totals" in done.stdout
