"""The supervisor of ``hopd --workers`` with stand-in workers (forked
processes running a function instead of a router): start-up, a worker
that cannot start, restarts, signals passed on."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import conf
from router.workers import Supervisor, WorkerPlan, worker_count, worker_id

CONF = """router {
    mode: standalone
    id: S
}
listener {
    host: 127.0.0.1
    port: 0
}
"""


def test_worker_ids() -> None:
    assert [worker_id("R", i) for i in range(3)] == ["R", "R.w1", "R.w2"]


def _router(mode: str, extra: str = "") -> conf.RouterConf:
    return conf.parse(CONF.replace("mode: standalone", f"mode: {mode}")
                      .replace("    id: S\n", f"    id: S\n{extra}"), "test.conf")


def test_how_many_workers_run() -> None:
    assert worker_count(_router("standalone"), None) == (1, "")
    assert worker_count(_router("interior", "    workerThreads: 4\n"), None) == (4, "")
    # hopd --workers overrides the file.
    assert worker_count(_router("interior", "    workerThreads: 4\n"), 2) == (2, "")
    assert worker_count(_router("standalone", "    workerThreads: 4\n"), 1) == (1, "")
    # An edge router runs the file's workerThreads as one worker, saying
    # why; hopd --workers runs its workers all the same.
    count, why = worker_count(_router("edge", "    workerThreads: 4\n"), None)
    assert count == 1 and "edge router" in why
    assert worker_count(_router("edge", "    workerThreads: 4\n"), 2) == (2, "")


@pytest.fixture
def signals_restored() -> Iterator[None]:
    """The supervisor blocks the signals it waits for: unblock them after.
    Meanwhile another thread runs with them unblocked, as threads of other
    tests do in a whole test run: a SIGCHLD may go to it instead."""
    done = threading.Event()
    bystander = threading.Thread(target=done.wait, daemon=True)
    bystander.start()
    yield
    done.set()
    bystander.join()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD, signal.SIGTERM,
                                               signal.SIGINT, signal.SIGHUP})


def _ready_then_wait(plan: WorkerPlan, log: Path) -> int:
    """A stand-in worker: note its plan, say it is ready, wait for SIGTERM
    (exit 0) and note SIGHUP."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, lambda *_: _note(log, f"hup {plan.index}"))
    listening = plan.sockets[0].getsockname()[1]
    _note(log, f"up {plan.index} {plan.router_id} {listening} "
               f"{plan.mesh_path(plan.index) if plan.mesh_dir else '-'}")
    assert plan.ready_fd is not None or plan.index >= 0
    if plan.ready_fd is not None:
        os.write(plan.ready_fd, b"1")
    while not stop.wait(0.05):
        pass
    return 0


def _note(log: Path, line: str) -> None:
    with log.open("a") as f:
        f.write(line + "\n")


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _wait(condition: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _supervisor(count: int, log: Path, run: object = None) -> Supervisor:
    cfg = conf.parse(CONF, "test.conf")
    return Supervisor(cfg, count, "S", run or (lambda plan: _ready_then_wait(plan, log)))  # type: ignore[arg-type]


def _signal(thread: threading.Thread, signo: int) -> None:
    """A signal to the supervisor's thread alone (it waits for it there); one
    sent to the process could reach another thread of the test run."""
    assert thread.ident is not None
    signal.pthread_kill(thread.ident, signo)


def _run_in_thread(supervisor: Supervisor) -> tuple[threading.Thread, list[int]]:
    status: list[int] = []
    thread = threading.Thread(target=lambda: status.append(supervisor.run()), daemon=True)
    thread.start()
    return thread, status


def test_workers_share_the_listeners_and_each_has_its_mesh_socket(
        tmp_path: Path, signals_restored: None) -> None:
    log = tmp_path / "log"
    supervisor = _supervisor(3, log)
    supervisor.bind()
    port = supervisor.sockets[0].getsockname()[1]
    mesh = supervisor.mesh_dir
    assert mesh is not None and oct(os.stat(mesh).st_mode & 0o777) == "0o700"
    assert supervisor.start() == 0
    ups = sorted(line for line in _lines(log) if line.startswith("up"))
    assert ups == [f"up 0 S {port} {mesh}/w0", f"up 1 S.w1 {port} {mesh}/w1",
                   f"up 2 S.w2 {port} {mesh}/w2"]
    # The listener is bound once, by the supervisor, for all of them.
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    thread, status = _run_in_thread(supervisor)
    _signal(thread, signal.SIGTERM)
    thread.join(10)
    assert status == [0]
    assert not os.path.exists(mesh)


def test_a_worker_that_cannot_start_stops_the_others(tmp_path: Path,
                                                     signals_restored: None) -> None:
    log = tmp_path / "log"

    def run(plan: WorkerPlan) -> int:
        if plan.index == 1:
            return 2  # a bad configuration, say
        return _ready_then_wait(plan, log)

    supervisor = _supervisor(2, log, run)
    supervisor.bind()
    assert supervisor.start() == 2
    assert not any(supervisor.pids())
    assert supervisor.sockets == []


def test_a_dead_worker_is_started_again_and_signals_reach_each(
        tmp_path: Path, signals_restored: None) -> None:
    log = tmp_path / "log"
    supervisor = _supervisor(2, log)
    supervisor.bind()
    assert supervisor.start() == 0
    thread, status = _run_in_thread(supervisor)
    first = supervisor.pids()[1]
    os.kill(first, signal.SIGKILL)
    _wait(lambda: supervisor.pids()[1] not in (0, first))
    _wait(lambda: sum(line.startswith("up 1 ") for line in _lines(log)) == 2)
    _signal(thread, signal.SIGHUP)
    _wait(lambda: {"hup 0", "hup 1"} <= set(_lines(log)))
    _signal(thread, signal.SIGTERM)
    thread.join(10)
    assert status == [0]
    assert not any(supervisor.pids())
