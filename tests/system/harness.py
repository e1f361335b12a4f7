"""Starting real ``hopd`` processes on loopback for system tests."""

from __future__ import annotations

import functools
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

LISTENING = re.compile(r"Listening on ([0-9.]+):(\d+)")
STARTUP_TIMEOUT_S = 20.0

STANDARD_LISTENER = """\
listener {
    host: 127.0.0.1
    port: 0
    saslMechanisms: ANONYMOUS
    authenticatePeer: no
}
"""


def router_conf(extra: str = "", *, router_id: str = "HopTest",
                listener: str = STANDARD_LISTENER) -> str:
    """A standalone router conf with one ephemeral-port listener."""
    return f"router {{\n    mode: standalone\n    id: {router_id}\n}}\n{listener}{extra}"


class Hop:
    """A running ``hopd`` with its conf and log files."""

    def __init__(self, proc: subprocess.Popen[bytes], conf_path: Path, log_path: Path,
                 ports: list[int]) -> None:
        self.proc = proc
        self.conf_path = conf_path
        self.log_path = log_path
        self.ports = ports
        #: The exit status teardown expects (a test that kills the router changes it).
        self.expected_status = 0

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.ports[0]}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: the router dies with no goodbye to anyone."""
        self.proc.kill()
        self.proc.wait(5)
        self.expected_status = -signal.SIGKILL

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                return -9
        return self.proc.returncode

    def wait_log(self, pattern: str, timeout: float = 10.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while time.monotonic() < deadline:
            found = regex.search(self.log_text())
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} not in log:\n{self.log_text()}")


def hopd_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "router", *args]


def start(directory: Path, conf_text: str, name: str = "hop", listeners: int = 1,
          max_files: int | None = None, args: tuple[str, ...] = (),
          env: dict[str, str] | None = None) -> Hop:
    """Write ``conf_text`` and start ``hopd`` on it; wait until it listens.
    ``max_files`` sets the router's limit of open file descriptors; ``args``
    are further hopd options, ``env`` further environment variables."""
    conf_path = directory / f"{name}.conf"
    conf_path.write_text(conf_text)
    log_path = directory / f"{name}.log"
    env = dict(os.environ, HOP_RAISE_INTERNAL_ERRORS="1", **(env or {}))
    with log_path.open("wb") as log_file:
        limit = None if max_files is None else functools.partial(
            resource.setrlimit, resource.RLIMIT_NOFILE, (max_files, max_files))
        proc = subprocess.Popen(hopd_command("-c", str(conf_path), *args), stdout=log_file,
                                stderr=subprocess.STDOUT, env=env, preexec_fn=limit)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        text = log_path.read_text(errors="replace")
        # Each worker of a router logs every listener, in the conf's order:
        # the first sighting of each port keeps that order.
        ports = list(dict.fromkeys(int(m.group(2)) for m in LISTENING.finditer(text)))
        if len(ports) >= listeners:
            return Hop(proc, conf_path, log_path, ports)
        if proc.poll() is not None:
            raise AssertionError(f"hopd exited with {proc.returncode}:\n{text}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"hopd did not start listening:\n{log_path.read_text()}")


