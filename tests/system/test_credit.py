"""Credit: a sender gets credit only while its address has a consumer
(docs/routing.md#credit), multicast included, and anonymous senders at once."""

from __future__ import annotations

import pytest
from proton import Delivery, Message

from tests.system.clients import connect, pump, wait_credit, wait_settled
from tests.system.harness import Hop, router_conf

MULTICAST = """
address {
    prefix: mc
    distribution: multicast
}
"""


@pytest.mark.parametrize("address", ["credit.anycast", "mc.credit"])
def test_credit_withheld_until_a_consumer_attaches(start_router: object, address: str) -> None:
    hop: Hop = start_router(router_conf(MULTICAST))  # type: ignore[operator]
    conn = connect(hop.url)
    sender = conn.create_sender(address)
    pump(conn, 0.5)
    assert sender.link.credit == 0
    receiver = conn.create_receiver(address, credit=10)
    wait_credit(conn, sender, 250)
    receiver.close()
    conn.close()


def test_credit_withdrawn_when_last_consumer_leaves(hop: Hop) -> None:
    conn = connect(hop.url)
    first = conn.create_receiver("credit.leave", credit=10, name="first")
    second = conn.create_receiver("credit.leave", credit=10, name="second")
    sender = conn.create_sender("credit.leave")
    wait_credit(conn, sender, 250)
    first.close()
    pump(conn, 0.3)
    assert sender.link.credit == 250, "one consumer is left: credit stays"
    second.close()
    conn.wait(lambda: sender.link.drain_mode, timeout=10, msg="drain requested")
    sender.link.drained()
    conn.wait(lambda: sender.link.credit == 0, timeout=10, msg="credit drained")
    third = conn.create_receiver("credit.leave", credit=10, name="third")
    wait_credit(conn, sender, 250)
    third.close()
    conn.close()


def test_link_capacity_sets_the_window(start_router: object) -> None:
    listener = """listener {
    host: 127.0.0.1
    port: 0
    linkCapacity: 7
}
"""
    hop: Hop = start_router(router_conf(listener=listener))  # type: ignore[operator]
    conn = connect(hop.url)
    receiver = conn.create_receiver("cap", credit=100)
    sender = conn.create_sender("cap")
    wait_credit(conn, sender, 7)
    deliveries = [sender.link.send(Message(body=i)) for i in range(7)]
    conn.wait(lambda: receiver.fetcher.has_message == 7, timeout=10)
    assert sender.link.credit == 0, "seven unsettled deliveries use the whole window"
    for _ in range(7):
        receiver.receive(timeout=10)
        receiver.accept()
    for delivery in deliveries:
        assert wait_settled(conn, delivery) == Delivery.ACCEPTED
    wait_credit(conn, sender, 7)
    conn.close()


def test_anonymous_sender_gets_credit_without_consumers(hop: Hop) -> None:
    conn = connect(hop.url)
    sender = conn.create_sender(None)
    wait_credit(conn, sender, 250)
    conn.close()
