"""Edge routers under interior routers (docs/networks.md#edge-routers): routing
through the uplink both ways with every outcome, multicast once per
consumer, local preference and local delivery without the interior, credit
that follows consumers anywhere, failover to a second interior, dynamic
addresses across edges, management of an edge from its interior, and the
interior's heartbeat watch."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from proton import Delivery, Message, symbol
from proton.reactor import Container
from proton.utils import BlockingConnection

from tests.system.clients import connect, deliver_across, pump, send_async, wait_all
from tests.system.conftest import StartRouter
from tests.system.harness import Hop
from tests.system.mgmt import Management
from tests.system.network import Network, start_network
from tests.system.test_network import (
    Capabilities,
    collect_for,
    collect_until,
    give_each_outcome,
    ready_sender,
    settle_all,
    take,
)
from tests.system.test_tools import hopmanage, hopstat
from tests.waiting import wait_for

TWO_EDGES = {"E1": ["I"], "E2": ["I"]}


def edges(start_router: StartRouter, edge_map: dict[str, list[str]] | None = None,
          interiors: dict[str, list[str]] | None = None, **kw: Any) -> Network:
    return start_network(start_router, interiors or {"I": []}, edges=edge_map or TWO_EDGES,
                         **kw)


@pytest.mark.parametrize(("producer", "consumer"), [("E1", "E2"), ("E2", "E1"),
                                                   ("I", "E1"), ("E2", "I")])
def test_a_message_crosses_edges_and_the_interior_and_its_outcome_comes_back(
        start_router: StartRouter, producer: str, consumer: str) -> None:
    net = edges(start_router)
    state = deliver_across(net.url(producer), net.url(consumer), f"across.{producer}",
                           "hello")
    assert state == Delivery.ACCEPTED


def test_every_outcome_travels_back_from_one_edge_to_the_other(
        start_router: StartRouter) -> None:
    net = edges(start_router)
    consumer, producer = connect(net.url("E2")), connect(net.url("E1"))
    conns = [consumer, producer]
    receiver = consumer.create_receiver("outcomes", credit=4)
    sender = ready_sender(conns, producer, "outcomes")
    deliveries = [send_async(sender, n) for n in range(4)]
    wait_all(conns, lambda: receiver.fetcher.has_message == 4, what="four messages")
    for _ in range(4):
        take(receiver, accept=False)
    give_each_outcome(receiver, annotations={symbol("x-opt-why"): "edge"})
    states = settle_all(conns, deliveries)
    assert states == [Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED,
                      Delivery.ACCEPTED]
    rejected, _, modified, _ = deliveries
    assert rejected.remote.condition is not None
    assert rejected.remote.condition.name == "app:bad-order"
    assert modified.remote.failed and modified.remote.undeliverable
    assert modified.remote.annotations == {"x-opt-why": "edge"}
    assert rejected.remote.condition.description == "order 7 is invalid"


def test_pre_settled_messages_cross_edges_in_order(start_router: StartRouter) -> None:
    net = edges(start_router)
    consumer, producer = connect(net.url("E2")), connect(net.url("E1"))
    conns = [consumer, producer]
    receiver = consumer.create_receiver("presettled", credit=200)
    sender = producer.create_sender("presettled", options=None)
    sender.link.snd_settle_mode = 1  # settled
    wait_all(conns, lambda: sender.link.credit > 0, what="credit")
    for n in range(100):
        d = sender.link.send(Message(body=n))
        d.settle()
    got: list[Any] = []

    def arrived() -> bool:
        while receiver.fetcher.has_message:
            got.append(take(receiver, accept=False).body)  # settled by the router
        return len(got) == 100

    wait_all(conns, arrived, 15, "100 pre-settled messages")
    assert got == list(range(100))


@pytest.mark.parametrize("anonymous", [False, True], ids=["targeted", "anonymous"])
def test_multicast_reaches_each_consumer_once_across_three_edges_and_the_interior(
        start_router: StartRouter, anonymous: bool) -> None:
    net = edges(start_router, {"E1": ["I"], "E2": ["I"], "E3": ["I"]},
                extra="address {\n    prefix: mc\n    distribution: multicast\n}\n")
    routers = {"E1": "E1", "E1b": "E1", "E2": "E2", "E3": "E3", "I": "I"}
    names = list(routers)
    conns = {n: connect(net.url(routers[n])) for n in names}
    receivers = {n: conns[n].create_receiver("mc.news", credit=50) for n in names}
    producer = connect(net.url("E1"))
    all_conns = [*conns.values(), producer]
    # An anonymous sender's copy goes up the uplink's anonymous link, a
    # targeted one's up the address's own link.
    sender = producer.create_sender(None if anonymous else "mc.news")
    to = {"address": "mc.news"} if anonymous else {}
    # Every edge's consumer is known at the interior once E1's producer has
    # credit and a probe reaches each of them.
    wait_all(all_conns, lambda: sender.link.credit > 0, what="credit for multicast")
    got: dict[str, list[Any]] = {n: [] for n in names}
    deadline = time.monotonic() + 15
    probes = 0
    while not all(got.values()):
        assert time.monotonic() < deadline, f"probes did not reach everyone: {got}"
        sender.link.send(Message(body=f"probe {probes}", **to))
        probes += 1
        collect_for(all_conns, receivers, got, 0.3)
    collect_for(all_conns, receivers, got, 1.0)
    for bodies in got.values():
        bodies.clear()
    deliveries = [send_async(sender, n, **to) for n in range(20)]
    collect_until(all_conns, receivers, got,
                  lambda: all(len(v) >= 20 for v in got.values()), 15, "20 each")
    collect_for(all_conns, receivers, got, 0.5)
    assert {n: sorted(v) for n, v in got.items()} == {n: list(range(20)) for n in names}
    assert set(settle_all(all_conns, deliveries)) == {Delivery.ACCEPTED}


def test_an_edge_prefers_its_own_consumer_and_keeps_routing_without_the_interior(
        killable: StartRouter) -> None:
    net = start_network(killable, {"I": []}, edges=TWO_EDGES,
                        extra="address {\n    prefix: near\n    distribution: closest\n}\n")
    here, there = connect(net.url("E1")), connect(net.url("E2"))
    producer = connect(net.url("E1"))
    conns = [here, there, producer]
    local = here.create_receiver("near.q", credit=100)
    remote = there.create_receiver("near.q", credit=100)
    sender = ready_sender(conns, producer, "near.q")
    # The remote consumer is known (the interior says so) before the test.
    wait_all(conns, lambda: True)
    deliveries = [send_async(sender, n) for n in range(30)]
    got: dict[str, list[Any]] = {"local": [], "remote": []}
    receivers = {"local": local, "remote": remote}
    collect_until(conns, receivers, got, lambda: len(got["local"]) == 30, 10, "30 local")
    collect_for(conns, receivers, got, 0.5)
    assert got == {"local": list(range(30)), "remote": []}
    assert set(settle_all(conns, deliveries)) == {Delivery.ACCEPTED}

    net.kill("I")
    wait_for(lambda: "lost, no alternate connection available" in net["E1"].log_text(), 15,
             "E1 to lose its uplink")
    more = [send_async(sender, n) for n in range(30, 40)]
    collect_until([here, producer], {"local": local}, got, lambda: len(got["local"]) == 40,
                  10, "local delivery without the interior")
    assert got["local"][30:] == list(range(30, 40))
    assert set(settle_all([here, producer], more)) == {Delivery.ACCEPTED}


def test_balanced_spreads_over_the_edge_consumer_and_the_uplink(
        start_router: StartRouter) -> None:
    net = edges(start_router)
    here, there, producer = (connect(net.url("E1")), connect(net.url("E2")),
                             connect(net.url("E1")))
    conns = [here, there, producer]
    remote = there.create_receiver("spread", credit=100)
    sender = ready_sender(conns, producer, "spread")  # the consumer beyond the edge is known
    local = here.create_receiver("spread", credit=100)
    pump(here, 0.3)  # its credit reaches the edge
    deliveries = [send_async(sender, n) for n in range(40)]
    got: dict[str, list[Any]] = {"local": [], "remote": []}
    receivers = {"local": local, "remote": remote}
    collect_until(conns, receivers, got, lambda: len(got["local"]) + len(got["remote"]) == 40,
                  15, "all 40")
    assert sorted(got["local"] + got["remote"]) == list(range(40))
    # Neither consumer settles at once: the loads even out across the uplink.
    assert got["local"] and got["remote"], got
    assert set(settle_all(conns, deliveries)) == {Delivery.ACCEPTED}


def test_an_edge_producer_has_credit_exactly_while_a_consumer_exists_anywhere(
        start_router: StartRouter) -> None:
    net = edges(start_router)
    producer = connect(net.url("E1"))
    sender = producer.create_sender("credit.q")
    consumer = connect(net.url("E2"))
    conns = [producer, consumer]
    pump(producer, 1.5)
    assert sender.link.credit == 0, "credit without a consumer anywhere"
    receiver = consumer.create_receiver("credit.q", credit=1)
    wait_all(conns, lambda: sender.link.credit > 0, what="credit once E2 has a consumer")
    assert not sender.link.drain_mode
    receiver.close()
    # The consumer left: the edge's producer is drained.
    wait_all(conns, lambda: sender.link.drain_mode, timeout=8,
             what="drain after the consumer beyond the edge left")
    sender.link.drained()
    wait_all(conns, lambda: sender.link.credit == 0, what="credit drained")
    again = consumer.create_receiver("credit.q", credit=1, name="again")
    wait_all(conns, lambda: sender.link.credit > 0 and not sender.link.drain_mode,
             what="credit again")
    delivery = send_async(sender, "x")
    wait_all(conns, lambda: again.fetcher.has_message == 1, what="the message")
    assert take(again).body == "x"
    assert settle_all(conns, [delivery]) == [Delivery.ACCEPTED]


@pytest.mark.parametrize("fallback_on", ["E1", "I"])
def test_an_edge_uses_the_fallback_until_the_address_has_a_consumer_beyond_it(
        start_router: StartRouter, fallback_on: str) -> None:
    # The interior tells the edge whether the address itself has consumers
    # beyond it, and apart from that whether its fallback has: a fallback
    # consumer on the edge is used there, one beyond it through the uplink.
    net = edges(start_router, {"E1": ["I"]},
                extra="address {\n    prefix: fb\n    enableFallback: yes\n}\n")
    client, far = connect(net.url("E1")), connect(net.url("I"))
    conns = [client, far]
    fallback = (client if fallback_on == "E1" else far).create_receiver(
        "fb.edge", credit=20, name="fallback", options=Capabilities("qd.fallback"))
    sender = ready_sender(conns, client, "fb.edge")
    deliveries = [send_async(sender, n) for n in range(5)]
    got: dict[str, list[Any]] = {"fallback": [], "primary": []}
    collect_until(conns, {"fallback": fallback}, got, lambda: len(got["fallback"]) == 5, 10,
                  "five at the edge's fallback")
    assert settle_all(conns, deliveries) == [Delivery.ACCEPTED] * 5
    primary = far.create_receiver("fb.edge", credit=20, name="primary")
    receivers = {"fallback": fallback, "primary": primary}

    for _ in range(30):  # until the edge has heard of the consumer beyond it
        deliveries.append(send_async(sender, len(deliveries)))
        collect_until(conns, receivers, got,
                      lambda: len(got["fallback"]) + len(got["primary"]) == len(deliveries),
                      10, "the next message")
        if got["primary"]:
            break
        pump(client, 0.2)
    assert got["primary"], "never sent beyond the edge"
    assert settle_all(conns, deliveries) == [Delivery.ACCEPTED] * len(deliveries)
    for conn in conns:
        conn.close()


def test_request_and_reply_through_dynamic_addresses_of_two_edges(
        start_router: StartRouter) -> None:
    net = edges(start_router)
    client, server = connect(net.url("E1")), connect(net.url("E2"))
    conns = [client, server]
    requests = server.create_receiver("service", credit=10)
    replies = client.create_receiver(None, dynamic=True, credit=10)
    reply_to = replies.link.remote_source.address
    assert reply_to.startswith("amqp:/_edge/E1/temp.")
    request_sender = ready_sender(conns, client, "service")
    answer = server.create_sender(None)
    wait_all(conns, lambda: answer.link.credit > 0, what="anonymous credit")
    sent = [send_async(request_sender, f"q{n}", reply_to=reply_to, correlation_id=n)
            for n in range(5)]
    wait_all(conns, lambda: len(requests.fetcher.incoming) == 5, what="requests")
    answers = []
    for _ in range(5):
        request = requests.receive()
        requests.accept()
        answers.append(answer.link.send(Message(address=request.reply_to,
                                                correlation_id=request.correlation_id,
                                                body=request.body.upper())))
    wait_all(conns, lambda: len(replies.fetcher.incoming) == 5, what="replies")
    bodies = {}
    for _ in range(5):
        message = replies.receive()
        replies.accept()
        bodies[message.correlation_id] = message.body
    assert bodies == {n: f"Q{n}" for n in range(5)}
    assert set(settle_all(conns, sent + answers)) == {Delivery.ACCEPTED}


def test_an_anonymous_sender_on_an_edge_reaches_consumers_beyond_it(
        start_router: StartRouter) -> None:
    net = edges(start_router)
    consumer, producer = connect(net.url("E2")), connect(net.url("I"))
    edge_client = connect(net.url("E1"))
    conns = [consumer, producer, edge_client]
    on_e2 = consumer.create_receiver("anon.target", credit=5)
    on_i = producer.create_receiver("anon.at.interior", credit=5)
    anon = edge_client.create_sender(None)
    wait_all(conns, lambda: anon.link.credit > 0, what="anonymous credit")
    # A receiver's address is known beyond its router within a moment.
    time.sleep(0.5)
    first = send_async(anon, "to E2", address="anon.target")
    second = send_async(anon, "to I", address="anon.at.interior")
    nowhere = send_async(anon, "to nobody", address="anon.nobody")
    wait_all(conns, lambda: on_e2.fetcher.has_message and on_i.fetcher.has_message,
             what="both messages")
    assert on_e2.receive().body == "to E2"
    on_e2.accept()
    assert on_i.receive().body == "to I"
    on_i.accept()
    assert settle_all(conns, [first, second, nowhere]) == [
        Delivery.ACCEPTED, Delivery.ACCEPTED, Delivery.RELEASED]


def test_an_edge_fails_over_to_a_second_interior(killable: StartRouter) -> None:
    both = ["I1", "I2"]
    net = start_network(killable, {"I1": [], "I2": ["I1"]}, edges={"E1": both, "E2": both})
    assert deliver_across(net.url("E1"), net.url("E2"), "before", "one") == Delivery.ACCEPTED
    active = active_uplink(net["E1"])
    net.kill(active)
    wait_for(lambda: "activating alternate" in net["E1"].log_text(), 15,
             "E1 to activate its other uplink")
    assert active_uplink(net["E1"]) != active
    assert deliver_across(net.url("E1"), net.url("E2"), "after", "two") == Delivery.ACCEPTED


def active_uplink(edge: Hop) -> str:
    """The interior an edge's active uplink goes to, from its log."""
    text = edge.log_text()
    active = re.findall(r"Edge connection \(id=(\d+)\) to interior established"
                        r"|activating alternate id=(\d+)", text)
    assert active, text
    established, alternate = active[-1]
    conn_id = alternate or established
    match = re.search(rf"\[C{conn_id}\] Connection Opened: .* container_id=(\S+)", text)
    assert match is not None, text
    return match.group(1)


