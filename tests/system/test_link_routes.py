"""Link routes against a real RabbitMQ (docs/brokers.md#link-routes).

A client's link whose address matches a link route is not terminated by the
router: it is attached on to the broker, and transfers, dispositions, credit
and detaches pass straight through, on one router or across a network.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from proton import Delivery, Message, symbol
from proton.handlers import MessagingHandler
from proton.reactor import Container, DynamicNodeProperties
from proton.utils import LinkDetached

from tests.system.brokered import LOG_INFO, broker_connector
from tests.system.clients import (
    connect,
    pump,
    receive_all,
    send_async,
    send_raw,
    send_settled,
    wait_settled,
    wait_through_detaches,
)
from tests.system.conftest import StartRouter
from tests.system.harness import router_conf
from tests.system.mgmt import Management
from tests.system.network import start_network
from tests.system.peers import DetachAnsweringPeer, SourcePeer, TransactionalPeer
from tests.system.rabbitmq import RabbitMQ, free_port


def link_routes(prefix: str, connection: str = "broker", extra: str = "") -> str:
    return "".join(
        f"linkRoute {{\n    prefix: {prefix}\n    direction: {d}\n    connection: {connection}\n"
        f"{extra}}}\n" for d in ("in", "out"))


def test_a_sender_and_a_receiver_are_link_routed_to_the_broker_queue(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + link_routes("lr")
                                   + LOG_INFO))
    hop.wait_log(r"Link Route Activated")
    conn = connect(hop.url)
    mgmt = Management(hop.url)
    counters = ("deliveriesIngressRouteContainer", "deliveriesEgressRouteContainer")
    [before] = mgmt.query("router", *counters)
    try:
        sender = conn.create_sender("lr.one")
        assert send_settled(conn, sender, [f"m{i}" for i in range(5)]) \
            == [Delivery.ACCEPTED] * 5
        assert rabbitmq.queue_depth("lr.one") == 5
        receiver = conn.create_receiver("lr.one", credit=10)
        assert [m.body for m in receive_all(receiver, 5)] == [f"m{i}" for i in range(5)]
        [after] = mgmt.query("router", *counters)
        assert {k: after[k] - before[k] for k in counters} == dict.fromkeys(counters, 5), \
            "routed deliveries count in the router's totals"
        conn.close()  # the pairs end with the client's connection
        time.sleep(0.5)
        [closed] = mgmt.query("router", *counters)
        assert closed == after, "the counts of routed links that went are kept"
    finally:
        conn.close()
        mgmt.close()
    assert "Link-routed attach: dir=in address=lr.one" in hop.log_text()


def test_external_prefixes_are_rewritten_toward_the_broker_and_back(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    routes = link_routes("lrp", extra="    delExternalPrefix: lrp.\n"
                                      "    addExternalPrefix: ext-\n")
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + routes + LOG_INFO))
    hop.wait_log(r"Link Route Activated")
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("lrp.orders")
        assert sender.link.remote_target.address == "lrp.orders", \
            "the client sees its own address in the answer"
        delivery = send_async(sender, "rewritten")
        assert wait_settled(conn, delivery) == Delivery.ACCEPTED
        assert rabbitmq.queue_depth("ext-orders") == 1
        assert rabbitmq.queue_depth("lrp.orders") is None
        receiver = conn.create_receiver("lrp.orders")
        assert receiver.link.remote_source.address == "lrp.orders"
        assert [m.body for m in receive_all(receiver, 1)] == ["rewritten"]
    finally:
        conn.close()


def test_no_route_refuses_the_attach(start_router: StartRouter) -> None:
    hop = start_router(router_conf(broker_connector(free_port()) + link_routes("lrn")
                                   + LOG_INFO))
    conn = connect(hop.url)
    try:
        with pytest.raises(LinkDetached) as refused:
            conn.create_sender("lrn.q")
        assert refused.value.condition == "qd:no-route-to-dest"
        with pytest.raises(LinkDetached) as refused:
            conn.create_receiver("lrn.q")
        assert refused.value.condition == "qd:no-route-to-dest"
        other = conn.create_sender("plain.address")
        assert other.link.state & other.link.REMOTE_ACTIVE, "other addresses still work"
    finally:
        conn.close()


def test_link_routes_across_a_three_router_line(start_router: StartRouter,
                                                rabbitmq: RabbitMQ) -> None:
    """The broker is on A, the client on C: the attach goes C -> B -> A ->
    broker; B and C learn the link route from A's advertisement alone."""
    net = start_network(start_router, {"A": [], "B": ["A"], "C": ["B"]},
                        extras={"A": broker_connector(rabbitmq.port) + link_routes("lrnet")})
    for router in ("B", "C"):
        net[router].wait_log(r"link route Clrnet learnt", timeout=20)
        net[router].wait_log(r"link route Dlrnet learnt", timeout=20)
    conn = connect(net.url("C"))
    try:
        sender = conn.create_sender("lrnet.q")
        assert send_settled(conn, sender, [f"n{i}" for i in range(10)]) \
            == [Delivery.ACCEPTED] * 10
        assert rabbitmq.queue_depth("lrnet.q") == 10
        receiver = conn.create_receiver("lrnet.q", credit=5)
        assert [m.body for m in receive_all(receiver, 10)] == [f"n{i}" for i in range(10)]
    finally:
        conn.close()
    for router in ("A", "B"):
        assert "Link-routed attach: dir=in address=lrnet.q" in net[router].log_text()


