"""Multi-tenant listeners (docs/routing.md#multi-tenant-listeners): each
connection's mobile addresses live in the namespace of its vhost."""

from __future__ import annotations

from proton import Delivery
from proton.reactor import DynamicNodeProperties
from proton.utils import BlockingConnection

from tests.system.brokered import LOG_INFO, broker_connector
from tests.system.clients import TIMEOUT_S, connect, send_async, wait_all
from tests.system.conftest import StartRouter
from tests.system.harness import Hop, router_conf
from tests.system.mgmt import Management
from tests.system.network import start_network
from tests.system.peers import TransactionalPeer
from tests.system.rabbitmq import free_port

TENANT_LISTENER = """listener {
    host: 127.0.0.1
    port: 0
    saslMechanisms: ANONYMOUS
    authenticatePeer: no
    multiTenant: yes
    stripAnnotations: no
}
"""


def tenant(hop: Hop, vhost: str) -> BlockingConnection:
    """A client of the multi-tenant listener (the second) in ``vhost``."""
    return BlockingConnection(f"amqp://127.0.0.1:{hop.ports[1]}", timeout=TIMEOUT_S,
                              virtual_host=vhost)


def test_tenants_meet_only_in_their_own_namespace(start_router: StartRouter) -> None:
    hop = start_router(router_conf(TENANT_LISTENER), listeners=2)
    shop, bank, plain = tenant(hop, "shop"), tenant(hop, "bank"), connect(hop.url)
    try:
        shop_in = shop.create_receiver("orders", credit=10)
        bank_in = bank.create_receiver("orders", credit=10)
        assert shop_in.link.remote_source.address == "orders", "answered unprefixed"
        outside_in = plain.create_receiver("shop/orders", credit=10)
        sender = shop.create_sender("orders")
        assert sender.link.remote_target.address == "orders"
        sent = [send_async(sender, f"m{i}") for i in range(4)]
        # From outside the namespace, with its prefix; and anonymously from inside.
        send_async(plain.create_sender("shop/orders"), "outside")
        send_async(shop.create_sender(None, name="anon"), "anonymous", address="orders")
        conns = [shop, bank, plain]
        assert len(sent) == 4
        wait_all(conns, lambda: shop_in.fetcher.has_message + outside_in.fetcher.has_message
                 == 6, what="the namespace's messages")
        assert bank_in.fetcher.has_message == 0, "another tenant's orders are its own"
        mgmt = Management(hop.url)
        rows = {r["container"]: r for r in mgmt.query("connection", "container", "tenant")}
        mgmt.close()
        assert rows[shop.conn.container]["tenant"] == "shop/"
        assert rows[plain.conn.container].get("tenant") is None
    finally:
        for conn in (shop, bank, plain):
            conn.close()


def test_a_tenants_anonymous_message_crosses_routers_in_its_namespace(
        start_router: StartRouter) -> None:
    net = start_network(start_router, {"A": [], "B": ["A"]},
                        extras={"B": TENANT_LISTENER})
    consumer = connect(net.url("A"))
    b = net["B"]
    producer = BlockingConnection(f"amqp://127.0.0.1:{b.ports[-1]}", timeout=TIMEOUT_S,
                                  virtual_host="shop")
    try:
        receiver = consumer.create_receiver("shop/far", credit=5)
        at_b = Management(net.url("B"))
        wait_all([consumer, producer], lambda: any(
            row["name"] == "M0shop/far" and row["remoteCount"] == 1
            for row in at_b.query("router.address", "name", "remoteCount")),
            what="B learning the address")
        at_b.close()
        sender = producer.create_sender(None, name="anon")
        wait_all([consumer, producer], lambda: sender.link.credit > 0, what="credit")
        delivery = send_async(sender, "over there", address="far")
        wait_all([consumer, producer], lambda: receiver.fetcher.has_message == 1,
                 what="the message at A")
        message = receiver.receive(timeout=10)
        assert (message.body, message.address) == ("over there", "far")
        receiver.accept()
        wait_all([consumer, producer], lambda: delivery.settled, what="the outcome")
        assert delivery.remote_state == Delivery.ACCEPTED
    finally:
        consumer.close()
        producer.close()


def test_a_tenants_link_route_reaches_the_container_prefixed(start_router: StartRouter
                                                             ) -> None:
    port = free_port()
    container = TransactionalPeer(f"127.0.0.1:{port}", listen=True)
    container.start()
    routes = "".join(f"linkRoute {{\n    prefix: shop/lr\n    direction: {d}\n"
                     "    connection: c\n}\n" for d in ("in", "out"))
    try:
        hop = start_router(router_conf(TENANT_LISTENER + broker_connector(port, "c")
                                       + routes + LOG_INFO), listeners=2)
        hop.wait_log(r"Link Route Activated")
        shop = tenant(hop, "shop")
        try:
            sender = shop.create_sender("lr.q")
            assert sender.link.remote_target.address == "lr.q"
            delivery = send_async(sender, "routed")
            shop.wait(lambda: delivery.settled, timeout=10, msg="the container's outcome")
            assert [(address, body) for address, body, _ in container.received] == \
                [("shop/lr.q", "routed")]
            dynamic = shop.create_receiver(None, dynamic=True, options=DynamicNodeProperties(
                {"x-opt-qd.address": "lr.dyn"}))
            assert dynamic.link.remote_source.address == "dynamic.1"
            assert container.dynamic_nodes == 1
        finally:
            shop.close()
    finally:
        container.stop()
