"""Settlement propagation: each consumer outcome reaches the producer
(anycast), and multicast outcomes are aggregated
(docs/routing.md#settlement-and-dispositions, docs/routing.md#multicast-outcomes)."""

from __future__ import annotations

import pytest
from proton import Condition, Delivery, Message, Timeout
from proton.utils import BlockingConnection, BlockingReceiver

from tests.system.clients import connect, wait_settled
from tests.system.harness import Hop, router_conf

MULTICAST = """
address {
    prefix: mc
    distribution: multicast
}
"""


def _take(receiver: BlockingReceiver) -> Delivery:
    receiver.receive(timeout=10)
    delivery: Delivery = receiver.fetcher.unsettled[0]
    return delivery


def _settle(receiver: BlockingReceiver, state: int) -> None:
    receiver.settle(state)


def _sender_ready(conn: BlockingConnection, address: str) -> object:
    sender = conn.create_sender(address)
    conn.wait(lambda: sender.link.credit > 0, timeout=10)
    return sender


@pytest.mark.parametrize(
    "state", [Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED]
)
def test_anycast_consumer_outcome_reaches_producer(hop: Hop, state: int) -> None:
    conn = connect(hop.url)
    receiver = conn.create_receiver("q.outcome", credit=5)
    sender = conn.create_sender("q.outcome")
    conn.wait(lambda: sender.link.credit > 0, timeout=10)
    delivery = sender.link.send(Message(body="x"))
    _take(receiver)
    _settle(receiver, state)
    assert wait_settled(conn, delivery) == state
    conn.close()


def test_rejected_error_condition_is_propagated(hop: Hop) -> None:
    conn = connect(hop.url)
    receiver = conn.create_receiver("q.reject", credit=5)
    sender = conn.create_sender("q.reject")
    conn.wait(lambda: sender.link.credit > 0, timeout=10)
    delivery = sender.link.send(Message(body="x"))
    incoming = _take(receiver)
    incoming.local.condition = Condition("app:bad-order", "order 7 is invalid", {"code": 7})
    _settle(receiver, Delivery.REJECTED)
    assert wait_settled(conn, delivery) == Delivery.REJECTED
    condition = delivery.remote.condition
    assert condition is not None
    assert condition.name == "app:bad-order"
    assert condition.description == "order 7 is invalid"
    assert condition.info == {"code": 7}
    conn.close()


def test_modified_fields_are_propagated(hop: Hop) -> None:
    conn = connect(hop.url)
    receiver = conn.create_receiver("q.modified", credit=5)
    sender = conn.create_sender("q.modified")
    conn.wait(lambda: sender.link.credit > 0, timeout=10)
    delivery = sender.link.send(Message(body="x"))
    incoming = _take(receiver)
    incoming.local.failed = True
    incoming.local.undeliverable = True
    incoming.local.annotations = {"retry-after": 5}
    _settle(receiver, Delivery.MODIFIED)
    assert wait_settled(conn, delivery) == Delivery.MODIFIED
    assert delivery.remote.failed is True
    assert delivery.remote.undeliverable is True
    assert delivery.remote.annotations == {"retry-after": 5}
    conn.close()


def test_presettled_message_is_forwarded_presettled(hop: Hop) -> None:
    conn = connect(hop.url)
    receiver = conn.create_receiver("q.presettled", credit=5)
    sender = conn.create_sender("q.presettled")
    conn.wait(lambda: sender.link.credit > 0, timeout=10)
    delivery = sender.link.send(Message(body="fire and forget"))
    delivery.settle()
    message = receiver.receive(timeout=10)
    assert message.body == "fire and forget"
    assert not receiver.fetcher.unsettled, "the copy should have arrived settled"
    conn.close()


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ((Delivery.ACCEPTED, Delivery.ACCEPTED, Delivery.ACCEPTED), Delivery.ACCEPTED),
        ((Delivery.ACCEPTED, Delivery.RELEASED, Delivery.MODIFIED), Delivery.ACCEPTED),
        ((Delivery.ACCEPTED, Delivery.REJECTED, Delivery.RELEASED), Delivery.REJECTED),
        ((Delivery.MODIFIED, Delivery.RELEASED, Delivery.RELEASED), Delivery.MODIFIED),
        ((Delivery.RELEASED, Delivery.RELEASED, Delivery.RELEASED), Delivery.RELEASED),
    ],
)
def test_multicast_outcomes_are_aggregated(start_router: object, states: tuple[int, ...],
                                           expected: int) -> None:
    hop = start_router(router_conf(MULTICAST))  # type: ignore[operator]
    conn = connect(hop.url)
    receivers = [conn.create_receiver("mc.news", credit=5, name=f"r{i}")
                 for i in range(len(states))]
    sender = conn.create_sender("mc.news")
    conn.wait(lambda: sender.link.credit > 0, timeout=10)
    delivery = sender.link.send(Message(body="news"))
    for receiver in receivers:
        _take(receiver)
    for receiver, state in zip(receivers, states, strict=True):
        assert not delivery.settled, "settled before every copy was"
        _settle(receiver, state)
    assert wait_settled(conn, delivery) == expected
    conn.close()


def test_multicast_delivers_one_copy_to_every_consumer(start_router: object) -> None:
    hop = start_router(router_conf(MULTICAST))  # type: ignore[operator]
    conn = connect(hop.url)
    receivers = [conn.create_receiver("mc.all", credit=50, name=f"r{i}") for i in range(3)]
    sender = conn.create_sender("mc.all")
    conn.wait(lambda: sender.link.credit > 0, timeout=10)
    deliveries = [sender.link.send(Message(body=i)) for i in range(10)]
    for receiver in receivers:
        bodies = []
        for _ in range(10):
            bodies.append(receiver.receive(timeout=10).body)
            receiver.accept()
        assert bodies == list(range(10))
    for delivery in deliveries:
        assert wait_settled(conn, delivery) == Delivery.ACCEPTED
    for receiver in receivers:
        with pytest.raises(Timeout):
            receiver.receive(timeout=0.3)
    conn.close()
