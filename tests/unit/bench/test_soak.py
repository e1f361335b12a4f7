"""The soak's accounting (bench.soak) on records written by hand: what counts
as lost, as a duplicate, as accepted; its schedule; the memory check."""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from bench import soak
from bench.processes import HOP
from bench.soak_clients import RECORD, Requester


def _record(path: Path, pairs: list[tuple[int, int]], torn: bool = False) -> Path:
    data = b"".join(RECORD.pack(i, n) for i, n in pairs)
    # A consumer killed in the middle of a write leaves part of a record.
    path.write_bytes(data + (b"\x01\x02\x03" if torn else b""))
    return path


def _client(role: str, address: str, cid: int, kind: str, record: Path | None = None,
            summary: dict[str, Any] | None = None) -> soak.Client:
    proc = subprocess.Popen(["true"], text=True)
    proc.wait()
    return soak.Client(role, address, cid, proc, record, kind, summary)


def _producer(cid: int, address: str, kind: str, generated: int, **lists: list[int]) -> soak.Client:
    summary = {"generated": generated, "no_outcome": [], "not_resent": [],
               "rejected_numbers": [], **lists}
    return _client("send", address, cid, kind, summary=summary)


def _clients(tmp_path: Path, members: list[soak.Client]) -> soak.Clients:
    clients = soak.Clients(tmp_path, [])
    clients.all.extend(members)
    return clients


def test_anycast_counts_a_message_once_whichever_consumer_took_it(tmp_path: Path) -> None:
    a = _record(tmp_path / "a.rec", [(1, 0), (1, 2), (1, 3)])
    b = _record(tmp_path / "b.rec", [(1, 1), (1, 3), (9, 4)], torn=True)
    clients = _clients(tmp_path, [_producer(1, "q", "anycast", 4),
                                  _client("recv", "q", 2, "anycast", a),
                                  _client("recv", "q", 3, "anycast", b)])
    lost, flows = soak._losses(clients)
    assert lost == 0
    assert flows["q"] == {"accepted": 4, "lost": 0, "duplicates": 1}


def test_an_accepted_message_nobody_received_is_lost(tmp_path: Path) -> None:
    a = _record(tmp_path / "a.rec", [(1, 0), (1, 1)])
    clients = _clients(tmp_path, [_producer(1, "q", "anycast", 5, no_outcome=[3],
                                            rejected_numbers=[4]),
                                  _client("recv", "q", 2, "anycast", a)])
    lost, flows = soak._losses(clients)
    # 0..4 made; 3 never got an outcome and 4 was rejected, so only 2 is lost.
    assert (lost, flows["q"]["accepted"], flows["q"]["lost"]) == (1, 3, 1)


def test_multicast_wants_every_message_at_every_consumer(tmp_path: Path) -> None:
    a = _record(tmp_path / "a.rec", [(1, 0), (1, 1), (1, 2)])
    b = _record(tmp_path / "b.rec", [(1, 0), (1, 2), (1, 2)])
    clients = _clients(tmp_path, [_producer(1, "mc", "multicast", 3),
                                  _client("recv", "mc", 2, "multicast", a),
                                  _client("recv", "mc", 3, "multicast", b)])
    lost, flows = soak._losses(clients)
    assert lost == 1
    assert flows["mc"] == {"accepted": 3, "lost": 1, "duplicates": 1}


def test_other_producers_and_addresses_do_not_count(tmp_path: Path) -> None:
    a = _record(tmp_path / "a.rec", [(2, 0)])
    clients = _clients(tmp_path, [_producer(1, "q", "anycast", 1),
                                  _producer(2, "r", "anycast", 1),
                                  _client("recv", "r", 3, "anycast", a)])
    lost, flows = soak._losses(clients)
    assert lost == 1
    assert (flows["q"]["lost"], flows["r"]["lost"]) == (1, 0)


def test_the_plan_restarts_in_the_run_and_the_broker_half_way() -> None:
    plan = soak.Plan.for_minutes(30)
    assert plan.seconds == 1800 and plan.broker_restart_s == 900
    assert len(plan.restarts) >= 6 and all(0 < t < plan.seconds - 20 for t in plan.restarts)
    short = soak.Plan.for_minutes(2)
    assert len(short.restarts) == 2 and short.warmup_s + 60 < short.seconds


