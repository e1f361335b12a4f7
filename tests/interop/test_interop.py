"""Hop and qdrouterd 1.x interior routers in one network: they exchange
routes, and anycast, multicast, transit, request/reply and consumer outcomes
work across the mixed hops in both directions.

Clients are python-qpid-proton blocking connections, one per router
attachment, all pumped together by ``tests.system.clients.wait_all``.
"""

from __future__ import annotations

from typing import Any

import pytest
from proton import Delivery, Message, symbol
from proton.utils import BlockingConnection, BlockingSender

from tests.interop.mixed import MakeNetwork, MixedNetwork
from tests.system.clients import connect, wait_all
from tests.system.network import latest_routes
from tests.system.test_network import (
    address_conf,
    collect_for,
    collect_until,
    give_each_outcome,
    probe_until_reached,
    route_of,
    settle_all,
    take,
)

HOP = "HopB"
QDR = "QdrA"
KINDS = ["hopd", "qdrouterd"]
CREDIT_TIMEOUT_S = 30.0
ARRIVAL_TIMEOUT_S = 30.0


def router_of(kind: str) -> str:
    return HOP if kind == "hopd" else QDR


def other(router_id: str) -> str:
    return QDR if router_id == HOP else HOP


def pair(make: MakeNetwork, connecting: str, extra: str = "") -> MixedNetwork:
    """A Hop router and a qdrouterd joined by one inter-router connection,
    opened by the ``connecting`` kind; returns once both have the route."""
    net = make(extra)
    if connecting == "hopd":
        net.add_qdr(QDR)
        net.add_hop(HOP, [QDR])
    else:
        net.add_hop(HOP)
        net.add_qdr(QDR, [HOP])
    net.wait_converged()
    return net


def sender_with_credit(conns: list[BlockingConnection], conn: BlockingConnection,
                       address: str | None) -> BlockingSender:
    """A sender, once its router gave it credit (for a consumer on another
    router: once the address has propagated)."""
    sender = conn.create_sender(address)
    wait_all(conns, lambda: sender.link.credit > 0, CREDIT_TIMEOUT_S, f"credit on {address}")
    return sender


def rich_message(source: str, i: int, binary: bool = True) -> Message:
    """A message with properties, application properties, a user message
    annotation and a map body (with a binary value unless ``binary`` is false:
    proton decodes binary as a view that dies with its message)."""
    body: dict[str, Any] = {"seq": i, "text": "x" * (i * 7), "list": [i, -i]}
    if binary:
        body["data"] = bytes(range(i % 256))
    return Message(
        id=f"{source}-{i}", subject="interop", correlation_id=i,
        content_type="application/x-interop", body=body,
        properties={"seq": i, "source": source, "ratio": i / 4, "even": i % 2 == 0},
        annotations={symbol("x-opt-app"): f"note {i}"})


def fields(message: Message) -> tuple[Any, ...]:
    return (message.id, message.subject, message.correlation_id, message.content_type,
            message.body, message.properties, message.annotations)


def anycast_intact(net: MixedNetwork, source: str, destination: str, count: int = 50) -> None:
    """``count`` rich messages from a producer on ``source`` to a consumer on
    ``destination`` arrive in order and unchanged (router annotations
    stripped), and every delivery is ACCEPTED."""
    address = f"anycast.{source}.to.{destination}"
    producer = connect(net.url(source))
    consumer = connect(net.url(destination))
    conns = [producer, consumer]
    receiver = consumer.create_receiver(address, credit=count + 10)
    sender = sender_with_credit(conns, producer, address)
    sent = [rich_message(source, i) for i in range(count)]
    deliveries = [sender.link.send(m) for m in sent]
    wait_all(conns, lambda: receiver.fetcher.has_message >= count, ARRIVAL_TIMEOUT_S,
             f"{count} messages from {source} at {destination}")
    received = [take(receiver) for _ in range(count)]
    assert [fields(m) for m in received] == [fields(m) for m in sent]
    assert settle_all(conns, deliveries) == [Delivery.ACCEPTED] * count
    producer.close()
    consumer.close()


