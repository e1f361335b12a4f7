"""Routers and load-generator processes for benchmark runs, and what they cost.

A ``RouterProcess`` is a router started on a generated configuration with
free ports: ``hopd``, or a qdrouterd the user points the bench at to compare
(``--qdrouterd PATH``; nothing here builds or fetches one). Its CPU seconds
and resident memory are read from /proc.
"""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

_LISTENING = re.compile(r"Listening on ([0-9.]+):(\d+)")
_LISTENER_PORT = re.compile(r"listener \{[^}]*?\bport: (\d+)")
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if parent == pid:
            found.append(int(entry.name))
    return found


def rss_bytes(pid: int) -> int:
    """Resident set size of a process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


@attrs.frozen
class Flavour:
    """A router program the bench can start: its command line before ``-c FILE``.

    ``port_zero`` says whether the program binds a free port for ``port: 0``
    and logs it; for one that does not, the bench picks free ports itself.
    ``drops_presettled``: the program may drop pre-settled messages under
    load; its pre-settled runs then count what arrived instead of failing on
    a loss. Both routers do, by design, when a consumer falls behind
    (docs/routing.md#sending-to-consumers).
    """

    name: str
    command: tuple[str, ...]
    port_zero: bool
    drops_presettled: bool = False

    def port(self) -> int:
        """The port to write in a listener section."""
        return 0 if self.port_zero else free_port()


HOP = Flavour("hop", (sys.executable, "-m", "router"), port_zero=True, drops_presettled=True)


def qdrouterd(path: str) -> Flavour:
    return Flavour("qdrouterd", (path,), port_zero=False, drops_presettled=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RouterProcess:
    """A running router; ``ports`` are its listeners' bound ports, in order."""

    def __init__(self, conf_text: str, name: str = "bench", timeout: float = 60.0,
                 flavour: Flavour = HOP, ready: str = "Operational",
                 env: dict[str, str] | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"hop-bench-{name}-"))
        self.conf = self.dir / "hopd.conf"
        self.conf.write_text(conf_text)
        self.log = self.dir / "hopd.log"
        self.started = started = time.perf_counter()
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen([*flavour.command, "-c", str(self.conf)],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, **env} if env else None)
        expected = conf_text.count("listener {")
        deadline = time.monotonic() + timeout
        while True:
            # Both programs log their listeners (bound and listening) and then
            # "Operational" once the configuration is loaded.
            text = self.log.read_text(errors="replace")
            # Each of hopd's workers logs the listeners it serves: once each.
            ports = list(dict.fromkeys(int(m.group(2)) for m in _LISTENING.finditer(text)))
            if len(ports) >= expected and ready in text:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{flavour.name} did not start:\n{text[-3000:]}")
            time.sleep(0.01)
        self.startup_s = time.perf_counter() - started
        # A program given its ports may log its listeners in any order: the
        # conf's order is the one callers index.
        self.ports = ports if flavour.port_zero else [
            int(port) for port in _LISTENER_PORT.findall(conf_text)]

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.ports[0]}"

    def cpu(self) -> float:
        """CPU seconds of the router and of the processes it started (hopd's workers)."""
        return sum(cpu_seconds(pid) for pid in [self.proc.pid, *children(self.proc.pid)])

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


def listener(flavour: Flavour, role: str = "normal", tls: bool = False,
             idle_timeout: int | None = None, extra: str = "") -> str:
    """A loopback listener section on a free port, for anonymous clients (over
    TLS only, with the ``bench-tls`` sslProfile, when ``tls``); ``idle_timeout``
    sets idleTimeoutSeconds (0: no heartbeats asked of clients); ``extra``:
    more attribute lines."""
    text = (f"listener {{\n    host: 127.0.0.1\n    port: {flavour.port()}\n"
            "    authenticatePeer: no\n    saslMechanisms: ANONYMOUS\n")
    if role != "normal":
        text += f"    role: {role}\n"
    if idle_timeout is not None:
        text += f"    idleTimeoutSeconds: {idle_timeout}\n"
    if tls:
        text += "    sslProfile: bench-tls\n    requireSsl: yes\n"
    return text + extra + "}\n"


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, for the TLS scenarios."""
    cert, key = directory / "bench-cert.pem", directory / "bench-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def router_conf(*, router_id: str = "Bench", listeners: int = 1, extra: str = "",
                flavour: Flavour = HOP, tls: tuple[Path, Path] | None = None,
                idle_timeout: int | None = None) -> str:
    """A standalone router with ``listeners`` loopback listeners on free ports;
    with ``tls`` (certificate, key) they take TLS clients only; ``idle_timeout``
    as for ``listener``."""
    text = f"router {{\n    mode: standalone\n    id: {router_id}\n}}\n"
    if tls is not None:
        text += (f"sslProfile {{\n    name: bench-tls\n    certFile: {tls[0]}\n"
                 f"    privateKeyFile: {tls[1]}\n}}\n")
    text += "".join(listener(flavour, tls=tls is not None, idle_timeout=idle_timeout)
                    for _ in range(listeners))
    text += "log {\n    module: DEFAULT\n    enable: notice+\n}\n"
    return text + extra


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's open-file limit to ``wanted`` (the hard limit too,
    when allowed: root may), else as far as the hard limit allows; routers and
    load generators started afterwards inherit it.  Returns the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return soft
    if hard != resource.RLIM_INFINITY and hard < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, wanted))
            return wanted
        except (ValueError, OSError):
            pass  # not privileged: the hard limit stands
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


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