def test_an_edge_is_managed_as_an_edge_and_through_its_interior(
        start_router: StartRouter) -> None:
    net = edges(start_router)
    at_edge = Management(net.url("E1"))
    (router,) = at_edge.query("router", "mode", "id")
    assert router == {"mode": "edge", "id": "E1"}
    roles = {row["container"]: row["role"]
             for row in at_edge.query("connection", "container", "role", "dir")}
    assert roles["I"] == "edge"
    at_interior = Management(net.url("I"))
    edge_roles = {row["container"]: row["role"]
                  for row in at_interior.query("connection", "container", "role")}
    assert edge_roles["E1"] == "edge" and edge_roles["E2"] == "edge"
    # E2's agent, reached from the interior through E2's downlink.
    through = Management(net.url("I"), address="_edge/E2/$management")
    (remote,) = through.query("router", "id", "mode")
    assert remote == {"id": "E2", "mode": "edge"}
    # The interior's address table shows each edge's key.
    keys = {row["key"] for row in at_interior.query("router.address", "key")}
    assert {"HE1", "HE2"} <= keys
    for client in (at_edge, at_interior, through):
        client.close()


def test_an_interior_closes_an_edge_connection_whose_heartbeats_stop(
        start_router: StartRouter) -> None:
    net = start_network(start_router, {"I": []})
    port = net.edge_port("I")
    container = Container()
    container.container_id = "Silent.Edge"
    silent = BlockingConnection(f"amqp://127.0.0.1:{port}", timeout=20, container=container)
    silent.create_sender("_$qd.edge_heartbeat")
    start_s = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - the router closes the connection
        silent.wait(lambda: False, timeout=20, msg="the interior to close the connection")
    assert time.monotonic() - start_s < 19
    wait_for(lambda: "Lost heartbeat from container Silent.Edge" in net["I"].log_text(), 5,
             "the interior's log line")


