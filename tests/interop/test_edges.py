"""Edge routers across kinds (docs/networks.md#edge-routers): Hop edges under a
qdrouterd interior, qdrouterd edges under a Hop interior, and both kinds of
edge under one interior, carrying anycast both ways with its outcomes,
multicast once per consumer, request/reply through the edges' dynamic
addresses, producer credit that follows consumers beyond the edge, and link
routes through the uplink both ways."""

from __future__ import annotations

import time
from typing import Any

import pytest
from proton import Delivery, Message

from tests.interop.mixed import MakeNetwork, MixedNetwork, management_query
from tests.interop.test_brokered import attach_when_routed
from tests.system.clients import (
    connect,
    deliver_across,
    send_async,
    send_settled,
    wait_all,
)
from tests.system.peers import TransactionalPeer
from tests.system.rabbitmq import free_port
from tests.system.test_link_routes import link_routes
from tests.system.test_network import (
    collect_for,
    collect_until,
    give_each_outcome,
    settle_all,
    take,
)
from tests.waiting import wait_for

# (interior kind, first edge kind, second edge kind)
SHAPES = [("qdrouterd", "hopd", "hopd"), ("hopd", "qdrouterd", "qdrouterd"),
          ("hopd", "hopd", "qdrouterd"), ("qdrouterd", "qdrouterd", "hopd")]
IDS = [f"{i}-interior-{a}-and-{b}-edges" for i, a, b in SHAPES]


def two_edges(mixed: MakeNetwork, interior: str, first: str, second: str,
              extra: str = "") -> MixedNetwork:
    net = mixed(extra)
    if interior == "qdrouterd":
        net.add_qdr("I")
    else:
        net.add_hop("I")
    net.add_edge("E1", ["I"], kind=first)
    net.add_edge("E2", ["I"], kind=second)
    return net


@pytest.mark.parametrize(("interior", "first", "second"), SHAPES, ids=IDS)
def test_anycast_crosses_the_edges_both_ways(mixed: MakeNetwork, interior: str, first: str,
                                             second: str) -> None:
    net = two_edges(mixed, interior, first, second)
    assert deliver_across(net.url("E1"), net.url("E2"), "e1.to.e2", "one") == Delivery.ACCEPTED
    assert deliver_across(net.url("E2"), net.url("E1"), "e2.to.e1", "two") == Delivery.ACCEPTED
    assert deliver_across(net.url("I"), net.url("E2"), "i.to.e2", "three") == Delivery.ACCEPTED
    assert deliver_across(net.url("E1"), net.url("I"), "e1.to.i", "four") == Delivery.ACCEPTED


@pytest.mark.parametrize(("interior", "first", "second"), SHAPES, ids=IDS)
def test_every_outcome_comes_back_across_the_edges(mixed: MakeNetwork, interior: str,
                                                  first: str, second: str) -> None:
    net = two_edges(mixed, interior, first, second)
    consumer, producer = connect(net.url("E2")), connect(net.url("E1"))
    conns = [consumer, producer]
    receiver = consumer.create_receiver("outcomes", credit=4)
    sender = producer.create_sender("outcomes")
    wait_all(conns, lambda: sender.link.credit > 0, 15, "credit from the other edge")
    deliveries = [send_async(sender, n) for n in range(4)]
    wait_all(conns, lambda: receiver.fetcher.has_message == 4, 15, "four messages")
    for _ in range(4):
        take(receiver, accept=False)
    give_each_outcome(receiver)
    assert settle_all(conns, deliveries) == [Delivery.REJECTED, Delivery.RELEASED,
                                             Delivery.MODIFIED, Delivery.ACCEPTED]


