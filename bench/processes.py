"""Routers and load-generator processes for benchmark runs, and what they cost.

A ``RouterProcess`` is a ``hopd`` started on a generated configuration with
free ports; its CPU seconds and resident memory are read from /proc.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_LISTENING = re.compile(r"Listening on ([0-9.]+):(\d+)")
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def rss_bytes(pid: int) -> int:
    """Resident set size of a process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class RouterProcess:
    """A running hopd; ``ports`` are its listeners' bound ports, in order."""

    def __init__(self, conf_text: str, name: str = "bench", timeout: float = 60.0) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"hop-bench-{name}-"))
        self.conf = self.dir / "hopd.conf"
        self.conf.write_text(conf_text)
        self.log = self.dir / "hopd.log"
        started = time.perf_counter()
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "router", "-c", str(self.conf)],
                                         stdout=log, stderr=subprocess.STDOUT)
        expected = conf_text.count("listener {")
        deadline = time.monotonic() + timeout
        while True:
            text = self.log.read_text(errors="replace")
            ports = [int(m.group(2)) for m in _LISTENING.finditer(text)]
            if len(ports) >= expected and "Operational" in text:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"hopd did not start:\n{text[-3000:]}")
            time.sleep(0.01)
        self.startup_s = time.perf_counter() - started
        self.ports = ports

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.ports[0]}"

    def cpu(self) -> float:
        return cpu_seconds(self.proc.pid)

    def rss(self) -> int:
        return rss_bytes(self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> RouterProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def router_conf(*, router_id: str = "Bench", listeners: int = 1, extra: str = "") -> str:
    """A standalone router with ``listeners`` loopback listeners on free ports."""
    text = f"router {{\n    mode: standalone\n    id: {router_id}\n}}\n"
    listener = "listener {\n    host: 127.0.0.1\n    port: 0\n    authenticatePeer: no\n}\n"
    text += listener * listeners
    text += "log {\n    module: DEFAULT\n    enable: notice+\n}\n"
    return text + extra


def start(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """Wait for a load-generator process and parse its JSON summary line."""
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{proc.args!r} exited {proc.returncode}: {err.strip()[-2000:]}")
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"{proc.args!r} printed no summary: {out[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result
