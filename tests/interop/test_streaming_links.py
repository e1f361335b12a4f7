"""Streaming links across kinds (docs/routing.md#large-messages): while a
large message streams from one router to the next, a small message to the
same next hop overtakes it, whichever kind sends and whichever receives,
between interiors and across edges."""

from __future__ import annotations

import time

import pytest
from proton import Delivery, Message

from tests.interop.mixed import MakeNetwork, MixedNetwork
from tests.interop.test_edges import two_edges
from tests.interop.test_interop import HOP, QDR, pair
from tests.system.clients import connect
from tests.system.stream_consumer import StreamConsumer, run_until
from tests.system.test_streaming import MB, begin, big, finish, pump_of


def overtaken(net: MixedNetwork, near: str, far: str) -> None:
    """A large message streams from an anonymous sender on ``near`` to a
    consumer on ``far``; a small one the same sender sends meanwhile (on the
    link the large one holds to the next router, but for streaming links)
    arrives first, then the large one completes."""
    streamed = StreamConsumer(net[far].ports[0], "hol.big")
    small = StreamConsumer(net[far].ports[0], "hol.small")
    producer = connect(net.url(near))
    pumps = [streamed.pump, small.pump, pump_of(producer)]
    try:
        # Two anonymous senders: the router puts the messages of both on the
        # link to the next router (a client's own link carries one at a time).
        anonymous, second = producer.create_sender(None), producer.create_sender(None)
        spread = time.monotonic() + 1.5  # the consumers become known at ``near``
        run_until(lambda: time.monotonic() > spread and anonymous.link.credit > 0
                  and second.link.credit > 0, pumps, what="credit")
        message = big(2 * MB, seed=3, address="hol.big")
        delivery = begin(anonymous, b"big", message[:MB])
        run_until(lambda: len(streamed.arriving) >= MB // 2, pumps,
                  what=f"the large message streaming from {near} to {far}")
        overtaking = second.link.send(Message(address="hol.small", body="overtakes"))
        run_until(lambda: overtaking.settled, pumps,
                  what="the small message's outcome while the large one streams")
        assert overtaking.remote_state == Delivery.ACCEPTED
        assert not streamed.complete
        finish(anonymous, message[MB:])
        run_until(lambda: delivery.settled, pumps, what="the large message's outcome")
        assert delivery.remote_state == Delivery.ACCEPTED
        assert streamed.complete == [message]
    finally:
        producer.close()
        streamed.close()
        small.close()


@pytest.mark.parametrize("sending", [HOP, QDR])
def test_a_small_message_overtakes_a_streaming_one_between_interiors(
        mixed: MakeNetwork, sending: str) -> None:
    net = pair(mixed, "hopd")
    overtaken(net, sending, QDR if sending == HOP else HOP)


@pytest.mark.parametrize(("interior", "edge"), [("qdrouterd", "hopd"), ("hopd", "qdrouterd")],
                         ids=["hopd-edges-under-qdrouterd", "qdrouterd-edges-under-hopd"])
def test_a_small_message_overtakes_a_streaming_one_across_edges(
        mixed: MakeNetwork, interior: str, edge: str) -> None:
    overtaken(two_edges(mixed, interior, edge, edge), "E1", "E2")
