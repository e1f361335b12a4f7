"""Anonymous senders are routed by each message's ``to``; dynamic receivers
get a router-assigned address others can send to (docs/routing.md#anonymous-senders,
docs/routing.md#dynamic-addresses)."""

from __future__ import annotations

from proton import Delivery, Message

from tests.system.clients import connect, wait_credit, wait_settled
from tests.system.harness import Hop, router_conf


def test_anonymous_sender_routes_by_to(hop: Hop) -> None:
    conn = connect(hop.url)
    apples = conn.create_receiver("fruit.apples", credit=10)
    pears = conn.create_receiver("fruit.pears", credit=10)
    sender = conn.create_sender(None)
    wait_credit(conn, sender, 250)
    a = sender.link.send(Message(address="fruit.apples", body="a"))
    p = sender.link.send(Message(address="fruit.pears", body="p"))
    assert apples.receive(timeout=10).body == "a"
    apples.accept()
    assert pears.receive(timeout=10).body == "p"
    pears.accept()
    assert wait_settled(conn, a) == Delivery.ACCEPTED
    assert wait_settled(conn, p) == Delivery.ACCEPTED
    conn.close()


def test_anonymous_message_without_consumer_is_released(hop: Hop) -> None:
    conn = connect(hop.url)
    sender = conn.create_sender(None)
    wait_credit(conn, sender, 250)
    delivery = sender.link.send(Message(address="nobody.home", body="x"))
    assert wait_settled(conn, delivery) == Delivery.RELEASED
    wait_credit(conn, sender, 250)
    conn.close()


def test_anonymous_message_without_to_is_rejected(hop: Hop) -> None:
    conn = connect(hop.url)
    sender = conn.create_sender(None)
    wait_credit(conn, sender, 250)
    delivery = sender.link.send(Message(body="no address"))
    assert wait_settled(conn, delivery) == Delivery.REJECTED
    assert delivery.remote.condition is not None
    assert delivery.remote.condition.name == "amqp:precondition-failed"
    conn.close()


def test_anonymous_message_to_unavailable_address_is_rejected(start_router: object) -> None:
    hop: Hop = start_router(router_conf(  # type: ignore[operator]
        "address {\n    prefix: closed\n    distribution: unavailable\n}\n"))
    conn = connect(hop.url)
    sender = conn.create_sender(None)
    wait_credit(conn, sender, 250)
    delivery = sender.link.send(Message(address="closed.shop", body="x"))
    assert wait_settled(conn, delivery) == Delivery.REJECTED
    assert delivery.remote.condition is not None
    assert delivery.remote.condition.name == "amqp:not-found"
    conn.close()


def test_dynamic_receivers_get_unique_addresses_for_request_reply(hop: Hop) -> None:
    client = connect(hop.url)
    service = client  # one connection carries both ends; the router does not care
    replies = client.create_receiver(None, dynamic=True, credit=10)
    other = client.create_receiver(None, dynamic=True, credit=10, name="other")
    reply_to = replies.link.remote_source.address
    assert reply_to.startswith("amqp:/_topo/0/HopTest/temp.")
    assert reply_to != other.link.remote_source.address
    requests = service.create_receiver("service.echo", credit=10)
    service_out = service.create_sender(None)
    client_out = client.create_sender("service.echo")
    wait_credit(client, client_out, 250)
    client_out.link.send(Message(body="ping", reply_to=reply_to, correlation_id=42))
    request = requests.receive(timeout=10)
    requests.accept()
    wait_credit(service, service_out, 250)
    answer = service_out.link.send(Message(address=request.reply_to, body="pong",
                                           correlation_id=request.correlation_id))
    reply = replies.receive(timeout=10)
    replies.accept()
    assert (reply.body, reply.correlation_id) == ("pong", 42)
    assert wait_settled(service, answer) == Delivery.ACCEPTED
    client.close()


def test_unavailable_address_refuses_attach(start_router: object) -> None:
    hop: Hop = start_router(router_conf(  # type: ignore[operator]
        "address {\n    prefix: closed\n    distribution: unavailable\n}\n"))
    conn = connect(hop.url)
    try:
        conn.create_receiver("closed.q", credit=1)
    except Exception as exc:  # proton raises LinkDetached or LinkException
        assert "amqp:not-found" in str(exc) or "closed" in str(exc)
    else:
        raise AssertionError("attach to an unavailable address was accepted")
    conn.close()


def test_coordinator_attach_refused_without_link_route(hop: Hop) -> None:
    from proton import Terminus
    from proton.reactor import LinkOption

    class Coordinator(LinkOption):  # type: ignore[misc]
        def apply(self, link: object) -> None:
            link.target.type = Terminus.COORDINATOR  # type: ignore[attr-defined]

    conn = connect(hop.url)
    try:
        conn.create_sender(None, options=Coordinator())
    except Exception as exc:
        assert "amqp:precondition-failed" in str(exc) or "coordinat" in str(exc)
    else:
        raise AssertionError("coordinator attach was accepted")
    conn.close()
