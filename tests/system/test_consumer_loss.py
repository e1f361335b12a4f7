"""A consumer that goes away with deliveries in flight: every unsettled
delivery still gets exactly one outcome at its producer
(docs/routing.md#when-a-link-or-connection-goes)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter

from proton import Delivery, Message

from tests.system.clients import connect, wait_all, wait_credit, wait_settled
from tests.system.conftest import StartRouter
from tests.system.harness import Hop, router_conf
from tests.system.network import LOG_INFO

# A consumer that takes N messages without settling them, then dies without
# closing its connection (the socket just goes away).
DYING_CONSUMER = """
import os, sys
from proton.utils import BlockingConnection
conn = BlockingConnection(sys.argv[1], timeout=10)
receiver = conn.create_receiver(sys.argv[2], credit=0)
receiver.link.flow(int(sys.argv[3]))
print("attached", flush=True)
conn.wait(lambda: receiver.fetcher.has_message == int(sys.argv[3]), timeout=10)
os._exit(0)
"""


def test_detached_consumer_sent_copies_modified_queued_copies_released(hop: Hop) -> None:
    producer = connect(hop.url)
    consumer = connect(hop.url)
    receiver = consumer.create_receiver("loss.detach", credit=0)
    receiver.link.flow(6)
    sender = producer.create_sender("loss.detach")
    wait_credit(producer, sender, 250)
    deliveries = [sender.link.send(Message(body=i)) for i in range(10)]
    wait_all([producer, consumer], lambda: receiver.fetcher.has_message == 6)
    receiver.close()
    states = [wait_settled(producer, d) for d in deliveries]
    assert states[:6] == [Delivery.MODIFIED] * 6
    assert states[6:] == [Delivery.RELEASED] * 4
    assert all(d.remote.failed for d in deliveries[:6])
    consumer.close()
    producer.close()


def test_consumer_process_killed_settles_everything_in_flight(hop: Hop) -> None:
    producer = connect(hop.url)
    consumer = subprocess.Popen(
        [sys.executable, "-c", DYING_CONSUMER, hop.url, "loss.drop", "3"],
        stdout=subprocess.PIPE, text=True)
    assert consumer.stdout is not None
    assert consumer.stdout.readline().strip() == "attached"
    sender = producer.create_sender("loss.drop")
    wait_credit(producer, sender, 250)
    deliveries = [sender.link.send(Message(body=i)) for i in range(5)]
    states = [wait_settled(producer, d) for d in deliveries]
    assert consumer.wait(10) == 0
    assert states == [Delivery.MODIFIED] * 3 + [Delivery.RELEASED] * 2
    producer.close()


#: A consumer that takes a stream of messages and is killed while the router
#: still writes to it: the router's read, its write and the transport fail
#: in turn.
FLOODED_CONSUMER = """
import os, sys
from proton.utils import BlockingConnection
conn = BlockingConnection(sys.argv[1], timeout=10)
receiver = conn.create_receiver(sys.argv[2], credit=500)
print("attached", flush=True)
conn.wait(lambda: receiver.fetcher.has_message >= 50, timeout=10)
os.kill(os.getpid(), 9)
"""


def test_a_vanished_consumer_is_logged_failed_once(start_router: StartRouter) -> None:
    hop = start_router(router_conf(LOG_INFO))
    producer = connect(hop.url)
    sender = producer.create_sender("loss.flood")
    for _ in range(3):
        consumer = subprocess.Popen(
            [sys.executable, "-c", FLOODED_CONSUMER, hop.url, "loss.flood"],
            stdout=subprocess.PIPE, text=True)
        assert consumer.stdout is not None
        assert consumer.stdout.readline().strip() == "attached"
        producer.wait(lambda: sender.link.credit >= 200, timeout=10)
        deliveries = [sender.link.send(Message(body="x" * 2000)) for _ in range(200)]
        for delivery in deliveries:
            wait_settled(producer, delivery)
        assert consumer.wait(10) == -9
    producer.close()
    failed = Counter(re.findall(r"\[C(\d+)\] Connection from \S+ failed: ", hop.log_text()))
    assert len(failed) == 3, failed
    assert set(failed.values()) == {1}, f"each connection's failure logged once: {failed}"


def test_multicast_copy_lost_counts_in_aggregate(start_router: object) -> None:
    from tests.system.harness import router_conf

    hop: Hop = start_router(router_conf(  # type: ignore[operator]
        "address {\n    prefix: mcl\n    distribution: multicast\n}\n"))
    producer = connect(hop.url)
    consumer = connect(hop.url)
    stays = consumer.create_receiver("mcl.x", credit=5, name="stays")
    leaves = consumer.create_receiver("mcl.x", credit=5, name="leaves")
    sender = producer.create_sender("mcl.x")
    wait_credit(producer, sender, 250)
    delivery = sender.link.send(Message(body="m"))
    wait_all([producer, consumer],
             lambda: stays.fetcher.has_message == 1 and leaves.fetcher.has_message == 1)
    stays.receive(timeout=10)
    leaves.close()
    stays.accept()
    wait_all([producer, consumer], lambda: delivery.settled, what="settlement")
    assert delivery.remote_state == Delivery.ACCEPTED
    consumer.close()
    producer.close()