# 1, 2 -------------------------------------------------------------------------

@pytest.mark.parametrize("connecting", KINDS)
def test_pair_learns_routes_and_carries_anycast_both_ways(mixed: MakeNetwork,
                                                          connecting: str) -> None:
    net = pair(mixed, connecting)
    assert latest_routes(net[HOP]) == {QDR: (QDR, 1)}
    assert net.routes(QDR) == {HOP: (HOP, 1)}
    anycast_intact(net, HOP, QDR)
    anycast_intact(net, QDR, HOP)


# 3 ----------------------------------------------------------------------------

@pytest.mark.parametrize("producer_kind", KINDS)
def test_multicast_reaches_every_consumer_on_both_kinds_exactly_once(
        mixed: MakeNetwork, producer_kind: str) -> None:
    net = pair(mixed, "hopd", extra=address_conf("mc", "multicast"))
    producer = connect(net.url(router_of(producer_kind)))
    consumers = {f"{r}.{n}": connect(net.url(r)) for r in (HOP, QDR) for n in (1, 2)}
    conns = [producer, *consumers.values()]
    receivers = {name: c.create_receiver("mc.interop", credit=100)
                 for name, c in consumers.items()}
    sender = sender_with_credit(conns, producer, "mc.interop")
    probe_until_reached(conns, receivers, sender, 30)
    got: dict[str, list[Any]] = {name: [] for name in receivers}

    sent = [rich_message(producer_kind, i, binary=False) for i in range(30)]
    deliveries = [sender.link.send(m) for m in sent]
    collect_until(conns, receivers, got, lambda: all(len(b) >= 30 for b in got.values()),
                  ARRIVAL_TIMEOUT_S, "30 copies at each consumer")
    assert settle_all(conns, deliveries, ARRIVAL_TIMEOUT_S) == [Delivery.ACCEPTED] * 30
    collect_for(conns, receivers, got, 1.5)  # no late duplicates
    assert got == {name: [m.body for m in sent] for name in receivers}
    for conn in conns:
        conn.close()


# 4 ----------------------------------------------------------------------------

@pytest.mark.parametrize("middle_kind", KINDS)
def test_transit_through_a_router_of_the_other_kind(mixed: MakeNetwork,
                                                    middle_kind: str) -> None:
    """X - M - Y with M of ``middle_kind`` and X, Y of the other kind: M
    connects to X, Y connects to M. Traffic crosses M both ways, and the
    router annotations name the whole path."""
    net = mixed()
    add_end = net.add_qdr if middle_kind == "hopd" else net.add_hop
    add_middle = net.add_hop if middle_kind == "hopd" else net.add_qdr
    add_end("X", unstripped=True)
    add_middle("M", ["X"])
    add_end("Y", ["M"], unstripped=True)
    net.wait_converged()
    assert net.routes("X") == {"M": ("M", 1), "Y": ("M", 2)}
    assert net.routes("Y") == {"M": ("M", 1), "X": ("M", 2)}

    for source, destination in (("X", "Y"), ("Y", "X")):
        anycast_intact(net, source, destination, count=30)
        producer = connect(net.url(source))
        consumer = connect(net.unstripped_url(destination))
        conns = [producer, consumer]
        address = f"traced.{source}"
        receiver = consumer.create_receiver(address, credit=10)
        sender = sender_with_credit(conns, producer, address)
        delivery = sender.link.send(rich_message(source, 1))
        wait_all(conns, lambda r=receiver: r.fetcher.has_message == 1, ARRIVAL_TIMEOUT_S,
                 f"traced message at {destination}")
        message = take(receiver)
        assert message.body == rich_message(source, 1).body
        assert message.annotations["x-opt-app"] == "note 1"
        assert route_of(message) == (f"0/{source}", [f"0/{source}", "0/M", f"0/{destination}"])
        assert settle_all(conns, [delivery]) == [Delivery.ACCEPTED]
        producer.close()
        consumer.close()


