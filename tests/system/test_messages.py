"""Message content: forwarded as the bytes that arrived, whatever the
sections and body types; large and aborted deliveries (docs/routing.md#receiving-a-message,
docs/routing.md#message-annotations, docs/routing.md#aborted-deliveries)."""

from __future__ import annotations

import uuid

import pytest
from proton import Delivery, Message, symbol, ulong

from tests.system.clients import connect, send_raw, wait_credit, wait_settled
from tests.system.harness import Hop, router_conf
from tests.system.raw import RawReceiver

BODIES = [
    "text",
    b"\x00\x01binary\xff",
    ["a", 1, 2.5, None, True],
    {"k": "v", "n": 3},
    None,
    12345678901234,
    uuid.UUID("12345678-1234-5678-1234-567812345678"),
]


def _rich_message(body: object) -> Message:
    return Message(
        id="msg-1",
        user_id=b"anonymous",
        address="bytes.q",
        subject="subject",
        reply_to="replies",
        correlation_id=ulong(77),
        content_type="application/x-test",
        content_encoding="identity",
        expiry_time=1_900_000_000.0,
        creation_time=1_700_000_000.0,
        group_id="group",
        group_sequence=3,
        reply_to_group_id="rgroup",
        durable=True,
        priority=7,
        ttl=60.0,
        first_acquirer=True,
        delivery_count=2,
        properties={"app": "value", "number": 5},
        annotations={symbol("x-opt-user"): "annotation"},
        instructions={symbol("x-opt-da"): 1},
        body=body,
    )


@pytest.mark.parametrize("body", BODIES, ids=[type(b).__name__ for b in BODIES])
def test_message_bytes_reach_consumer_unchanged(hop: Hop, body: object) -> None:
    conn = connect(hop.url)
    raw = RawReceiver()
    receiver = conn.create_receiver("bytes.q", credit=100, handler=raw)
    sender = conn.create_sender("bytes.q")
    wait_credit(conn, sender, 250)
    encoded = _rich_message(body).encode()
    delivery = send_raw(sender, encoded)
    assert wait_settled(conn, delivery) == Delivery.ACCEPTED
    assert raw.received == [encoded]
    receiver.close()
    conn.close()


@pytest.mark.parametrize("presettled", [False, True])
def test_one_megabyte_message(hop: Hop, presettled: bool) -> None:
    conn = connect(hop.url)
    receiver = conn.create_receiver("big.q", credit=5)
    sender = conn.create_sender("big.q")
    wait_credit(conn, sender, 250)
    body = bytes(range(256)) * 4096
    delivery = sender.link.send(Message(body=body))
    if presettled:
        delivery.settle()
    message = receiver.receive(timeout=20)
    assert message.body == body
    assert bool(receiver.fetcher.unsettled) is not presettled
    if not presettled:
        receiver.accept()
        assert wait_settled(conn, delivery, timeout=20) == Delivery.ACCEPTED
    conn.close()


def test_aborted_delivery_is_not_forwarded_and_next_one_is(hop: Hop) -> None:
    conn = connect(hop.url)
    raw = RawReceiver()
    receiver = conn.create_receiver("abort.q", credit=100, handler=raw)
    sender = conn.create_sender("abort.q")
    wait_credit(conn, sender, 250)
    link = sender.link
    partial = link.delivery(b"tag-aborted")
    link.stream(Message(body=b"x" * 100_000).encode()[:50_000])
    conn.wait(lambda: link.queued == 0, timeout=10)
    partial.abort()
    complete = Message(body="after the abort").encode()
    delivery = send_raw(sender, complete, b"tag-complete")
    assert wait_settled(conn, delivery) == Delivery.ACCEPTED
    assert raw.received == [complete]
    assert raw.aborted == 0
    receiver.close()
    conn.close()


def test_router_annotations_added_where_listener_keeps_them(start_router: object) -> None:
    listener = """listener {
    host: 127.0.0.1
    port: 0
    stripAnnotations: no
}
"""
    hop: Hop = start_router(router_conf(listener=listener))  # type: ignore[operator]
    conn = connect(hop.url)
    receiver = conn.create_receiver("ann.q", credit=5)
    sender = conn.create_sender("ann.q")
    wait_credit(conn, sender, 250)
    sender.link.send(Message(body=1, annotations={symbol("user"): "u"}))
    sender.link.send(Message(body=2, annotations={symbol("x-opt-qd.trace"): ["0/first-hop"],
                                                  symbol("x-opt-qd.ingress"): "0/first-hop"}))
    first = receiver.receive(timeout=10)
    receiver.accept()
    second = receiver.receive(timeout=10)
    receiver.accept()
    assert first.annotations == {"user": "u", "x-opt-qd.ingress": "0/HopTest",
                                 "x-opt-qd.trace": ["0/HopTest"]}
    assert second.annotations["x-opt-qd.ingress"] == "0/first-hop"
    assert second.annotations["x-opt-qd.trace"] == ["0/first-hop", "0/HopTest"]
    conn.close()


def test_client_router_annotations_stripped_by_default(hop: Hop) -> None:
    conn = connect(hop.url)
    receiver = conn.create_receiver("strip.q", credit=5)
    sender = conn.create_sender("strip.q")
    wait_credit(conn, sender, 250)
    sender.link.send(Message(body=1, annotations={symbol("x-opt-qd.trace"): ["0/evil"],
                                                  symbol("keep"): 1}))
    message = receiver.receive(timeout=10)
    receiver.accept()
    assert message.annotations == {"keep": 1}
    conn.close()


def test_bad_router_annotation_rejected_where_listener_reads_them(start_router: object) -> None:
    listener = """listener {
    host: 127.0.0.1
    port: 0
    stripAnnotations: out
}
"""
    hop: Hop = start_router(router_conf(listener=listener))  # type: ignore[operator]
    conn = connect(hop.url)
    conn.create_receiver("badann.q", credit=5)
    sender = conn.create_sender("badann.q")
    wait_credit(conn, sender, 250)
    delivery = sender.link.send(Message(body=1, annotations={symbol("x-opt-qd.trace"): 5}))
    assert wait_settled(conn, delivery) == Delivery.REJECTED
    assert delivery.remote.condition is not None
    assert delivery.remote.condition.name == "amqp:invalid-field"
    assert delivery.remote.condition.description == "trace annotation is not a list"
    conn.close()
