"""Putting copies on the wire on its own (router.adapter.forwarding.sending),
on real proton links joined in memory, with a stand-in for the streaming
links between routers (its ``StreamingLinks`` port).

A copy goes now when its consumer has credit and nothing waits before it,
else in the link's queue, which a consumer's credit moves on in order and a
full queue sheds pre-settled copies from (docs/routing.md#sending-to-consumers);
a streamed copy for another router goes on a link of its own
(docs/routing.md#large-messages)."""

from __future__ import annotations

from proton import Delivery

from router.adapter.forwarding.outcomes import Outcomes
from router.adapter.forwarding.sending import Sender
from router.adapter.pending import Counters, Pending
from router.core import Connection, InLink, MessageReader, OutLink, Role, Stream, Transfer
from tests.unit.adapter.wire import Wire, body, encoded, record


class FakeTrunks:
    """Stands in for ``router.adapter.endpoints.trunks.Trunks``: every link
    wants a streaming link, and gets ``trunk``; what it is asked is kept."""

    def __init__(self, trunk: OutLink) -> None:
        self.trunk = trunk
        self.taken: list[Connection] = []
        self.released: list[OutLink] = []

    def wanted(self, ol: OutLink) -> bool:
        return ol is not self.trunk

    def take(self, conn: Connection) -> OutLink | None:
        self.taken.append(conn)
        return self.trunk

    def release(self, ol: OutLink) -> None:
        self.released.append(ol)

    def lost(self, ol: OutLink) -> None:
        """Not asked here."""


def sender(trunks: FakeTrunks | None = None) -> tuple[Pending, Sender]:
    pending = Pending()
    counters = Counters()
    return pending, Sender("R", pending, Outcomes(pending, counters), counters,
                           MessageReader(), trunks)


def tracked(wire: Wire, out: Sender) -> tuple[Delivery, InLink, Transfer | None]:
    """A message from the peer's producer, its delivery tracked as the
    forwarder tracks one it sends as a single copy."""
    producer, il = wire.producer()
    produced, d = wire.send(producer, "m")
    return produced, il, out.outcomes.transfer(d, il, encoded("m"), record(), None, None, None)


def test_a_copy_goes_at_once_to_a_consumer_with_credit() -> None:
    wire = Wire()
    pending, out = sender()
    receiver, ol = wire.consumer(credit=5)
    out.send(ol, encoded("now"), None, keys=False)
    got, text = wire.received(receiver)
    assert text == "now"
    assert got.settled, "pre-settled: the router settles its copy"
    assert ol.credit == 4 and ol.delivered == 1 and ol.presettled == 1
    assert wire in pending.output


def test_a_copy_waits_in_order_while_the_consumer_has_no_credit() -> None:
    wire = Wire()
    _, out = sender()
    receiver, ol = wire.consumer(credit=0)
    for text in ("first", "second"):
        out.send(ol, encoded(text), None, keys=False)
    assert [item[0] for item in ol.queue] == [encoded("first"), encoded("second")]
    receiver.flow(2)
    wire.pump()
    out.outgoing_flow(ol)
    wire.pump()
    texts = []
    while receiver.current is not None:
        delivery = receiver.current
        texts.append(body(receiver.recv(delivery.pending)))
        receiver.advance()
    assert texts == ["first", "second"] and not ol.queue


def test_a_full_queue_sheds_its_presettled_copies_but_the_head() -> None:
    wire = Wire()
    _, out = sender()
    _, ol = wire.consumer(credit=0)
    ol.capacity = 3
    for i in range(3):
        out.send(ol, encoded(f"m{i}"), None, keys=False)
    out.send(ol, encoded("m3"), None, keys=False)
    assert [item[0] for item in ol.queue] == [encoded("m0"), encoded("m3")]
    assert ol.dropped_presettled == 2 and out.counters.dropped_presettled == 2


def test_an_unsettled_copy_is_tracked_until_its_consumer_decides() -> None:
    wire = Wire()
    _, out = sender()
    _, _, ref = tracked(wire, out)
    receiver, ol = wire.consumer()
    out.send(ol, encoded("m"), ref, keys=False)
    got, text = wire.received(receiver)
    assert text == "m" and not got.settled
    assert ref is not None and ref.out_link is ol and ol.unsettled[ref.out_delivery] is ref


def test_a_streamed_copy_for_another_router_goes_on_a_link_of_its_own() -> None:
    wire = Wire()
    wire.core.role = Role.INTER_ROUTER
    shared_receiver, shared = wire.consumer(credit=5)
    trunk_receiver, trunk = wire.consumer(credit=5)
    trunks = FakeTrunks(trunk)
    _, out = sender(trunks)
    producer, il = wire.producer()
    _, d = wire.send(producer, "head")
    stream = Stream(d, il, 100)
    out.send(shared, encoded("head"), None, keys=False, stream=stream)
    wire.pump()
    assert trunks.taken == [wire.core]
    assert shared_receiver.current is None, "nothing on the link other messages share"
    partial = trunk_receiver.current
    assert partial is not None and partial.partial, "the copy goes on, frame by frame"
    assert out.busy == {trunk: stream} and trunk in stream.active


def test_a_consumer_s_credit_is_read_again_when_it_flows() -> None:
    wire = Wire()
    _, out = sender()
    receiver, ol = wire.consumer(credit=0)
    assert ol.credit == 0
    receiver.flow(7)
    wire.pump()
    out.outgoing_flow(ol)
    assert ol.credit == 7 and not ol.withheld


def test_settling_the_producer_s_delivery_through_a_transfer() -> None:
    wire = Wire()
    _, out = sender()
    produced, _, ref = tracked(wire, out)
    _, ol = wire.consumer()
    ol.presettle = True  # a consumer that takes pre-settled copies only
    out.send(ol, encoded("m"), ref, keys=False)
    wire.pump()
    assert produced.remote_state == Delivery.ACCEPTED and produced.settled, \
        "a pre-settled copy sent is as good as accepted"