def test_management_lists_link_route_keys_and_routed_links(start_router: StartRouter,
                                                            rabbitmq: RabbitMQ) -> None:
    """router.address shows a link route's keys where it is configured (with
    the route-container connections serving it) and where it is learnt;
    router.link shows both links of every routed pair on each router, owned
    by the address of the link each is paired with."""
    net = start_network(start_router, {"A": [], "B": ["A"]},
                        extras={"A": broker_connector(rabbitmq.port) + link_routes("lrm")})
    net["B"].wait_log(r"link route Dlrm learnt", timeout=20)
    at_a, at_b = Management(net.url("A")), Management(net.url("B"))
    fields = ("key", "distribution", "containerCount", "remoteCount")
    rows_a = {row["key"]: row for row in at_a.query("router.address", *fields)}
    rows_b = {row["key"]: row for row in at_b.query("router.address", *fields)}
    for key in ("Clrm", "Dlrm"):
        assert rows_a[key]["distribution"] == "linkBalanced"
        assert rows_a[key]["containerCount"] == 1, rows_a[key]
        assert rows_b[key]["distribution"] == "linkBalanced"
        assert (rows_b[key]["containerCount"], rows_b[key]["remoteCount"]) == (0, 1)
    conn = connect(net.url("B"))
    try:
        conn.create_receiver("lrm.q")
        for agent, roles in ((at_b, {"normal", "inter-router"}),
                             (at_a, {"inter-router", "route-container"})):
            conns = {row["identity"]: row["role"]
                     for row in agent.query("connection", "identity", "role")}
            routed = [row for row in agent.query("router.link", "owningAddr", "peer",
                                                  "connectionId", "identity")
                      if row["owningAddr"] == "M0lrm.q"]
            assert {conns[row["connectionId"]] for row in routed} == roles, routed
            assert {row["peer"] for row in routed} == {row["identity"] for row in routed}
    finally:
        conn.close()
        at_a.close()
        at_b.close()


def test_losing_the_broker_detaches_routed_links_and_settles_in_flight_deliveries(
        start_router: StartRouter) -> None:
    broker = RabbitMQ("lost")
    try:
        broker.start()
        hop = start_router(router_conf(broker_connector(broker.port) + link_routes("lrl")
                                       + LOG_INFO))
        hop.wait_log(r"Link Route Activated")
        conn = connect(hop.url)
        try:
            receiver = conn.create_receiver("lrl.q", credit=10)
            sender = conn.create_sender("lrl.q")
            first = send_async(sender, "before")
            assert wait_settled(conn, first) == Delivery.ACCEPTED
            assert receiver.receive(timeout=10).body == "before"
            deliveries = [send_async(sender, f"x{i}") for i in range(20)]
            broker.kill()
            closed = sender.link.REMOTE_CLOSED
            detaches = wait_through_detaches(
                conn, lambda: all(d.settled for d in deliveries)
                and bool(sender.link.state & closed) and bool(receiver.link.state & closed),
                what="every delivery settled and both links detached")
            assert detaches == ["qd:routed-link-lost"] * 2
            assert sender.link.remote_condition.name == "qd:routed-link-lost"
            assert receiver.link.remote_condition.name == "qd:routed-link-lost"
            assert {d.remote_state for d in deliveries} <= \
                {Delivery.ACCEPTED, Delivery.MODIFIED, Delivery.RELEASED}
            with pytest.raises(LinkDetached) as refused:
                conn.create_sender("lrl.q")
            assert refused.value.condition == "qd:no-route-to-dest"
        finally:
            conn.close()
    finally:
        broker.stop()
        broker.remove()


