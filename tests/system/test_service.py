"""hopd as a system service: -d, -P, -U, systemd readiness, graceful shutdown,
log reopening on SIGHUP."""

from __future__ import annotations

import contextlib
import os
import pwd
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from proton import Delivery
from proton.utils import ConnectionClosed

from router.cli import hopd
from tests.system.clients import connect, send_async, wait_all
from tests.system.harness import LISTENING, hopd_command
from tests.system.rabbitmq import free_port
from tests.waiting import wait_for


def conf_text(port: int, extra: str = "", listener: str = "") -> str:
    return (f"router {{\n    mode: standalone\n    id: Svc\n}}\n"
            f"listener {{\n    host: 127.0.0.1\n    port: {port}\n"
            f"    saslMechanisms: ANONYMOUS\n{listener}}}\n{extra}")


def accepts(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in \
        Path(f"/proc/{pid}/status").read_text().lower()


@pytest.fixture
def pids() -> Iterator[list[int]]:
    """Daemons a test started: killed at teardown if still alive."""
    started: list[int] = []
    yield started
    for pid in started:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def daemon(tmp_path: Path, conf: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "hopd.conf"
    path.write_text(conf)
    return subprocess.run(hopd_command("-c", str(path), "-d", *args), capture_output=True,
                          text=True, timeout=60)


def test_daemon_returns_once_operational_and_the_pidfile_holds_its_pid(
        tmp_path: Path, pids: list[int]) -> None:
    port = free_port()
    pidfile = tmp_path / "hopd.pid"
    log = tmp_path / "hopd.log"
    done = daemon(tmp_path, conf_text(port, f"log {{\n    module: DEFAULT\n"
                                            f"    outputFile: {log}\n}}\n"),
                  "-P", str(pidfile))
    assert (done.returncode, done.stderr) == (0, "")
    assert accepts(port), "the port accepts as soon as the parent has returned"
    pid = int(pidfile.read_text())
    pids.append(pid)
    assert alive(pid) and pid != os.getpid()
    conn = connect(f"amqp://127.0.0.1:{port}")
    conn.close()
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not alive(pid), 15, "the daemon to stop")
    assert not pidfile.exists(), "the pidfile is removed at exit"
    assert "Shut Down" in log.read_text()


def test_daemon_with_a_bad_conf_exits_1_with_the_error_and_leaves_nothing(
        tmp_path: Path) -> None:
    done = daemon(tmp_path, "router {\n    mode: sideways\n}\n", "-P",
                  str(tmp_path / "hopd.pid"))
    assert done.returncode == 1
    assert f"{tmp_path / 'hopd.conf'}:2:" in done.stderr
    assert not (tmp_path / "hopd.pid").exists()
    ps = subprocess.run(["pgrep", "-f", str(tmp_path / "hopd.conf")], capture_output=True)
    assert ps.stdout == b"", "no process is left behind"


def test_daemon_on_a_busy_port_exits_1_with_the_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = daemon(tmp_path, conf_text(port))
    assert done.returncode == 1
    assert "required listener failed" in done.stderr and "Address already in use" in done.stderr


def test_a_pidfile_of_a_running_router_refuses_a_second_start_and_a_stale_one_is_replaced(
        tmp_path: Path, pids: list[int]) -> None:
    pidfile = tmp_path / "hopd.pid"
    pidfile.write_text("999999\n")  # no such process: stale
    port = free_port()
    first = daemon(tmp_path, conf_text(port), "-P", str(pidfile))
    assert first.returncode == 0, first.stderr
    pid = int(pidfile.read_text())
    pids.append(pid)
    second_conf = tmp_path / "second.conf"
    second_conf.write_text(conf_text(free_port()))
    second = subprocess.run(hopd_command("-c", str(second_conf), "-P", str(pidfile)),
                            capture_output=True, text=True, timeout=60)
    assert second.returncode == 1
    assert f"pidfile {pidfile} names a running hopd (pid {pid})" in second.stderr
    assert int(pidfile.read_text()) == pid
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not alive(pid), 15, "the daemon to stop")