# 5 ----------------------------------------------------------------------------

@pytest.mark.parametrize("client_kind", KINDS)
def test_request_reply_to_a_dynamic_address_across_kinds(mixed: MakeNetwork,
                                                         client_kind: str) -> None:
    """A client with a dynamic reply receiver on one kind of router; the
    service on the other answers with an anonymous sender to that address."""
    net = pair(mixed, "qdrouterd")
    client_router = router_of(client_kind)
    service_router = other(client_router)
    client = connect(net.url(client_router))
    service = connect(net.url(service_router))
    conns = [client, service]
    replies = client.create_receiver(None, dynamic=True, credit=10)
    reply_to = replies.link.remote_source.address
    assert reply_to.startswith(f"amqp:/_topo/0/{client_router}/temp")
    requests = service.create_receiver("svc.interop", credit=10)
    responder = sender_with_credit(conns, service, None)
    requester = sender_with_credit(conns, client, "svc.interop")

    sent = [requester.link.send(Message(body=f"ping {i}", reply_to=reply_to,
                                        correlation_id=i)) for i in range(5)]
    wait_all(conns, lambda: requests.fetcher.has_message == 5, ARRIVAL_TIMEOUT_S,
             f"5 requests at {service_router}")
    answers = []
    for _ in range(5):
        request = take(requests)
        assert request.reply_to == reply_to
        answers.append(responder.link.send(Message(
            address=request.reply_to, body=f"pong {request.correlation_id}",
            correlation_id=request.correlation_id)))
    wait_all(conns, lambda: replies.fetcher.has_message == 5, ARRIVAL_TIMEOUT_S,
             f"5 replies at {client_router}")
    got = [take(replies) for _ in range(5)]
    assert [(m.body, m.correlation_id) for m in got] == [(f"pong {i}", i) for i in range(5)]
    assert settle_all(conns, answers) == [Delivery.ACCEPTED] * 5
    assert settle_all(conns, sent) == [Delivery.ACCEPTED] * 5
    client.close()
    service.close()


# 6 ----------------------------------------------------------------------------

@pytest.mark.parametrize("consumer_kind", ["qdrouterd", "hopd"])
def test_consumer_outcomes_cross_the_mixed_hop(mixed: MakeNetwork, consumer_kind: str) -> None:
    net = pair(mixed, "hopd")
    consumer_router = router_of(consumer_kind)
    producer = connect(net.url(other(consumer_router)))
    consumer = connect(net.url(consumer_router))
    conns = [producer, consumer]
    receiver = consumer.create_receiver("outcome.q", credit=10)
    sender = sender_with_credit(conns, producer, "outcome.q")
    deliveries = [sender.link.send(Message(body=i)) for i in range(4)]
    wait_all(conns, lambda: receiver.fetcher.has_message == 4, ARRIVAL_TIMEOUT_S,
             f"4 messages at {consumer_router}")
    assert [take(receiver, accept=False).body for _ in range(4)] == [0, 1, 2, 3]
    give_each_outcome(receiver)
    assert settle_all(conns, deliveries) == [Delivery.REJECTED, Delivery.RELEASED,
                                             Delivery.MODIFIED, Delivery.ACCEPTED]
    condition = deliveries[0].remote.condition
    assert condition is not None
    assert (condition.name, condition.description) == ("app:bad-order", "order 7 is invalid")
    assert deliveries[2].remote.failed is True
    assert deliveries[2].remote.undeliverable is True
    late: dict[str, list[Any]] = {"late": []}
    collect_for(conns, {"late": receiver}, late, 1.0)
    assert late == {"late": []}, "a settled message was delivered again"
    producer.close()
    consumer.close()
