"""End to end: one router, one sender, one receiver."""

from __future__ import annotations

from proton import Delivery, Message

from tests.system.clients import connect, wait_settled
from tests.system.harness import Hop


def test_message_routed_and_accepted_end_to_end(hop: Hop) -> None:
    conn = connect(hop.url)
    receiver = conn.create_receiver("orders", credit=10)
    sender = conn.create_sender("orders")
    conn.wait(lambda: sender.link.credit > 0, timeout=10)
    delivery = sender.link.send(Message(body="hello", subject="s1"))
    message = receiver.receive(timeout=10)
    receiver.accept()
    assert wait_settled(conn, delivery) == Delivery.ACCEPTED
    assert message.body == "hello"
    assert message.subject == "s1"
    conn.close()