def test_large_messages_stream_through_both_ways(start_router: StartRouter,
                                                 rabbitmq: RabbitMQ) -> None:
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + link_routes("lrbig")
                                   + LOG_INFO))
    hop.wait_log(r"Link Route Activated")
    body = bytes(range(256)) * 1200  # 300 KiB: about twenty 16 KiB frames each way
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("lrbig.q")
        assert wait_settled(conn, send_async(sender, body), timeout=20) == Delivery.ACCEPTED
        receiver = conn.create_receiver("lrbig.q")
        (message,) = receive_all(receiver, 1, timeout=20)
        assert message.body == body
    finally:
        conn.close()


def test_an_aborted_transfer_is_aborted_toward_the_container(start_router: StartRouter
                                                             ) -> None:
    """The sender aborts a message half sent: the container sees it aborted
    (it never arrives) and the next message arrives whole.  (RabbitMQ 3.10
    does not take aborted transfers: it ends the session; a proton container
    does.)"""
    port = free_port()
    sink = TransactionalPeer(f"127.0.0.1:{port}", listen=True)
    sink.start()
    try:
        hop = start_router(router_conf(broker_connector(port, "sink") + link_routes(
            "lrab", "sink") + LOG_INFO))
        hop.wait_log(r"Link Route Activated")
        conn = connect(hop.url)
        try:
            sender = conn.create_sender("lrab.q")
            encoded = Message(body=b"a" * 100000).encode()
            link = sender.link
            aborted = link.delivery(b"aborted")
            link.stream(encoded[:40000])
            pump(conn, 0.5)
            aborted.abort()
            kept = send_async(sender, "kept")
            assert wait_settled(conn, kept) == Delivery.ACCEPTED
            assert [body for _, body, _ in sink.received] == ["kept"]
            assert sink.aborted == 1
            # A sender that detaches in the middle of a message: the
            # container's copy is aborted before the detach reaches it.
            leaving = conn.create_sender("lrab.q", name="leaving")
            leaving.link.delivery(b"cut")
            leaving.link.stream(encoded[:40000])
            pump(conn, 0.5)
            leaving.close()
            pump(conn, 0.5)
            assert sink.aborted == 2
        finally:
            conn.close()
    finally:
        sink.stop()


def test_delivery_tags_longer_than_32_bytes_are_rejected(start_router: StartRouter,
                                                         rabbitmq: RabbitMQ) -> None:
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + link_routes("lrtag")
                                   + LOG_INFO))
    hop.wait_log(r"Link Route Activated")
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("lrtag.q")
        long_tag = send_raw(sender, Message(body="too long").encode(), tag=b"t" * 33)
        assert wait_settled(conn, long_tag) == Delivery.REJECTED
        assert long_tag.remote.condition.name == "amqp:invalid-field"
        exact = send_raw(sender, Message(body="fits").encode(), tag=b"t" * 32)
        assert wait_settled(conn, exact) == Delivery.ACCEPTED
        assert rabbitmq.queue_depth("lrtag.q") == 1
    finally:
        conn.close()


def test_a_transfer_with_no_message_is_rejected_and_its_credit_given_back(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + link_routes("lrempty")
                                   + LOG_INFO))
    hop.wait_log(r"Link Route Activated")
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("lrempty.q")
        conn.wait(lambda: sender.link.credit > 0, msg="credit from the broker")
        credit = sender.link.credit
        empty = send_raw(sender, b"", tag=b"e")
        assert wait_settled(conn, empty) == Delivery.REJECTED
        assert empty.remote.condition.name == "amqp:decode-error"
        conn.wait(lambda: sender.link.credit == credit, msg="the credit given back")
        after = send_raw(sender, Message(body="next").encode(), tag=b"n")
        assert wait_settled(conn, after) == Delivery.ACCEPTED
        assert rabbitmq.queue_depth("lrempty.q") == 1
    finally:
        conn.close()


