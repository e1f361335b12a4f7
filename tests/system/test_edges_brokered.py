"""Edge routers in front of a real RabbitMQ (docs/networks.md#link-routes-through-an-edge,
docs/brokers.md): link routes through the uplink in both directions, and a
waypoint served by auto-links on an edge for producers and consumers on
other edges."""

from __future__ import annotations

import pytest
from proton import Delivery, Message

from tests.system.brokered import broker_connector, wait_autolinks, waypoint
from tests.system.clients import connect, receive_all, send_settled, wait_all
from tests.system.conftest import StartRouter
from tests.system.network import start_network
from tests.system.rabbitmq import RabbitMQ
from tests.system.test_link_routes import link_routes


def test_a_client_on_an_edge_is_link_routed_to_a_broker_behind_the_interior(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    net = start_network(start_router, {"I": []}, edges={"E1": ["I"]},
                        extras={"I": broker_connector(rabbitmq.port) + link_routes("lrup")})
    net["I"].wait_log(r"Link Route Activated")
    conn = connect(net.url("E1"))
    try:
        sender = conn.create_sender("lrup.q")
        assert send_settled(conn, sender, [f"u{i}" for i in range(6)]) \
            == [Delivery.ACCEPTED] * 6
        assert rabbitmq.queue_depth("lrup.q") == 6
        receiver = conn.create_receiver("lrup.q", credit=10)
        assert [m.body for m in receive_all(receiver, 6)] == [f"u{i}" for i in range(6)]
    finally:
        conn.close()
    assert "Link-routed attach through the uplink: dir=in address=lrup.q" in \
        net["E1"].log_text()
    assert "Link-routed attach: dir=in address=lrup.q" in net["I"].log_text()


def test_an_unserved_link_route_beyond_the_edge_refuses_the_attach(
        start_router: StartRouter) -> None:
    net = start_network(start_router, {"I": []}, edges={"E1": ["I"]},
                        extras={"I": link_routes("nobroker")})
    conn = connect(net.url("E1"))
    try:
        with pytest.raises(Exception, match="qd:no-route-to-dest"):
            conn.create_sender("nobroker.q")
    finally:
        conn.close()


def test_a_broker_on_an_edge_serves_clients_anywhere_in_the_network(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    net = start_network(start_router, {"I": []}, edges={"E1": ["I"]},
                        extras={"E1": broker_connector(rabbitmq.port) + link_routes("lrdown")})
    net["E1"].wait_log(r"Link Route Activated")
    net.add_edge("E2", ["I"])
    net["I"].wait_log(r"Link Route Activated .*proxyLinkRoute/Clrdown", timeout=20)
    conn = connect(net.url("E2"))
    try:
        sender = conn.create_sender("lrdown.q")
        assert send_settled(conn, sender, [f"d{i}" for i in range(4)]) \
            == [Delivery.ACCEPTED] * 4
        assert rabbitmq.queue_depth("lrdown.q") == 4
    finally:
        conn.close()
    conn = connect(net.url("I"))
    try:
        receiver = conn.create_receiver("lrdown.q", credit=10)
        assert [m.body for m in receive_all(receiver, 4)] == [f"d{i}" for i in range(4)]
    finally:
        conn.close()


def test_a_waypoint_on_an_edge_carries_messages_between_other_edges(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    phased = "address {\n    prefix: wpedge\n    waypoint: yes\n}\n"
    net = start_network(start_router, {"I": []}, edges={"E1": ["I"]},
                        extra=phased,
                        extras={"E1": broker_connector(rabbitmq.port)
                                + waypoint("wpedge").replace(phased, "")})
    wait_autolinks(net["E1"], "wpedge")
    net.add_edge("E2", ["I"])
    net.add_edge("E3", ["I"])
    producer, consumer = connect(net.url("E2")), connect(net.url("E3"))
    conns = [producer, consumer]
    try:
        receiver = consumer.create_receiver("wpedge", credit=10)
        sender = producer.create_sender("wpedge")
        wait_all(conns, lambda: sender.link.credit > 0, 20, "credit through the waypoint")
        deliveries = [sender.link.send(Message(body=f"w{i}")) for i in range(5)]
        wait_all(conns, lambda: receiver.fetcher.has_message == 5, 20,
                 "the messages back from the broker")
        bodies = sorted(receiver.fetcher.pop().body for _ in range(5))
        assert bodies == [f"w{i}" for i in range(5)]
        wait_all(conns, lambda: all(d.settled for d in deliveries), 20, "settled")
        assert {d.remote_state for d in deliveries} == {Delivery.ACCEPTED}
    finally:
        producer.close()
        consumer.close()

