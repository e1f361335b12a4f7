"""Waypoint addresses and auto-links against a real RabbitMQ
(docs/brokers.md#waypoints-and-auto-links).

A waypoint address sends what producers give it to a broker queue through an
``out`` auto-link and brings the queue's messages back to its consumers
through an ``in`` auto-link: messages wait on the broker while nobody
consumes them.
"""

from __future__ import annotations

from proton import Delivery

from tests.system.brokered import LOG_INFO, broker_connector, wait_autolinks, waypoint
from tests.system.clients import (
    connect,
    pump,
    receive_all,
    send_async,
    send_settled,
    wait_all,
    wait_credit,
)
from tests.system.conftest import StartRouter
from tests.system.flows import AtLeastOnce
from tests.system.harness import router_conf
from tests.system.mgmt import Management
from tests.system.network import start_network
from tests.system.peers import SinkPeer, StingyPeer
from tests.system.rabbitmq import RabbitMQ, free_port
from tests.waiting import wait_for


def test_messages_wait_on_the_broker_until_a_consumer_comes(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + waypoint("wp.store")
                                   + LOG_INFO))
    wait_autolinks(hop, "wp.store")
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("wp.store")
        assert send_settled(conn, sender, [f"m{i}" for i in range(5)]) \
            == [Delivery.ACCEPTED] * 5
        wait_for(lambda: rabbitmq.queue_depth("wp.store") == 5, 20,
                 "five messages on the broker's queue")
        receiver = conn.create_receiver("wp.store")
        messages = receive_all(receiver, 5)
        assert [m.body for m in messages] == [f"m{i}" for i in range(5)]
        wait_for(lambda: rabbitmq.queue_depth("wp.store") == 0, 20, "the queue emptied")
    finally:
        conn.close()