def test_a_client_heartbeat_is_accepted_and_its_silence_closes_it_as_an_edges_would(
        start_router: StartRouter) -> None:
    """The interior's heartbeat service takes any connection's sender, as
    qdrouterd's does, and settles each heartbeat it is sent unsettled."""
    net = start_network(start_router, {"I": []})
    client = BlockingConnection(net.url("I"), timeout=20)
    beat = send_async(client.create_sender("_$qd.edge_heartbeat"), 1)
    wait_all([client], lambda: beat.settled, what="the heartbeat's outcome")
    assert beat.remote_state == Delivery.ACCEPTED
    with pytest.raises(Exception):  # noqa: B017 - the router closes the connection
        client.wait(lambda: False, timeout=20, msg="the interior to close the connection")
    wait_for(lambda: "Lost heartbeat from container" in net["I"].log_text(), 5,
             "the interior's log line")


def test_an_edge_connection_lookup_is_answered_and_a_bad_request_rejected(
        start_router: StartRouter) -> None:
    net = start_network(start_router, {"I": []})
    client = BlockingConnection(f"amqp://127.0.0.1:{net.edge_port('I')}", timeout=20)
    replies = client.create_receiver(None, dynamic=True, credit=10)
    sender = client.create_sender("_$qd.addr_lookup")
    request = Message(body=["some.address", True], reply_to=replies.remote_source.address,
                      correlation_id=7, properties={"version": 1, "opcode": 1})
    asked = sender.link.send(request)
    answer = replies.receive(timeout=10)  # the router's answers come pre-settled
    wait_all([client], lambda: asked.settled, what="the request's outcome")
    assert asked.remote_state == Delivery.ACCEPTED
    assert answer.correlation_id == 7 and answer.properties["status"] == 3  # not found
    assert answer.body == [False, False]
    bad = sender.link.send(Message(body=[71], properties={"version": 1, "opcode": 1}))
    wait_all([client], lambda: bad.settled, what="the bad request's outcome")
    assert bad.remote_state == Delivery.REJECTED
    client.close()


