"""The ``hopd`` process: options, configuration errors, signals, logging,
and surviving bad input on a socket."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from proton import Delivery, Message

import router
from tests.system.clients import connect, wait_credit, wait_settled
from tests.system.harness import Hop, hopd_command, router_conf, start
from tests.waiting import free_port


def _run(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(hopd_command(*args), capture_output=True, text=True, timeout=timeout)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


BAD_CONFS = [
    ("unknown section", "router {\n    mode: standalone\n}\nlistenr {\n    port: 0\n}\n",
     r":4:1: .*listenr.*listener"),
    ("unknown attribute", "listener {\n    host: 127.0.0.1\n    prot: 0\n}\n",
     r":3:5: .*prot.*port"),
    ("bad integer", "listener {\n    port: 0\n    maxFrameSize: big\n}\n",
     r":3:\d+: .*maxFrameSize"),
    ("bad boolean", "listener {\n    port: 0\n    authenticatePeer: maybe\n}\n",
     r":3:\d+: .*authenticatePeer"),
    ("out of range", "address {\n    prefix: a\n    priority: 12\n}\n", r":\d+:\d+: .*priority"),
    ("prefix and pattern", "address {\n    prefix: a\n    pattern: b.*\n}\n",
     r":\d+:\d+: .*prefix.*pattern"),
    ("missing mandatory", "autoLink {\n    address: q\n    connection: broker\n}\n",
     r":1:1: .*direction"),
    ("bad enum", "address {\n    prefix: a\n    distribution: roundrobin\n}\n",
     r":3:\d+: .*distribution"),
    ("unterminated section", "listener {\n    port: 0\n", r":\d+:\d+: "),
]


@pytest.mark.parametrize(("what", "text", "expected"), BAD_CONFS, ids=[b[0] for b in BAD_CONFS])
def test_bad_conf_exits_1_with_position_and_opens_no_port(tmp_path: Path, what: str, text: str,
                                                         expected: str) -> None:
    port = free_port()
    listener = f"listener {{\n    host: 127.0.0.1\n    port: {port}\n}}\n"
    conf_path = tmp_path / "bad.conf"
    conf_path.write_text(text + listener)
    result = _run("-c", str(conf_path))
    assert result.returncode == 1, result.stderr
    assert re.search(re.escape(str(conf_path)) + expected, result.stderr), result.stderr
    assert "Listening on" not in result.stderr + result.stdout
    assert not _port_open(port)


def test_all_errors_are_reported_at_once(tmp_path: Path) -> None:
    conf_path = tmp_path / "two.conf"
    conf_path.write_text(
        "listener {\n    prot: 0\n}\naddress {\n    prefix: a\n    pattern: b\n}\n")
    result = _run("--check-conf", str(conf_path))
    assert result.returncode == 1
    assert f"{conf_path}:2:" in result.stderr
    assert f"{conf_path}:4:" in result.stderr or f"{conf_path}:5:" in result.stderr \
        or f"{conf_path}:6:" in result.stderr


def test_check_conf_accepts_a_valid_file(tmp_path: Path) -> None:
    conf_path = tmp_path / "good.conf"
    conf_path.write_text(router_conf())
    result = _run("--check-conf", str(conf_path))
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout


def test_missing_conf_file_is_an_error(tmp_path: Path) -> None:
    result = _run("-c", str(tmp_path / "absent.conf"))
    assert result.returncode == 1
    assert "absent.conf" in result.stderr


def test_version_and_help() -> None:
    version = _run("--version")
    assert version.returncode == 0
    assert re.search(r"hopd, version \d+\.\d+\.\d+ \((compiled|pure) build\)", version.stdout)
    assert f"({router.installed_build()} build)" in version.stdout
    usage = _run("--help")
    assert usage.returncode == 0
    assert "--config" in usage.stdout and "--check-conf" in usage.stdout


def test_embedded_default_listens_on_loopback_5672(tmp_path: Path) -> None:
    assert not Path("/etc/hop/hopd.conf").exists(), "a system conf would be used instead"
    busy = _port_open(5672)
    proc = subprocess.Popen(hopd_command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=tmp_path)
    assert proc.stdout is not None
    try:
        if busy:
            assert proc.wait(20) == 1
            assert "required listener failed" in proc.stdout.read()
            return
        for line in proc.stdout:
            if "Listening on" in line:
                assert "Listening on 127.0.0.1:5672" in line
                break
        conn = connect("amqp://127.0.0.1:5672")
        receiver = conn.create_receiver("default.q", credit=5)
        sender = conn.create_sender("default.q")
        wait_credit(conn, sender, 250)
        delivery = sender.link.send(Message(body="hi"))
        assert receiver.receive(timeout=10).body == "hi"
        receiver.accept()
        assert wait_settled(conn, delivery) == Delivery.ACCEPTED
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


def test_listener_port_in_use_exits_1(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        conf_path = tmp_path / "busy.conf"
        conf_path.write_text(router_conf(listener=f"listener {{\n    host: 127.0.0.1\n"
                                                  f"    port: {port}\n}}\n"))
        result = _run("-c", str(conf_path))
    assert result.returncode == 1
    assert "required listener failed" in result.stderr


def test_sigint_shuts_down_cleanly(tmp_path: Path) -> None:
    hop = start(tmp_path, router_conf())
    hop.proc.send_signal(signal.SIGINT)
    assert hop.proc.wait(15) == 0
    assert "Shut Down" in hop.log_text()


def test_every_listener_is_announced(start_router: object) -> None:
    two = ("listener {\n    host: 127.0.0.1\n    port: 0\n}\n"
           "listener {\n    host: 127.0.0.1\n    port: 0\n    name: second\n}\n")
    hop: Hop = start_router(router_conf(listener=two), listeners=2)  # type: ignore[operator]
    assert len(set(hop.ports)) == 2
    assert re.search(r"Listening on 127\.0\.0\.1:\d+ \(second\)", hop.log_text())
    # The start lines qdrouterd writes, which log tools (its scraper) look for.
    assert re.search(r"SERVER \(info\) Container Name: HopTest\n.*ROUTER \(info\) Version: \d",
                     hop.log_text())


def test_garbage_on_a_socket_does_not_disturb_other_clients(hop: Hop) -> None:
    conn = connect(hop.url)
    receiver = conn.create_receiver("survive.q", credit=5)
    for garbage in (b"GET / HTTP/1.1\r\n\r\n", b"AMQP\x00\x01\x00\x00" + b"\xff" * 64, b"\x00" * 8):
        with socket.create_connection(("127.0.0.1", hop.ports[0]), timeout=5) as sock:
            sock.sendall(garbage)
            sock.settimeout(5)
            try:
                while sock.recv(4096):
                    pass
            except OSError:
                pass
    sender = conn.create_sender("survive.q")
    wait_credit(conn, sender, 250)
    delivery = sender.link.send(Message(body="still here"))
    assert receiver.receive(timeout=10).body == "still here"
    receiver.accept()
    assert wait_settled(conn, delivery) == Delivery.ACCEPTED
    conn.close()


def test_log_section_writes_module_lines_to_a_file(start_router: object, tmp_path: Path) -> None:
    log_file = tmp_path / "router.log"
    extra = (f"log {{\n    module: ROUTER_CORE\n    enable: debug+\n    includeTimestamp: no\n"
             f"    outputFile: {log_file}\n}}\n")
    hop: Hop = start_router(router_conf(extra))  # type: ignore[operator]
    conn = connect(hop.url)
    conn.create_receiver("logged.q", credit=1)
    conn.close()
    text = ""
    for _ in range(100):
        text = log_file.read_text() if log_file.exists() else ""
        if "Connection Closed" in text:
            break
        import time

        time.sleep(0.05)
    assert re.search(r"^ROUTER_CORE \(info\) \[C1\] Connection Opened: ", text, re.M), text
    assert re.search(r"^ROUTER_CORE \(info\) \[C1\]\[L\d+\] Link attached: dir=out "
                     r"source=\{logged\.q\}", text, re.M), text
    assert "SERVER (notice) Listening" not in text, "only ROUTER_CORE goes to this file"
