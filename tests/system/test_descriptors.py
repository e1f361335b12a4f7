"""More clients than the router has file descriptors for: it pauses accepting
with a back-off instead of spinning, reports it without flooding its log,
keeps serving the connections it has, and accepts again once descriptors
are free."""

from __future__ import annotations

import os
import socket
import time

from proton import Delivery
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender

from tests.system.clients import connect, send_async, wait_all, wait_settled
from tests.system.conftest import StartRouter
from tests.system.harness import Hop
from tests.waiting import wait_for

LIMIT = 64
FLOOD = 150


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the process has used."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_descriptors(hop: Hop) -> int:
    return len(os.listdir(f"/proc/{hop.proc.pid}/fd"))


def round_trip(conn: BlockingConnection, sender: BlockingSender, receiver: BlockingReceiver,
               body: object) -> int:
    """One message to a consumer on the same connection that accepts it."""
    delivery = send_async(sender, body)
    assert receiver.receive(timeout=5).body == body
    receiver.accept()
    return wait_settled(conn, delivery, timeout=5)


def test_out_of_descriptors_pauses_accepting_and_serves_the_others(
        start_router: StartRouter) -> None:
    hop = start_router(max_files=LIMIT)
    served = connect(hop.url)
    receiver = served.create_receiver("still/served", credit=100)
    sender = served.create_sender("still/served")
    assert round_trip(served, sender, receiver, 0) == Delivery.ACCEPTED
    flood: list[socket.socket] = []
    try:
        for _ in range(FLOOD):  # the kernel queues what the router cannot accept
            flood.append(socket.create_connection(("127.0.0.1", hop.ports[0]), timeout=5))
        hop.wait_log(r"Accepting on 127\.0\.0\.1:\d+ failed 1 time: Too many open files; "
                     r"paused for 0\.05 s")
        assert open_descriptors(hop) <= LIMIT
        before = cpu_seconds(hop.proc.pid)
        started = time.monotonic()
        # The connection the router has is served throughout.
        for n in range(1, 4):
            assert round_trip(served, sender, receiver, n) == Delivery.ACCEPTED
            time.sleep(0.8)
        elapsed = time.monotonic() - started
        used = cpu_seconds(hop.proc.pid) - before
        assert used < elapsed / 3, f"{used:.2f} s of CPU in {elapsed:.2f} s: a busy loop"
        reports = hop.log_text().count("Too many open files")
        assert reports <= 2, f"{reports} reports in {elapsed:.1f} s: one per 10 s at most"
    finally:
        for sock in flood:
            sock.close()
    # Descriptors free again: the router accepts and says so.
    hop.wait_log(r"Accepting on 127\.0\.0\.1:\d+ again after \d+ failures", timeout=15)
    late = connect(hop.url)
    late_sender = late.create_sender("still/served")
    delivery = send_async(late_sender, "late")
    wait_all([late, served], lambda: receiver.fetcher.has_message, 10, "the late message")
    assert receiver.receive().body == "late"
    receiver.accept()
    wait_all([late, served], lambda: delivery.settled, 10, "its outcome")
    assert delivery.remote_state == Delivery.ACCEPTED
    late.close()
    served.close()
    wait_for(lambda: open_descriptors(hop) < LIMIT // 2, 15, "the flood's descriptors to close")