def test_hopstat_and_hopmanage_show_edges_through_their_interior(
        start_router: StartRouter) -> None:
    net = edges(start_router)
    listed = hopstat(net["I"], "-e")
    rows = [line.split() for line in listed.splitlines() if " edge " in f" {line} "]
    assert sorted(row[2] for row in rows) == ["E1", "E2"], listed
    assert all(row[-1] == "yes" for row in rows), listed
    at_edge = hopstat(net["E1"], "-e")
    assert [line.split()[2] for line in at_edge.splitlines() if " edge " in f" {line} "] == [
        "I"], at_edge
    general = hopstat(net["I"], "-d", "E2", "-g")
    assert "E2" in general.splitlines()[1] and re.search(r"Mode\s+edge", general), general
    (row,) = hopmanage(net["I"], "query", "-d", "E1", "--type", "router")
    assert row["mode"] == "edge" and row["id"] == "E1"


def test_hopstat_all_routers_reaches_every_interior_and_every_edge(
        start_router: StartRouter) -> None:
    net = edges(start_router, {"E1": ["I1"], "E2": ["I2"], "E3": ["I2"]},
                interiors={"I1": [], "I2": ["I1"]})
    everyone = {"I1", "I2", "E1", "E2", "E3"}

    def routers(output: str) -> set[str]:
        return set(re.findall(r"^Router (\S+)$", output, re.MULTILINE)) - {"Statistics"}

    at_i1 = Management(net.url("I1"))
    wait_for(lambda: {"HE1", "HE2", "HE3"} <= {row["key"] for row in at_i1.query(
        "router.address", "key")}, 10, "I1 to know every edge")
    at_i1.close()
    for start in ("I1", "E3"):  # from an interior, and from an edge through its uplink
        general = hopstat(net[start], "--all-routers", "-g")
        assert routers(general) == everyone, general
        modes = re.findall(r"^\s*Mode\s+(\S+)", general, re.MULTILINE)
        assert sorted(modes) == ["edge"] * 3 + ["interior"] * 2, general
    # Each router's own connections: E2's table has its uplink to I2 only.
    conns = hopstat(net["I1"], "--all-routers", "-c")
    e2 = conns.split("Router E2", 1)[1].split("Router ", 1)[0]
    assert re.search(r"\bI2\b.*\bedge\b", e2) and "inter-router" not in e2, conns
    with pytest.raises(AssertionError, match="cannot be used with"):
        hopstat(net["I1"], "--all-routers", "-r", "I2")