def start_foreground(tmp_path: Path, conf: str, *args: str,
                     env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], Path]:
    path = tmp_path / "fg.conf"
    path.write_text(conf)
    log = tmp_path / "fg.out"
    with log.open("wb") as out:
        proc = subprocess.Popen(hopd_command("-c", str(path), *args), stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    return proc, log


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


def test_systemd_hears_ready_only_once_the_port_accepts_and_stopping_at_shutdown(
        tmp_path: Path) -> None:
    address = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(address)
        sock.settimeout(20)
        port = free_port()
        proc, _ = start_foreground(tmp_path, conf_text(port), env={"NOTIFY_SOCKET": address})
        try:
            ready = sock.recv(4096).decode()
            assert accepts(port), "READY=1 comes after the port accepts"
            assert ready.splitlines()[0] == "READY=1"
            assert any(line.startswith("STATUS=Operational") for line in ready.splitlines())
            assert f"MAINPID={proc.pid}" in ready.splitlines()
            proc.send_signal(signal.SIGTERM)
            stopping = sock.recv(4096).decode()
            assert stopping.splitlines()[0] == "STOPPING=1"
            # It stops on that one SIGTERM (another, sent while the
            # interpreter is ending, would find the default handler back).
            assert proc.wait(30) == 0
        finally:
            stop(proc)


def test_qdrouterds_include_and_test_hooks_options_are_accepted(tmp_path: Path) -> None:
    """qpid-dispatch's test harness starts its router with ``-I DIR`` and some
    tests add ``-T``: hopd takes both and serves; with ``-T`` a delivery is
    stuck after 3 s, as with qdrouterd's test hooks."""
    port = free_port()
    proc, log = start_foreground(tmp_path, conf_text(port), "-I", str(tmp_path), "-T")
    try:
        wait_for(lambda: accepts(port) or proc.poll() is not None, 20, "the listener")
        assert proc.poll() is None, log.read_text()
        with contextlib.closing(connect(f"127.0.0.1:{port}")) as conn:
            receiver = conn.create_receiver("q")
            sent = send_async(conn.create_sender("q"), "through")
            assert receiver.receive(timeout=10).body == "through"
            receiver.accept()
            wait_all([conn], lambda: sent.settled, what="the outcome")
            assert sent.remote_state == Delivery.ACCEPTED
            held = send_async(conn.create_sender("q", name="held"), "held")
            assert receiver.receive(timeout=10).body == "held"  # never settled
            wait_for(lambda: "1 delivery unsettled for more than 3 seconds" in log.read_text(),
                     10, "the stuck delivery's log line")
            assert not held.settled
    finally:
        assert stop(proc) == 0


def test_user_option_drops_to_that_user_and_keeps_serving(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("-U needs the tests to run as root (as they do on CI)")
    nobody = pwd.getpwnam("nobody")
    port = free_port()
    proc, log = start_foreground(tmp_path, conf_text(port), "-U", "nobody")
    try:
        wait_for(lambda: "Operational" in log.read_text(), 20, "the router to start")
        status = Path(f"/proc/{proc.pid}/status").read_text().splitlines()
        uids = next(line for line in status if line.startswith("Uid:")).split()[1:]
        gids = next(line for line in status if line.startswith("Gid:")).split()[1:]
        assert uids == [str(nobody.pw_uid)] * 4 and gids == [str(nobody.pw_gid)] * 4
        conn = connect(f"amqp://127.0.0.1:{port}")
        receiver = conn.create_receiver("as-nobody", credit=1)
        sender = conn.create_sender("as-nobody")
        conn.wait(lambda: sender.link.credit > 0, timeout=10)
        send_async(sender, "hello")
        assert receiver.receive(timeout=10).body == "hello"
        conn.close()
    finally:
        assert stop(proc) == 0


def test_user_option_is_refused_when_not_root(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "u.conf"
    conf.write_text(conf_text(free_port()))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    result = CliRunner().invoke(hopd, ["-c", str(conf), "-U", "root"])
    assert result.exit_code == 1
    assert "-U root needs hopd to be started as root" in result.output


def test_sigterm_lets_in_flight_deliveries_settle_then_releases_the_rest(
        tmp_path: Path) -> None:
    """1,000 unsettled deliveries through a consumer that settles slowly:
    during the grace period its outcomes still reach the producer; then the
    rest are released; every delivery ends with one outcome, and hopd exits 0."""
    port = free_port()
    grace = 3.0
    proc, log = start_foreground(tmp_path, conf_text(port, listener="    linkCapacity: 1000\n"),
                                 "--shutdown-grace", str(grace))
    wait_for(lambda: LISTENING.search(log.read_text()) is not None, 20, "the router")
    producer = connect(f"amqp://127.0.0.1:{port}")
    consumer = connect(f"amqp://127.0.0.1:{port}")
    receiver = consumer.create_receiver("slow", credit=1000)
    sender = producer.create_sender("slow")
    producer.wait(lambda: sender.link.credit >= 1000, timeout=10)
    deliveries = [send_async(sender, n) for n in range(1000)]
    fetcher = receiver.fetcher
    wait_all([producer, consumer], lambda: fetcher.has_message == 1000,
             what="1,000 messages at the consumer")
    for _ in range(1000):
        fetcher.pop()  # received, not settled
    # Settle 300 before the signal, 200 more during the grace period.
    for _ in range(300):
        receiver.accept()
    wait_all([producer, consumer], lambda: sum(d.settled for d in deliveries) == 300,
             what="300 outcomes")
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    wait_all([producer, consumer], lambda: "Shutting down" in log.read_text(),
             what="the shutdown to begin")
    for _ in range(200):
        receiver.accept()
    with contextlib.suppress(ConnectionClosed):
        wait_all([producer, consumer], lambda: all(d.settled for d in deliveries),
                 timeout=grace + 10, what="every outcome")
    # The consumer's connection may have closed first: read what the
    # producer's still holds (the outcomes come before the close).
    with contextlib.suppress(ConnectionClosed):
        producer.wait(lambda: all(d.settled for d in deliveries), timeout=10)
    assert proc.wait(grace + 10) == 0
    assert time.monotonic() - signalled < grace + 5
    outcomes = [d.remote_state for d in deliveries]
    assert all(d.settled for d in deliveries)
    assert outcomes.count(Delivery.ACCEPTED) == 500
    assert outcomes.count(Delivery.RELEASED) == 500
    assert "released 500 unsettled deliveries" in log.read_text()


def test_sighup_reopens_the_log_file(tmp_path: Path) -> None:
    log = tmp_path / "router.log"
    port = free_port()
    proc, _ = start_foreground(tmp_path, conf_text(
        port, f"log {{\n    module: DEFAULT\n    outputFile: {log}\n}}\n"))
    try:
        wait_for(lambda: log.exists() and "Operational" in log.read_text(), 20, "the router")
        rotated = tmp_path / "router.log.1"
        log.rename(rotated)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: log.exists() and "Log files reopened" in log.read_text(), 10,
                 "a new log file")
        assert "Log files reopened" not in rotated.read_text()
        assert proc.poll() is None, "SIGHUP does not stop the router"
    finally:
        assert stop(proc) == 0
    assert "Shut Down" in log.read_text()