def test_drain_reaches_the_sender_and_drained_comes_back(start_router: StartRouter) -> None:
    port = free_port()
    source = SourcePeer(f"127.0.0.1:{port}", ["s0", "s1", "s2"])
    source.start()
    try:
        hop = start_router(router_conf(broker_connector(port, "source") + link_routes(
            "lrsrc", "source") + LOG_INFO))
        hop.wait_log(r"Link Route Activated")
        conn = connect(hop.url)
        try:
            receiver = conn.create_receiver("lrsrc.q", credit=0)
            link = receiver.link
            link.drain(10)
            conn.wait(lambda: link.credit == 0, msg="the sender gave back the unused credit")
            assert source.drains == 1
            assert [m.body for m in receive_all(receiver, 3)] == ["s0", "s1", "s2"]
        finally:
            conn.close()
    finally:
        source.stop()


def test_a_dynamic_terminus_naming_a_link_route_is_routed_to_the_container(
        start_router: StartRouter) -> None:
    """A dynamic source whose node properties start with x-opt-qd.address is
    link-routed by that address (docs/routing.md#dynamic-addresses): the container
    makes the node
    and its address reaches the client; with no matching route the attach is
    refused."""
    port = free_port()
    container = TransactionalPeer(f"127.0.0.1:{port}", listen=True)
    container.start()
    try:
        hop = start_router(router_conf(broker_connector(port, "dyn") + link_routes("lrdyn", "dyn")
                                       + LOG_INFO))
        hop.wait_log(r"Link Route Activated")
        conn = connect(hop.url)
        try:
            routed = conn.create_receiver(None, dynamic=True, options=DynamicNodeProperties(
                {symbol("x-opt-qd.address"): "lrdyn.temp"}))
            assert routed.link.remote_source.address == "dynamic.1"
            assert container.dynamic_nodes == 1
            with pytest.raises(LinkDetached) as refused:
                conn.create_receiver(None, dynamic=True, options=DynamicNodeProperties(
                    {symbol("x-opt-qd.address"): "elsewhere"}))
            assert refused.value.condition == "qd:no-route-to-dest"
            plain = conn.create_receiver(None, dynamic=True)
            assert plain.link.remote_source.address.startswith("amqp:/_topo/0/HopTest/temp."), \
                "a dynamic terminus without the property is the router's own"
        finally:
            conn.close()
    finally:
        container.stop()



class _DetachingClient(MessagingHandler):  # type: ignore[misc]
    """Attaches a receiver, detaches it (closed false) once it is open and
    records how the router answered: ``"detach"`` or ``"close"`` (``None``
    when nothing came in 10 s)."""

    def __init__(self, url: str, address: str) -> None:
        super().__init__(prefetch=0)
        self.url = url
        self.address = address
        self.answer: str | None = None
        self.conn: Any = None
        self.timer: Any = None

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url)
        event.container.create_receiver(self.conn, self.address)
        self.timer = event.container.schedule(10, self)

    def on_timer_task(self, event: Any) -> None:
        if self.answer is None:
            self.conn.close()

    def on_link_opened(self, event: Any) -> None:
        event.link.detach()

    def on_link_remote_detach(self, event: Any) -> None:
        self._answered("detach")

    def on_link_remote_close(self, event: Any) -> None:
        self._answered("close")

    def _answered(self, how: str) -> None:
        self.answer = how
        self.conn.close()
        self.timer.cancel()


@pytest.mark.parametrize("close", [True, False])
def test_a_detach_is_answered_with_the_containers_answer(start_router: StartRouter,
                                                         close: bool) -> None:
    """A client that only detaches a routed link learns from the answer
    whether the container closed it (docs/brokers.md#the-routed-pair)."""
    port = free_port()
    container = DetachAnsweringPeer(f"127.0.0.1:{port}", close=close)
    container.start()
    try:
        hop = start_router(router_conf(broker_connector(port, "c") + link_routes("lrdt", "c")
                                       + LOG_INFO))
        hop.wait_log(r"Link Route Activated")
        client = _DetachingClient(hop.url, "lrdt.q")
        Container(client).run()
        assert client.answer == ("close" if close else "detach")
        assert container.detached == 1
    finally:
        container.stop()
