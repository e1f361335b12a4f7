"""``outputFile: syslog``: records to the system log's socket, as qdrouterd's."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Delivery

from router.logs import SYSLOG_SOCKET_ENV
from tests.system.clients import deliver_across
from tests.system.harness import router_conf, start

WAIT_S = 15.0

# SERVER stays on stderr (the harness reads its "Listening on" lines there);
# ROUTER and ROUTER_CORE go to the system log, ROUTER asking for timestamps
# that the system log's records do not carry (it stamps them itself).
CONF_LOGS = """log {
    module: DEFAULT
    enable: info+
}
log {
    module: ROUTER
    enable: info+
    outputFile: syslog
    includeTimestamp: yes
}
log {
    module: ROUTER_CORE
    enable: info+
    outputFile: syslog
}
"""


@pytest.fixture
def syslog(tmp_path: Path) -> Iterator[socket.socket]:
    """The system log's socket, owned by the test: a datagram socket, as
    journald's and rsyslog's /dev/log."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(tmp_path / "log"))
    sock.settimeout(0.2)
    yield sock
    sock.close()


def read_until(sock: socket.socket, pattern: str, got: list[str]) -> str:
    """The first datagram that matches ``pattern``; every one read is kept in ``got``."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            text = sock.recv(65536).decode("utf-8")
        except TimeoutError:
            continue
        got.append(text)
        if re.search(pattern, text):
            return text
    raise AssertionError(f"no record matching {pattern!r} in {got}")


def test_records_go_to_the_system_log_as_daemon_without_a_timestamp(
        tmp_path: Path, syslog: socket.socket) -> None:
    address = str(tmp_path / "log")
    hop = start(tmp_path, router_conf(CONF_LOGS), env={SYSLOG_SOCKET_ENV: address})
    try:
        got: list[str] = []
        # <30>: facility daemon (3) times 8, plus info (6). The program's name
        # and no timestamp of the router's own, though ROUTER asked for one.
        version = read_until(syslog, r"ROUTER \(info\) Version: ", got)
        assert re.fullmatch(r"<30>[\w.-]+: ROUTER \(info\) Version: [\w.+-]+", version), version
        assert deliver_across(hop.url, hop.url, "logged/q", "x") == Delivery.ACCEPTED
        opened = read_until(syslog, r"ROUTER_CORE \(info\) .*Connection Opened", got)
        assert opened.startswith("<30>")
        # Neither module's records went to stderr; SERVER's did.
        text = hop.log_text()
        assert "Listening on" in text
        assert "Version:" not in text and "Connection Opened" not in text

        # The system log goes away: the router says so once on stderr and
        # goes on serving.
        syslog.close()
        (tmp_path / "log").unlink()
        assert deliver_across(hop.url, hop.url, "logged/q", "y") == Delivery.ACCEPTED
        assert deliver_across(hop.url, hop.url, "logged/q", "z") == Delivery.ACCEPTED
        deadline = time.monotonic() + WAIT_S
        while "cannot reach the system log" not in hop.log_text():
            assert time.monotonic() < deadline, hop.log_text()
            time.sleep(0.05)
        text = hop.log_text()
        assert text.count(f"hopd: cannot reach the system log at {address}") == 1
        assert "Traceback" not in text
    finally:
        assert hop.stop() == 0


def test_a_system_log_that_is_not_there_yet_is_used_once_it_is(tmp_path: Path) -> None:
    """As syslog(3): the router starts without it, says so once, and sends
    to it once it is there."""
    address = str(tmp_path / "later")
    hop = start(tmp_path, router_conf(CONF_LOGS), env={SYSLOG_SOCKET_ENV: address})
    try:
        said = f"hopd: cannot reach the system log at {address}: No such file or directory"
        deadline = time.monotonic() + WAIT_S
        while said not in hop.log_text():
            assert time.monotonic() < deadline, hop.log_text()
            time.sleep(0.05)
        assert deliver_across(hop.url, hop.url, "logged/q", "x") == Delivery.ACCEPTED
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as syslog:
            syslog.bind(address)
            syslog.settimeout(0.2)
            assert deliver_across(hop.url, hop.url, "logged/q", "y") == Delivery.ACCEPTED
            opened = read_until(syslog, r"ROUTER_CORE \(info\) .*Connection Opened", [])
            assert opened.startswith("<30>")
        text = hop.log_text()
        assert text.count(said) == 1, "said once, not once a record"
        assert f"hopd: the system log at {address} is back" in text
        assert "Traceback" not in text
    finally:
        assert hop.stop() == 0