@pytest.mark.parametrize(("interior", "first", "second"), SHAPES, ids=IDS)
def test_multicast_reaches_each_consumer_once(mixed: MakeNetwork, interior: str, first: str,
                                             second: str) -> None:
    net = two_edges(mixed, interior, first, second,
                    extra="address {\n    prefix: mc\n    distribution: multicast\n}\n")
    routers = {"E1": "E1", "E2": "E2", "I": "I"}
    conns = {name: connect(net.url(router)) for name, router in routers.items()}
    receivers = {name: conns[name].create_receiver("mc.x", credit=50) for name in routers}
    producer = connect(net.url("E1"))
    everyone = [*conns.values(), producer]
    sender = producer.create_sender("mc.x")
    wait_all(everyone, lambda: sender.link.credit > 0, 15, "multicast credit")
    got: dict[str, list[Any]] = {name: [] for name in routers}
    deadline = time.monotonic() + 20
    probes = 0
    while not all(got.values()):
        assert time.monotonic() < deadline, f"probes did not reach everyone: {got}"
        sender.link.send(Message(body=f"probe {probes}"))
        probes += 1
        collect_for(everyone, receivers, got, 0.3)
    collect_for(everyone, receivers, got, 1.0)
    for bodies in got.values():
        bodies.clear()
    deliveries = [send_async(sender, n) for n in range(10)]
    collect_until(everyone, receivers, got, lambda: all(len(v) >= 10 for v in got.values()),
                  15, "ten each")
    collect_for(everyone, receivers, got, 0.5)
    assert {n: sorted(v) for n, v in got.items()} == {n: list(range(10)) for n in routers}
    assert set(settle_all(everyone, deliveries)) == {Delivery.ACCEPTED}


@pytest.mark.parametrize(("interior", "first", "second"), SHAPES, ids=IDS)
def test_request_reply_through_the_dynamic_address_of_an_edge(
        mixed: MakeNetwork, interior: str, first: str, second: str) -> None:
    net = two_edges(mixed, interior, first, second)
    client, server = connect(net.url("E1")), connect(net.url("E2"))
    conns = [client, server]
    requests = server.create_receiver("svc", credit=5)
    replies = client.create_receiver(None, dynamic=True, credit=5)
    reply_to = replies.link.remote_source.address
    assert "_edge/E1/" in reply_to
    sender = client.create_sender("svc")
    answer = server.create_sender(None)
    wait_all(conns, lambda: sender.link.credit > 0 and answer.link.credit > 0, 15, "credit")
    sent = send_async(sender, "ping", reply_to=reply_to)
    wait_all(conns, lambda: requests.fetcher.has_message, 15, "the request")
    request = requests.receive()
    requests.accept()
    answered = answer.link.send(Message(address=request.reply_to, body="pong"))
    wait_all(conns, lambda: replies.fetcher.has_message, 15, "the reply")
    assert replies.receive().body == "pong"
    replies.accept()
    assert settle_all(conns, [sent, answered]) == [Delivery.ACCEPTED, Delivery.ACCEPTED]


@pytest.mark.parametrize(("interior", "first", "second"), SHAPES, ids=IDS)
def test_an_edge_producer_has_credit_while_a_consumer_exists_beyond_it(
        mixed: MakeNetwork, interior: str, first: str, second: str) -> None:
    net = two_edges(mixed, interior, first, second)
    producer, consumer = connect(net.url("E1")), connect(net.url("E2"))
    conns = [producer, consumer]
    sender = producer.create_sender("follow")
    receiver = consumer.create_receiver("follow", credit=1)
    wait_all(conns, lambda: sender.link.credit > 0, 15, "credit once E2 has a consumer")
    delivery = send_async(sender, "x")
    wait_all(conns, lambda: receiver.fetcher.has_message, 15, "the message")
    assert take(receiver).body == "x"
    wait_all(conns, lambda: delivery.settled, 15, "settled")
    assert delivery.remote_state == Delivery.ACCEPTED


# -- link routes through the uplink ------------------------------------------------------
#
# The link routes lead to a small AMQP container of the tests' own
# (``TransactionalPeer``, a message sink the router connects to): qdrouterd
# 1.x aborts (a proton assertion in pn_link_flow) when a link-routed receiver
# meets RabbitMQ's flow frames, with or without Hop in the path.


def sink_routes(port: int, prefix: str) -> str:
    """A route-container connector to the sink on ``port``, and link routes
    for ``prefix`` to it."""
    return (f"connector {{\n    name: sink\n    host: 127.0.0.1\n    port: {port}\n"
            f"    role: route-container\n    saslMechanisms: ANONYMOUS\n}}\n"
            + link_routes(prefix, connection="sink"))


def sent_through(sink: TransactionalPeer, url: str, address: str, count: int) -> None:
    """Send ``count`` messages to ``address`` from a client on ``url``; all are
    accepted by the sink at the far end of the link route."""
    conn = connect(url)
    try:
        sender = attach_when_routed(conn, address)
        bodies = [f"{address}-{n}" for n in range(count)]
        assert send_settled(conn, sender, bodies) == [Delivery.ACCEPTED] * count
    finally:
        conn.close()
    with sink.lock:
        assert [(a, b) for a, b, _ in sink.received] == [(address, b) for b in bodies]