def test_external_address_names_the_queue_and_the_address_stays_internal(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    hop = start_router(router_conf(broker_connector(rabbitmq.port)
                                   + waypoint("wp.internal", external="wp-external-queue")
                                   + LOG_INFO))
    wait_autolinks(hop, "wp-external-queue")
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("wp.internal")
        assert send_settled(conn, sender, [f"x{i}" for i in range(3)]) \
            == [Delivery.ACCEPTED] * 3
        wait_for(lambda: rabbitmq.queue_depth("wp-external-queue") == 3, 20,
                 "the messages on the queue named by externalAddress")
        assert rabbitmq.queue_depth("wp.internal") is None, "no queue by the internal name"
        receiver = conn.create_receiver("wp.internal")
        assert [m.body for m in receive_all(receiver, 3)] == ["x0", "x1", "x2"]
    finally:
        conn.close()


def test_a_producer_gets_no_credit_until_the_broker_link_is_up(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    """Before the route-container connection opens, the waypoint has nowhere to send."""
    silent = free_port()  # nothing listens here: the connector keeps failing
    hop = start_router(router_conf(broker_connector(silent) + waypoint("wp.nowhere")
                                   + LOG_INFO))
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("wp.nowhere")
        pump(conn, 1.0)
        assert sender.link.credit == 0
    finally:
        conn.close()
    assert "Auto Link Activated" not in hop.log_text()


def test_waypoint_across_a_network_with_the_broker_on_one_end(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    """A - B - C with the broker on A: a producer on C and a consumer on B
    both reach the queue; the broker's messages cross the network at phase 1."""
    address = "address {\n    prefix: wp.net\n    waypoint: yes\n}\n"
    a_only = broker_connector(rabbitmq.port) + waypoint("wp.net").replace(address, "")
    net = start_network(start_router, {"A": [], "B": ["A"], "C": ["B"]}, extra=address,
                        extras={"A": a_only})
    wait_autolinks(net["A"], "wp.net")
    producer, consumer = connect(net.url("C")), connect(net.url("B"))
    try:
        sender = producer.create_sender("wp.net")
        wait_credit(producer, sender, 250, timeout=20)
        deliveries = [send_async(sender, f"n{i}") for i in range(10)]
        producer.wait(lambda: all(d.settled for d in deliveries), msg="broker settles")
        assert [d.remote_state for d in deliveries] == [Delivery.ACCEPTED] * 10
        wait_for(lambda: rabbitmq.queue_depth("wp.net") == 10, 20, "ten on the queue")
        receiver = consumer.create_receiver("wp.net")
        assert sorted(m.body for m in receive_all(receiver, 10, timeout=20)) == \
            sorted(f"n{i}" for i in range(10))
        wait_for(lambda: rabbitmq.queue_depth("wp.net") == 0, 20, "the queue emptied")
    finally:
        producer.close()
        consumer.close()


def test_broker_restarted_mid_stream_loses_no_accepted_message(
        start_router: StartRouter) -> None:
    """The broker goes away under load and comes back: the auto-links attach
    again, messages in flight to it come back MODIFIED or RELEASED (and are
    sent again), and every message it accepted reaches the consumer."""
    broker = RabbitMQ("restart")
    try:
        broker.start()
        hop = start_router(router_conf(broker_connector(broker.port) + waypoint("wp.restart")
                                       + LOG_INFO))
        wait_autolinks(hop, "wp.restart")
        flow = AtLeastOnce(hop.url, hop.url, "wp.restart", count=600, rate=100)
        flow.start()
        wait_for(lambda: len(flow.accepted) >= 100, 30, "a hundred accepted before the restart")
        broker.restart()
        wait_autolinks(hop, "wp.restart", count=2, timeout=60)
        flow.wait(120)
        assert flow.accepted <= flow.received
        assert len(flow.accepted) == 600
    finally:
        broker.stop()
        broker.remove()


def test_a_sharded_queue_spreads_over_two_brokers_and_consumers_get_every_shard(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    second = RabbitMQ("shard")
    try:
        second.start()
        shards = waypoint("wp.shard", "broker1") + waypoint("wp.shard", "broker2").replace(
            "address {\n    prefix: wp.shard\n    waypoint: yes\n}\n", "")
        hop = start_router(router_conf(broker_connector(rabbitmq.port, "broker1")
                                       + broker_connector(second.port, "broker2")
                                       + shards + LOG_INFO))
        wait_autolinks(hop, "wp.shard", count=2)
        conn = connect(hop.url)
        try:
            sender = conn.create_sender("wp.shard")
            assert send_settled(conn, sender, [f"s{i}" for i in range(40)]) \
                == [Delivery.ACCEPTED] * 40
            wait_for(lambda: (rabbitmq.queue_depth("wp.shard") or 0)
                     + (second.queue_depth("wp.shard") or 0) == 40, 20, "forty on the shards")
            depths = (rabbitmq.queue_depth("wp.shard"), second.queue_depth("wp.shard"))
            assert all(d is not None and d >= 10 for d in depths), \
                f"balanced over both shards, got {depths}"
            receiver = conn.create_receiver("wp.shard")
            bodies = [m.body for m in receive_all(receiver, 40, timeout=20)]
            assert sorted(bodies) == sorted(f"s{i}" for i in range(40))
            wait_for(lambda: rabbitmq.queue_depth("wp.shard") == 0
                     and second.queue_depth("wp.shard") == 0, 20, "both shards emptied")
        finally:
            conn.close()
    finally:
        second.stop()
        second.remove()


def test_a_consumer_leaving_unsettled_gives_the_messages_back_to_the_broker(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    """The router must tell RabbitMQ RELEASED, not MODIFIED: RabbitMQ's source
    lists the outcomes it takes, MODIFIED is not among them, and it ends the
    session on one (the auto-link would fail)."""
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + waypoint("wp.giveback")
                                   + LOG_INFO))
    wait_autolinks(hop, "wp.giveback")
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("wp.giveback")
        deliveries = [send_async(sender, f"g{i}") for i in range(4)]
        conn.wait(lambda: all(d.settled for d in deliveries), msg="broker settles")
        greedy = connect(hop.url)
        receiver = greedy.create_receiver("wp.giveback", credit=10)
        got = [receiver.receive(timeout=10) for _ in range(4)]  # received, never settled
        assert sorted(m.body for m in got) == [f"g{i}" for i in range(4)]
        wait_all([conn, greedy], lambda: rabbitmq.queue_counts("wp.giveback") == (0, 4), 20,
                 "four delivered, unacknowledged")
        greedy.close()
        wait_all([conn], lambda: rabbitmq.queue_counts("wp.giveback") == (4, 0), 20,
                 "four given back to the queue")
        receiver = conn.create_receiver("wp.giveback", credit=10)
        assert sorted(m.body for m in receive_all(receiver, 4)) == [f"g{i}" for i in range(4)]
    finally:
        conn.close()
    log = hop.log_text()
    assert "Auto Link Activation Failed" not in log
    assert "Unrecognised state" not in log


def test_link_counters_show_what_passed_through_each_link(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    """The counters management will show, as the link-close log reports them
    (qdrouterd's ``del=... acc=...`` line)."""
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + waypoint("wp.count")
                                   + LOG_INFO))
    wait_autolinks(hop, "wp.count")
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("wp.count")
        deliveries = [send_async(sender, f"k{i}") for i in range(3)]
        conn.wait(lambda: all(d.settled for d in deliveries), msg="broker settles")
        receiver = conn.create_receiver("wp.count")
        receive_all(receiver, 3)
        pump(conn, 0.5)
    finally:
        conn.close()
    assert hop.stop() == 0
    lines = [line for line in hop.log_text().splitlines()
             if "Link closed due to connection loss" in line or "Link detached" in line]
    counted = [line for line in lines if "del=3 presett=0 psdrop=0 acc=3 rej=0 rel=0 mod=0" in line]
    assert len(counted) == 4, "client sender, out auto-link, in auto-link, client receiver:\n" + \
        "\n".join(lines)


def test_a_producer_with_only_a_broker_behind_it_gets_the_brokers_credit(
        start_router: StartRouter) -> None:
    """The broker grants 3 and no more: the producer gets 3, not the router's
    window of 250, and after sending them it waits for the broker."""
    port = free_port()
    broker = StingyPeer(f"127.0.0.1:{port}", credit=3)
    broker.start()
    try:
        hop = start_router(router_conf(broker_connector(port, "stingy")
                                       + waypoint("wp.stingy", "stingy") + LOG_INFO))
        wait_autolinks(hop, "wp.stingy", directions=("out",))
        conn = connect(hop.url)
        try:
            sender = conn.create_sender("wp.stingy")
            wait_credit(conn, sender, 3)
            pump(conn, 0.5)
            assert sender.link.credit == 3, "no more than the broker gave"
            assert send_settled(conn, sender, ["a", "b", "c"]) == [Delivery.ACCEPTED] * 3
            pump(conn, 0.5)
            assert sender.link.credit == 0, "the broker gave nothing more"
            assert broker.accepted == 3
        finally:
            conn.close()
    finally:
        broker.stop()


def test_an_autolink_naming_a_listener_attaches_on_every_connection_from_it(
        start_router: StartRouter) -> None:
    """Each connection to a route-container listener an auto-link names gets
    the auto-link's links, and keeps them while the others come and go."""
    port = free_port()
    listener = (f"listener {{\n    name: shards\n    host: 127.0.0.1\n    port: {port}\n"
                f"    role: route-container\n    saslMechanisms: ANONYMOUS\n}}\n")
    hop = start_router(router_conf(listener + waypoint("shard.q", "shards") + LOG_INFO))
    url = f"127.0.0.1:{port}"
    peers = [SinkPeer(url, "shard-a"), SinkPeer(url, "shard-b")]
    mgmt = Management(hop.url)

    def autolinked() -> dict[tuple[str, str], set[str]]:
        found: dict[tuple[str, str], set[str]] = {}
        for row in mgmt.query("router.link", "linkDir", "owningAddr", "connectionId"):
            if row["owningAddr"] in ("M0shard.q", "M1shard.q"):
                found.setdefault((row["linkDir"], row["owningAddr"]), set()).add(
                    row["connectionId"])
        return found

    try:
        for peer in peers:
            peer.start()
        wait_autolinks(hop, "shard.q", count=2)
        links = autolinked()
        assert len(links[("out", "M0shard.q")]) == 2 and len(links[("in", "M1shard.q")]) == 2
        assert links[("out", "M0shard.q")] == links[("in", "M1shard.q")]
        [status] = mgmt.query("router.config.autoLink", "direction", "operStatus")[:1]
        assert status["operStatus"] == "active"

        conn = connect(hop.url)
        sender = conn.create_sender("shard.q")
        deliveries = [send_async(sender, f"m{i}") for i in range(20)]
        wait_all([conn], lambda: all(d.settled for d in deliveries), 20, "all settled")
        assert [d.remote_state for d in deliveries] == [Delivery.ACCEPTED] * 20
        got = [str(body) for body in peers[0].bodies + peers[1].bodies]
        assert sorted(got) == sorted(f"m{i}" for i in range(20))

        peers[0].leave()  # one leaves: the other keeps its links
        wait_for(lambda: len(autolinked().get(("out", "M0shard.q"), ())) == 1, 10)
        peers.append(SinkPeer(url, "shard-c"))  # and one comes
        peers[-1].start()
        wait_autolinks(hop, "shard.q", count=3)
        wait_for(lambda: len(autolinked().get(("out", "M0shard.q"), ())) == 2, 10)
        conn.close()
    finally:
        mgmt.close()
        for peer in peers:
            peer.stop()
