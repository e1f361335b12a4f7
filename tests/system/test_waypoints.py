"""Waypoint addresses and auto-links against a real RabbitMQ (reference 4.2, 8).

A waypoint address sends what producers give it to a broker queue through an
``out`` auto-link and brings the queue's messages back to its consumers
through an ``in`` auto-link: messages wait on the broker while nobody
consumes them.
"""

from __future__ import annotations

from proton import Delivery

from tests.system.brokered import LOG_INFO, broker_connector, wait_autolinks, waypoint
from tests.system.clients import connect, receive_all, send_async, wait_credit
from tests.system.conftest import StartRouter
from tests.system.harness import router_conf, wait_for
from tests.system.rabbitmq import RabbitMQ


def test_messages_wait_on_the_broker_until_a_consumer_comes(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + waypoint("wp.store")
                                   + LOG_INFO))
    wait_autolinks(hop, "wp.store")
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("wp.store")
        deliveries = [send_async(sender, f"m{i}") for i in range(5)]
        conn.wait(lambda: all(d.settled for d in deliveries), msg="broker settles")
        assert [d.remote_state for d in deliveries] == [Delivery.ACCEPTED] * 5
        wait_for(lambda: rabbitmq.queue_depth("wp.store") == 5, 20,
                 "five messages on the broker's queue")
        receiver = conn.create_receiver("wp.store")
        messages = receive_all(receiver, 5)
        assert [m.body for m in messages] == [f"m{i}" for i in range(5)]
        wait_for(lambda: rabbitmq.queue_depth("wp.store") == 0, 20, "the queue emptied")
    finally:
        conn.close()
