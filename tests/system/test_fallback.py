"""Fallback destinations against a real RabbitMQ (docs/routing.md#fallback,
docs/brokers.md#fallback-to-a-broker).

An address with ``enableFallback`` delivers to its consumers when it has
some, and to its fallback destination (here a broker queue, through a
fallback ``out`` auto-link) only when it has none; the fallback ``in``
auto-link brings the queue back to consumers when they come, and asks the
broker for messages only while a consumer can take them, so messages do
not bounce between router and broker (qdrouterd's fallback does, against
RabbitMQ).
"""

from __future__ import annotations

from proton import Delivery
from proton.utils import BlockingReceiver

from tests.system.brokered import LOG_INFO, broker_connector, wait_autolinks
from tests.system.clients import connect, pump, receive_all, send_async, wait_all
from tests.system.conftest import StartRouter
from tests.system.harness import router_conf
from tests.system.rabbitmq import RabbitMQ


def fallback_conf(address: str) -> str:
    links = "".join(
        f"autoLink {{\n    address: {address}\n    direction: {d}\n    connection: broker\n"
        f"    fallback: yes\n}}\n" for d in ("out", "in"))
    return f"address {{\n    prefix: {address}\n    enableFallback: yes\n}}\n{links}"


def test_fallback_takes_messages_only_while_no_consumer_and_gives_them_back(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + fallback_conf("fb.q")
                                   + LOG_INFO))
    wait_autolinks(hop, "fb.q")
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("fb.q")

        def send(prefix: str, count: int, receiver: BlockingReceiver | None = None) -> None:
            deliveries = [send_async(sender, f"{prefix}{i}") for i in range(count)]
            if receiver is not None:
                assert [m.body for m in receive_all(receiver, count)] == \
                    [f"{prefix}{i}" for i in range(count)]
            conn.wait(lambda: all(d.settled for d in deliveries), msg="settled")
            assert [d.remote_state for d in deliveries] == [Delivery.ACCEPTED] * count

        def broker_has(counts: tuple[int, int], what: str) -> None:
            wait_all([conn], lambda: rabbitmq.queue_counts("fb.q") == counts, 20, what)

        send("a", 5)  # no consumer: to the broker
        broker_has((5, 0), "five on the fallback queue")

        receiver = conn.create_receiver("fb.q", credit=10)
        assert sorted(m.body for m in receive_all(receiver, 5)) == [f"a{i}" for i in range(5)]
        broker_has((0, 0), "the queue given back to the consumer")

        send("b", 5, receiver)  # a consumer: straight to it
        assert rabbitmq.queue_counts("fb.q") == (0, 0)

        receiver.close()
        send("c", 5)  # the consumer left: to the broker again, and they stay there
        broker_has((5, 0), "five waiting again")
        for _ in range(4):
            pump(conn, 0.5)
            assert rabbitmq.queue_counts("fb.q") == (5, 0), \
                "messages must wait on the broker, not bounce to the router and back"
    finally:
        conn.close()
    assert "Auto Link Activation Failed" not in hop.log_text()