def test_memory_fails_a_router_that_kept_growing_but_not_a_restarted_one() -> None:
    plan = soak.Plan.for_minutes(2)
    samples = soak.Samples()
    samples.rows["R0"] = [(t, 40.0 + t / 10, 10, t / 10) for t in range(0, 130, 5)]
    samples.rows["R1"] = [(t, 40.0, 10, t / 10) for t in range(0, 130, 5)]
    samples.rows["R2"] = [(t, 40.0 + t / 10, 10, t / 10) for t in range(0, 130, 5)]
    nodes = [soak.Node(name, "", 0, HOP) for name in ("R0", "R1", "R2")]
    nodes[2].restarts = 1
    failures: list[str] = []
    memory = soak._memory(samples, plan, nodes, failures)
    assert [f.split(":")[0] for f in failures] == ["R0"]
    assert memory["R1"]["final_mb"] == memory["R1"]["warm_mb"] == 40.0
    # The slope after warm-up: 0.1 MB a second is 360 MB an hour; none for
    # a router restarted in the run.
    assert memory["R0"]["slope"]["mb_per_hour"] == pytest.approx(360.0)
    assert not memory["R0"]["slope"]["flat"]
    assert memory["R1"]["slope"]["flat"] and memory["R1"]["slope"]["mb_per_hour"] == 0.0
    assert "slope" not in memory["R2"]


def test_the_c_heap_is_fitted_from_the_end_of_the_warm_up() -> None:
    plan = soak.Plan.for_minutes(2)
    samples = soak.Samples()
    samples.rows["R0"] = [(t, 40.0, 10, t / 10) for t in range(0, 130, 5)]
    # Growing during the warm-up (the first 30 s), level after it.
    samples.heap["R0"] = [(t, 9.0 + min(t, 30) / 10, 0.5) for t in range(0, 130, 6)]
    nodes = [soak.Node("R0", "", 0, HOP)]
    memory = soak._memory(samples, plan, nodes, [])
    heap = memory["R0"]["heap"]
    assert heap["warm_mb"] == heap["final_mb"] == 12.0 and heap["free_final_mb"] == 0.5
    assert heap["slope"]["mb_per_hour"] == 0.0 and heap["slope"]["flat"]


def test_a_requester_told_to_stop_waits_its_grace_for_open_requests() -> None:
    """SIGTERM sets a flag that a timer tick may see only after ``tick``: the
    grace for the open requests starts when ``finished`` first sees it, and
    a requester with nothing open finishes at once."""
    args = argparse.Namespace(urls="127.0.0.1:1", grace=60.0, batch=20,
                              role="request", id=1, address="soak.svc")
    requester = Requester(args)
    requester.open = {7: 1.0}
    requester.stopping_requested = True
    assert not requester.finished()
    assert requester.end_by > time.monotonic() + 59
    requester.end_by = time.monotonic() - 1
    assert requester.finished()
    requester.open = {}
    requester.end_by = 0.0
    assert requester.finished()


class _SlowBroker:
    """A broker whose restart fails the way a busy machine made it fail."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def restart(self, timeout: float) -> None:
        raise self.error


@pytest.mark.parametrize("error", [
    subprocess.TimeoutExpired(["rabbitmqctl", "await_startup"], 30),
    AssertionError("rabbitmq did not start within 120 s"),
    OSError("no such file"),
])
def test_a_broker_that_does_not_come_back_is_a_failure_of_the_run_not_a_crash(
        error: Exception) -> None:
    failures: list[str] = []
    assert soak._restart_broker(_SlowBroker(error), failures) is None
    assert len(failures) == 1 and failures[0].startswith("the broker did not come back: ")


def test_the_broker_harness_asks_again_when_rabbitmqctl_does_not_answer(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.system import rabbitmq

    server = tmp_path / "rabbitmq-server"  # stands in for the node: it just runs
    server.write_text("#!/bin/sh\nexec sleep 30\n")
    server.chmod(0o755)
    monkeypatch.setattr(rabbitmq, "RABBITMQ_SERVER", str(server))
    broker = rabbitmq.RabbitMQ("harness")
    asked: list[str] = []

    def ctl(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        asked.append(args[1])
        if len(asked) == 1:  # the first await_startup hangs past its timeout
            raise subprocess.TimeoutExpired(["rabbitmqctl", *args], timeout)
        return subprocess.CompletedProcess(["rabbitmqctl", *args], 0, "", "")

    monkeypatch.setattr(broker, "_ctl", ctl)
    monkeypatch.setattr(broker, "_accepts", lambda: True)
    try:
        broker.start(timeout=30)
        assert asked == ["await_startup", "await_startup"]
    finally:
        if broker.proc is not None:
            broker.proc.kill()
            broker.proc.wait()
        broker.remove()