def test_an_edge_alone_says_it_has_no_edge_connections_once_its_uplink_is_gone(
        killable: StartRouter) -> None:
    net = start_network(killable, {"I": []}, edges={"E1": ["I"]})
    net.kill("I")
    wait_for(lambda: "no alternate connection available" in net["E1"].log_text(), 15,
             "E1 to lose its uplink")
    assert "No Edge Router Connections" in hopstat(net["E1"], "-e")


EDGE_POLICY = """\
policy {
    enableVhostPolicy: true
}
vhost {
    hostname: $default
    allowUnknownUser: yes
    groups: {
        "$default": {
            "allowDynamicSource": true,
            "allowAnonymousSender": true,
            "sources": "*",
            "targets": "allowed.*, _$qd.*, $management"
        }
    }
}
"""


def test_vhost_policy_at_the_interior_rules_what_an_edge_may_produce_to(
        start_router: StartRouter) -> None:
    net = start_network(start_router, {"I": []}, edges=TWO_EDGES, extras={"I": EDGE_POLICY})
    assert deliver_across(net.url("E1"), net.url("E2"), "allowed.q", "ok") == Delivery.ACCEPTED
    producer, consumer = connect(net.url("E1")), connect(net.url("E2"))
    consumer.create_receiver("denied.q", credit=1)
    sender = producer.create_sender("denied.q")
    pump(producer, 2.0)
    assert sender.link.credit == 0, "credit for an address the edge's vhost refuses"
    assert "DENY" in net["I"].log_text() and "denied.q" in net["I"].log_text()
