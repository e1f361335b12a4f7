"""Real services and their own clients through a line of three hopd
(docs/tcp.md#across-the-network): an HTTP server and ``curl``, Redis and
``redis-cli``, the listener on the first router, the connector on the last.
Each program is Debian's (``.ci/run`` installs them); where one is missing
the test says which and skips."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.system.conftest import StartRouter
from tests.system.test_tcp_network import _connector, _line
from tests.waiting import free_port, wait_for

CLIENT_TIMEOUT_S = 60


def _program(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (.ci/run installs it)")
    return path


def _accepting(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture
def service(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes started by the test, ended after it."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_curl_fetches_from_an_http_server_across_three_routers(
        start_router: StartRouter, service: list[subprocess.Popen[bytes]],
        tmp_path: Path) -> None:
    curl = _program("curl")
    root = tmp_path / "www"
    root.mkdir()
    big = os.urandom(5 << 20)
    (root / "big.bin").write_bytes(big)
    (root / "index.html").write_text("<h1>hop</h1>\n")
    port = free_port()
    service.append(subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait_for(lambda: _accepting(port), 20, "the HTTP server")
    _net, listener = _line(start_router, {"C": _connector("web", "svc", port)})
    base = f"http://127.0.0.1:{listener}"
    out = tmp_path / "got.bin"
    # Two requests, two connections, in one run of curl; the body checked whole.
    result = subprocess.run(
        [curl, "-sS", "--fail", "--max-time", str(CLIENT_TIMEOUT_S), "-o", str(out),
         f"{base}/big.bin", "-o", str(tmp_path / "index.html"), f"{base}/index.html"],
        capture_output=True, timeout=CLIENT_TIMEOUT_S + 10)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(big).digest()
    assert (tmp_path / "index.html").read_text() == "<h1>hop</h1>\n"
    missing = subprocess.run(
        [curl, "-sS", "-o", os.devnull, "-w", "%{http_code}", "--max-time",
         str(CLIENT_TIMEOUT_S), f"{base}/nothing-here"],
        capture_output=True, timeout=CLIENT_TIMEOUT_S + 10)
    assert missing.stdout == b"404"


def test_redis_cli_talks_to_redis_across_three_routers(
        start_router: StartRouter, service: list[subprocess.Popen[bytes]],
        tmp_path: Path) -> None:
    server = _program("redis-server")
    cli = _program("redis-cli")
    port = free_port()
    service.append(subprocess.Popen(
        [server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(tmp_path), "--protected-mode", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait_for(lambda: _accepting(port), 20, "redis-server")
    _net, listener = _line(start_router, {"C": _connector("redis", "svc", port)})

    def redis(*args: str, stdin: bytes | None = None) -> bytes:
        result = subprocess.run([cli, "-h", "127.0.0.1", "-p", str(listener), *args],
                                input=stdin, capture_output=True,
                                timeout=CLIENT_TIMEOUT_S)
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        return result.stdout

    assert redis("PING") == b"PONG\n"
    assert redis("SET", "greeting", "hello across the network") == b"OK\n"
    assert redis("GET", "greeting") == b"hello across the network\n"
    # A 2 MiB value each way (-x: the last argument from standard input).
    value = os.urandom(1 << 20).hex().encode()
    assert redis("-x", "SET", "big", stdin=value) == b"OK\n"
    assert redis("STRLEN", "big") == b"%d\n" % len(value)
    assert redis("--no-raw", "GET", "big").strip().strip(b'"') == value
    # Many commands on one connection: the pipe mode's protocol in bulk.
    commands = b"".join(b"*3\r\n$5\r\nRPUSH\r\n$4\r\nlist\r\n$%d\r\n%d\r\n" % (len(str(i)), i)
                        for i in range(10_000))
    piped = redis("--pipe", stdin=commands)
    assert b"errors: 0, replies: 10000" in piped, piped
    assert redis("LLEN", "list") == b"10000\n"