@pytest.mark.parametrize(("interior", "edge"), [("qdrouterd", "hopd"), ("hopd", "qdrouterd")],
                         ids=["hopd-edge-under-qdrouterd", "qdrouterd-edge-under-hopd"])
def test_an_edge_client_is_link_routed_to_a_container_behind_the_interior(
        mixed: MakeNetwork, interior: str, edge: str) -> None:
    """The edge asks its interior (_$qd.addr_lookup) and forwards the attach up."""
    port = free_port()
    sink = TransactionalPeer(f"127.0.0.1:{port}", listen=True, container_id="sink")
    sink.start()
    try:
        net = mixed()
        if interior == "qdrouterd":
            net.add_qdr("I", extra=sink_routes(port, "ilr"))
        else:
            net.add_hop("I", extra=sink_routes(port, "ilr"))
        net.add_edge("E1", ["I"], kind=edge)
        sent_through(sink, net.url("E1"), "ilr.q", 3)
    finally:
        sink.stop()


@pytest.mark.parametrize(("interior", "edge"), [("qdrouterd", "hopd"), ("hopd", "qdrouterd")],
                         ids=["hopd-edge-under-qdrouterd", "qdrouterd-edge-under-hopd"])
def test_a_container_on_an_edge_serves_a_client_on_the_interior(
        mixed: MakeNetwork, interior: str, edge: str) -> None:
    """The edge offers its link route to the interior (connection.linkRoute)."""
    port = free_port()
    sink = TransactionalPeer(f"127.0.0.1:{port}", listen=True, container_id="sink")
    sink.start()
    try:
        net = mixed()
        if interior == "qdrouterd":
            net.add_qdr("I")
        else:
            net.add_hop("I")
        net.add_edge("E1", ["I"], kind=edge, extra=sink_routes(port, "elr"))
        # Until the edge's proxy link route is made, an attach at the interior
        # is message-routed (no link route there yet): wait for it.
        wait_for(lambda: "proxyLinkRoute/Delr" in net["I"].log_text(), 20,
                 "the edge's link route at the interior")
        sent_through(sink, net.url("I"), "elr.q", 3)
    finally:
        sink.stop()


def holds_downlink(net: MixedNetwork, interior: str, edge_id: str) -> bool:
    """Whether ``interior`` holds ``edge_id``'s downlink (a local consumer of
    its ``H`` key): the other end of its active uplink, whatever kind either is."""
    rows = management_query(net.url(interior), "org.apache.qpid.dispatch.router.address")
    return any(row["key"] == f"H{edge_id}" and row["subscriberCount"] for row in rows)


@pytest.mark.parametrize(("interior", "edge"), [("qdrouterd", "hopd"), ("hopd", "qdrouterd")],
                         ids=["hopd-edges-under-qdrouterd", "qdrouterd-edges-under-hopd"])
def test_an_edge_fails_over_to_a_second_interior_of_the_other_kind(
        mixed: MakeNetwork, interior: str, edge: str) -> None:
    net = mixed()
    add = net.add_qdr if interior == "qdrouterd" else net.add_hop
    add("I1")
    add("I2", ["I1"])
    net.wait_converged()
    for edge_id in ("E1", "E2"):
        net.add_edge(edge_id, ["I1", "I2"], kind=edge)
    assert deliver_across(net.url("E1"), net.url("E2"), "failover.before", "one") \
        == Delivery.ACCEPTED
    (lost,) = [i for i in ("I1", "I2") if holds_downlink(net, i, "E1")]
    assert net[lost].stop() == 0
    survivor = "I2" if lost == "I1" else "I1"
    for edge_id in ("E1", "E2"):
        wait_for(lambda edge_id=edge_id: holds_downlink(net, survivor, edge_id), 30,  # type: ignore[misc]
                 f"{edge_id}'s uplink to be on the surviving interior")
    assert deliver_across(net.url("E1"), net.url("E2"), "failover.after", "two") \
        == Delivery.ACCEPTED
    assert deliver_across(net.url("E2"), net.url("E1"), "failover.back", "three") \
        == Delivery.ACCEPTED
