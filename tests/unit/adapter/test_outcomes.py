"""The settlement parts of the per-message path on their own
(router.adapter.forwarding.outcomes and .dispositions), on real proton
deliveries joined in memory, with a stand-in for re-forwarding.

What a producer is told, and when: the router's own outcomes, a consumer's
outcome carried back with its details, multicast copies folded, a held
message given back and forwarded again before the producer hears anything,
and the copies of a consumer that goes away
(docs/routing.md#settlement-and-dispositions)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proton import Condition, Delivery, Link

from router.adapter.forwarding.dispositions import Dispositions
from router.adapter.forwarding.outcomes import LOST_UNDELIVERED, LOST_UNSETTLED, Outcomes
from router.adapter.pending import Counters, Pending
from router.core import InLink, OutLink, Stream, Transfer
from router.core.settlement import ACCEPTED, MODIFIED, REJECTED, RELEASED
from tests.unit.adapter.wire import Wire, encoded, record


class FakeRedelivery:
    """Stands in for ``router.adapter.forwarding.redelivery.Redelivery``:
    says whether the message went elsewhere, and records what it was asked."""

    def __init__(self, forwards: bool) -> None:
        self.forwards = forwards
        self.asked: list[tuple[Transfer, OutLink, int]] = []

    def again(self, ref: Transfer, ol: OutLink, state: int, disposition: Any) -> bool:
        self.asked.append((ref, ol, state))
        return self.forwards


def parts(forwards: bool = False) -> tuple[Pending, Outcomes, Dispositions, FakeRedelivery]:
    pending = Pending()
    outcomes = Outcomes(pending, Counters())
    redelivery = FakeRedelivery(forwards)
    dispositions = Dispositions(outcomes, redelivery, pending)
    return pending, outcomes, dispositions, redelivery


@dataclass
class Routed:
    """A message from the peer's producer routed as one copy to the peer's
    consumer, as the forwarder and the sender leave it."""

    produced: Delivery  # the peer's delivery
    d: Any  # the router's incoming delivery
    il: InLink
    ref: Transfer
    receiver: Link  # the peer's consumer
    ol: OutLink
    od: Any  # the router's outgoing delivery


def routed(wire: Wire, outcomes: Outcomes, redelivery_limit: int = 0) -> Routed:
    rec = record(redelivery_limit=redelivery_limit)
    sender, il = wire.producer(record=rec)
    receiver, ol = wire.consumer(record=rec)
    produced, d = wire.send(sender, "m")
    ref = outcomes.transfer(d, il, encoded("m"), rec, None, None, None)
    assert ref is not None
    out = Link.wrap(ol.handle)
    copy = out.delivery(b"c1")
    out.send(encoded("m"))
    out.advance()
    ref.out_delivery, ref.out_link = copy._impl, ol
    ol.unsettled[copy._impl] = ref
    return Routed(produced, d, il, ref, receiver, ol, copy._impl)


def consumer_settles(wire: Wire, r: Routed, outcomes: Outcomes, dispositions: Dispositions,
                     got: Delivery, state: int) -> None:
    """The peer's consumer settles ``got`` with ``state``; the dispatcher
    would hand its disposition over, and settle its delivery in one go."""
    got.update(state)
    got.settle()
    wire.pump()
    dispositions.outgoing(r.od, r.ol, 1, state)
    outcomes.settle_deferred()
    wire.pump()


def test_the_router_s_own_outcome_settles_the_producer_with_its_error() -> None:
    wire = Wire()
    pending, outcomes, _, _ = parts()
    sender, il = wire.producer()
    produced, d = wire.send(sender, "m")
    outcomes.finish(d, il, REJECTED, "amqp:not-found", "no such node")
    wire.pump()
    assert produced.remote_state == Delivery.REJECTED and produced.settled
    assert produced.remote.condition.name == "amqp:not-found"
    assert produced.remote.condition.description == "no such node"
    assert il in pending.credit and wire in pending.output
    assert il.outcomes[1] == 1, "counted as rejected"


def test_a_presettled_message_with_no_destination_is_dropped_and_counted() -> None:
    wire = Wire()
    pending, outcomes, _, _ = parts()
    _, il = wire.producer()
    outcomes.no_destination(None, il)
    assert il.dropped_presettled == 1 and outcomes.counters.dropped_presettled == 1
    assert il in pending.credit


def test_a_transfer_holds_the_message_only_where_the_address_redelivers_and_it_is_whole(
        ) -> None:
    wire = Wire()
    pending, outcomes, _, _ = parts()
    sender, il = wire.producer()
    _, d = wire.send(sender, "m")
    plain = outcomes.transfer(d, il, b"x", record(), None, None, None)
    assert plain is not None and plain.held is None and il.unsettled[d] is plain
    held = outcomes.transfer(d, il, b"x", record(redelivery_limit=2), None, None, None)
    assert held is not None and held.held is not None and held.held.data == b"x"
    streaming = outcomes.transfer(d, il, b"x", record(redelivery_limit=2), None, None,
                                  Stream(d, il, 1))
    assert streaming is not None and streaming.held is None
    assert outcomes.transfer(None, il, b"x", record(), None, None, None) is None
    assert il in pending.credit, "a pre-settled message's credit comes back at once"


def test_a_consumer_s_outcome_goes_back_to_the_producer_and_both_are_settled() -> None:
    wire = Wire()
    pending, outcomes, dispositions, _ = parts()
    r = routed(wire, outcomes)
    got, _ = wire.received(r.receiver)
    got.update(Delivery.ACCEPTED)
    got.settle()
    wire.pump()
    dispositions.outgoing(r.od, r.ol, 1, ACCEPTED)
    assert pending.settle_later == [r.od], "the consumer's delivery is settled in one go later"
    outcomes.settle_deferred()
    wire.pump()
    assert r.produced.remote_state == Delivery.ACCEPTED and r.produced.settled
    assert not r.ol.unsettled and r.ol.outcomes[0] == 1 and r.d not in r.il.unsettled


def test_a_rejection_carries_its_condition_back() -> None:
    wire = Wire()
    _, outcomes, dispositions, _ = parts()
    r = routed(wire, outcomes)
    got, _ = wire.received(r.receiver)
    got.local.condition = Condition("app:bad", "not today")
    consumer_settles(wire, r, outcomes, dispositions, got, REJECTED)
    assert r.produced.remote_state == Delivery.REJECTED
    assert r.produced.remote.condition.name == "app:bad"
    assert r.produced.remote.condition.description == "not today"


def test_a_held_message_given_back_goes_elsewhere_before_the_producer_hears() -> None:
    wire = Wire()
    pending, outcomes, dispositions, redelivery = parts(forwards=True)
    r = routed(wire, outcomes, redelivery_limit=3)
    wire.received(r.receiver)[0].update(Delivery.RELEASED)
    wire.pump()
    dispositions.outgoing(r.od, r.ol, 1, RELEASED)
    assert redelivery.asked == [(r.ref, r.ol, RELEASED)]
    assert r.od in pending.settle_later and r.od not in r.ol.unsettled
    outcomes.settle_deferred()
    wire.pump()
    assert not r.produced.remote_state and not r.produced.settled, \
        "the producer waits for the next consumer"
    assert r.il.unsettled[r.d] is r.ref


def test_a_held_message_nobody_else_takes_is_released_to_its_producer() -> None:
    wire = Wire()
    _, outcomes, dispositions, redelivery = parts(forwards=False)
    r = routed(wire, outcomes, redelivery_limit=3)
    got, _ = wire.received(r.receiver)
    consumer_settles(wire, r, outcomes, dispositions, got, RELEASED)
    assert len(redelivery.asked) == 1
    assert r.produced.remote_state == Delivery.RELEASED and r.produced.settled


def test_multicast_copies_fold_into_one_outcome_once_every_copy_settled() -> None:
    wire = Wire()
    _, outcomes, _, _ = parts()
    sender, il = wire.producer()
    produced, d = wire.send(sender, "m")
    fanout = outcomes.fanout(d, il, 2)
    assert fanout is not None and il.unsettled[d] is fanout
    outcomes.copy_done(fanout, RELEASED)
    wire.pump()
    assert not produced.settled, "one copy is still out"
    outcomes.copy_done(fanout, ACCEPTED)
    wire.pump()
    assert produced.remote_state == Delivery.ACCEPTED and produced.settled
    assert d not in il.unsettled


def test_a_consumer_that_goes_away_releases_what_was_queued_and_modifies_what_was_sent(
        ) -> None:
    wire = Wire()
    _, outcomes, dispositions, _ = parts()
    sent = routed(wire, outcomes)
    ol = sent.ol
    assert ol.record is not None
    sender, il = wire.producer(record=ol.record)
    produced_queued, d = wire.send(sender, "queued")
    queued = outcomes.transfer(d, il, encoded("queued"), ol.record, None, None, None)
    ol.queue.append((encoded("queued"), queued))
    dispositions.lose_outgoing(ol)
    wire.pump()
    assert (LOST_UNDELIVERED, LOST_UNSETTLED) == (RELEASED, MODIFIED)
    assert produced_queued.remote_state == Delivery.RELEASED
    assert sent.produced.remote_state == Delivery.MODIFIED
    assert sent.produced.remote.failed, "it may have been delivered"
    assert not ol.queue and not ol.unsettled


def test_a_producer_that_settles_first_settles_its_copy_with_its_state() -> None:
    wire = Wire()
    _, outcomes, _, _ = parts()
    r = routed(wire, outcomes)
    got, _ = wire.received(r.receiver)
    r.produced.update(Delivery.ACCEPTED)
    r.produced.settle()
    wire.pump()
    outcomes.producer_settled(r.d, r.il)
    wire.pump()
    assert got.settled and got.remote_state == Delivery.ACCEPTED
    assert not r.il.unsettled and not r.ol.unsettled
