"""Small helpers around proton's blocking client for system tests."""

from __future__ import annotations

import time
from typing import Any

from proton import Delivery, Message
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender, LinkDetached

TIMEOUT_S = 10.0


def connect(url: str) -> BlockingConnection:
    return BlockingConnection(url, timeout=TIMEOUT_S)


def send_async(sender: BlockingSender, body: Any, **props: Any) -> Delivery:
    """Send without waiting for settlement; returns the delivery."""
    return sender.link.send(Message(body=body, **props))


def send_raw(sender: BlockingSender, encoded: bytes, tag: bytes = b"raw") -> Delivery:
    """Send an already encoded message as one delivery."""
    link = sender.link
    delivery = link.delivery(tag)
    link.stream(encoded)
    link.advance()
    return delivery


def wait_settled(conn: BlockingConnection, delivery: Delivery, timeout: float = TIMEOUT_S) -> int:
    """Wait until the router settles ``delivery``; return its remote state."""
    conn.wait(lambda: delivery.remote_state != 0 and delivery.settled, timeout=timeout,
              msg="waiting for settlement")
    return int(delivery.remote_state)


def wait_all(conns: list[BlockingConnection], condition: Any, timeout: float = TIMEOUT_S,
             what: str = "condition") -> None:
    """Process I/O on several client connections until ``condition()`` holds."""
    deadline = time.monotonic() + timeout
    for conn in conns:
        conn.container.timeout = 0.01
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        for conn in conns:
            conn.container.process()


def pump(conn: BlockingConnection, seconds: float) -> None:
    """Let the client process I/O for ``seconds`` (to observe that nothing happens)."""
    deadline = time.monotonic() + seconds
    conn.wait(lambda: time.monotonic() >= deadline, timeout=seconds + TIMEOUT_S)


def wait_credit(conn: BlockingConnection, sender: BlockingSender, credit: int,
                timeout: float = TIMEOUT_S) -> None:
    conn.wait(lambda: sender.link.credit == credit, timeout=timeout,
              msg=f"waiting for credit {credit} (have {sender.link.credit})")


def receive_all(receiver: BlockingReceiver, count: int, timeout: float = TIMEOUT_S,
                accept: bool = True) -> list[Message]:
    messages = []
    for _ in range(count):
        messages.append(receiver.receive(timeout=timeout))
        if accept:
            receiver.accept()
    return messages


def wait_through_detaches(conn: BlockingConnection, condition: Any,
                          timeout: float = TIMEOUT_S, what: str = "condition") -> list[str]:
    """Wait for ``condition`` while links are detached by the peer (which
    makes ``BlockingConnection.wait`` raise); return the detach conditions."""
    detached: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.wait(condition, timeout=max(0.1, deadline - time.monotonic()), msg=what)
            return detached
        except LinkDetached as exc:
            detached.append(str(exc.condition))


def send_settled(conn: BlockingConnection, sender: BlockingSender, bodies: list[Any],
                 timeout: float = TIMEOUT_S) -> list[int]:
    """Send one message per body without waiting in between, then wait until
    every one is settled; return their outcomes in order."""
    deliveries = [send_async(sender, body) for body in bodies]
    conn.wait(lambda: all(d.settled for d in deliveries), timeout=timeout,
              msg=f"{len(deliveries)} deliveries settled")
    return [int(d.remote_state) for d in deliveries]


#: The outcomes ``known_pattern`` gives: 10 accepted, 3 rejected, 2 released.
KNOWN_PATTERN = [Delivery.ACCEPTED] * 10 + [Delivery.REJECTED] * 3 + [Delivery.RELEASED] * 2


def known_pattern(conn: BlockingConnection, address: str) -> list[int]:
    """Send 15 messages to ``address`` through one consumer that accepts 10,
    rejects 3 and releases 2; return the outcomes the producer saw."""
    receiver = conn.create_receiver(address, credit=len(KNOWN_PATTERN))
    sender = conn.create_sender(address)
    conn.wait(lambda: sender.link.credit > 0, timeout=TIMEOUT_S)
    deliveries = [send_async(sender, n) for n in range(len(KNOWN_PATTERN))]
    for outcome in KNOWN_PATTERN:
        receiver.receive(timeout=TIMEOUT_S)
        if outcome == Delivery.ACCEPTED:
            receiver.accept()
        elif outcome == Delivery.REJECTED:
            receiver.reject()
        else:
            receiver.release(delivered=False)
    return [wait_settled(conn, d) for d in deliveries]


def deliver_across(producer_url: str, consumer_url: str, address: str, body: Any,
                   timeout: float = 15.0) -> int:
    """One message from a producer on ``producer_url`` to a consumer on
    ``consumer_url`` (another router of a network) that accepts it; returns
    the outcome the producer saw.  Both connections are closed."""
    consumer, producer = connect(consumer_url), connect(producer_url)
    try:
        receiver = consumer.create_receiver(address, credit=1)
        sender = producer.create_sender(address)
        wait_all([consumer, producer], lambda: sender.link.credit > 0, timeout,
                 f"credit for {address} from the consumer's router")
        delivery = send_async(sender, body)
        wait_all([consumer, producer], lambda: receiver.fetcher.has_message, timeout,
                 f"the message on {address}")
        assert receiver.receive().body == body
        receiver.accept()
        wait_all([consumer, producer], lambda: delivery.settled, timeout, "the outcome")
        return int(delivery.remote_state)
    finally:
        producer.close()
        consumer.close()
