"""The forwarder with its parts, on its own (router.adapter.forwarding):
a routing core's records and real proton links joined in memory, no loop,
no socket, no dispatcher; what the dispatcher would hand it is handed to it
here (``incoming``, ``disposition``, ``flow``).

Anycast, balanced and multicast forwarding, credit topped up once a
message is routed (docs/routing.md#credit), what a producer is told when
nothing can receive (docs/routing.md#when-nothing-can-receive), a message
above the size limit, and re-forwarding a released delivery
(docs/routing.md#re-forwarding-released-deliveries) through the real
Redelivery part."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from proton import Delivery, Link

from addressing import AddressSpec, AddressTable, Distribution
from router.adapter.forwarding.accel import SETTLED
from router.adapter.forwarding.forwarder import Forwarder
from router.adapter.pending import Pending
from router.core import InLink, OutLink, Router
from tests.unit.adapter.wire import Wire


def router(*specs: AddressSpec) -> Router:
    table = AddressTable()
    for spec in specs:
        table.add(spec)
    return Router(router_id="R", addresses=table, token=lambda: "t")


def forwarder(core: Router) -> tuple[Pending, Forwarder]:
    pending = Pending()
    return pending, Forwarder(core, "R", pending, lambda: 0.0)


@dataclass
class OneOfEach:
    """A forwarder over a core, one consumer and one producer on one wire."""

    wire: Wire
    pending: Pending
    fwd: Forwarder
    receiver: Link
    ol: OutLink
    sender: Link
    il: InLink


def one_of_each(producer_credit: int = 10) -> OneOfEach:
    core = router()
    wire = Wire()
    pending, fwd = forwarder(core)
    receiver, ol = wire.consumer(core=core)
    sender, il = wire.producer(core=core, credit=producer_credit)
    return OneOfEach(wire, pending, fwd, receiver, ol, sender, il)


def deliver(wire: Wire, fwd: Forwarder, sender: Link, il: InLink, text: str,
            settled: bool = False) -> Delivery:
    """The peer sends ``text``, and the forwarder gets it as the dispatcher
    would hand it (pending bytes, flags)."""
    delivery, incoming = wire.arrive(sender, text, settled)
    fwd.incoming(incoming._impl, il, incoming.pending, SETTLED if incoming.settled else 0)
    wire.pump()
    return delivery


def take(wire: Wire, receiver: Link) -> list[tuple[Delivery, object]]:
    """Everything the peer's ``receiver`` has now."""
    wire.pump()
    got = []
    while receiver.current is not None:
        got.append(wire.received(receiver))
    return got


def decide(wire: Wire, fwd: Forwarder, ol: OutLink, delivery: Delivery, state: int) -> None:
    """The consumer settles ``delivery`` with ``state``, and the forwarder
    hears it as the dispatcher would hand it."""
    delivery.update(state)
    delivery.settle()
    wire.pump()
    od: Any = None
    for handle in list(ol.unsettled):
        if Delivery.wrap(handle).remote_state == state:
            od = handle
    assert od is not None, "the router's copy heard the consumer"
    fwd.disposition(od, ol, 1, state)
    fwd.settle_deferred()
    wire.pump()


def test_a_message_goes_to_the_consumer_and_its_outcome_back() -> None:
    t = one_of_each()
    produced = deliver(t.wire, t.fwd, t.sender, t.il, "hello")
    [(got, text)] = take(t.wire, t.receiver)
    assert text == "hello" and not got.settled
    assert t.il not in t.pending.credit, "an unsettled message holds its credit"
    decide(t.wire, t.fwd, t.ol, got, Delivery.ACCEPTED)
    assert produced.remote_state == Delivery.ACCEPTED and produced.settled
    assert t.il in t.pending.credit, "settled, its credit is looked at once the wake-up ends"
    assert not t.il.unsettled and not t.ol.unsettled


def test_credit_is_topped_up_to_the_window() -> None:
    t = one_of_each(producer_credit=0)
    t.pending.credit.add(t.il)
    t.fwd.flush_credit()
    t.wire.pump()
    assert t.sender.credit == t.il.window, "the window's worth of credit"
    deliver(t.wire, t.fwd, t.sender, t.il, "m", settled=True)
    t.fwd.flush_credit()
    t.wire.pump()
    assert t.sender.credit == t.il.window, "a pre-settled message gives its credit back"
    assert [text for _, text in take(t.wire, t.receiver)] == ["m"]


def test_balanced_spreads_by_what_each_consumer_has_outstanding() -> None:
    core = router()
    wire = Wire()
    _, fwd = forwarder(core)
    first, _ = wire.consumer(core=core)
    second, _ = wire.consumer(core=core)
    sender, il = wire.producer(core=core)
    for i in range(4):
        deliver(wire, fwd, sender, il, f"m{i}")
    assert len(take(wire, first)) == 2 and len(take(wire, second)) == 2


def test_multicast_sends_one_copy_each_and_settles_once_every_copy_is_accepted() -> None:
    core = router(AddressSpec(prefix="mc", distribution=Distribution.MULTICAST))
    wire = Wire()
    _, fwd = forwarder(core)
    consumers = [wire.consumer(address="mc.x", core=core) for _ in range(3)]
    sender, il = wire.producer(address="mc.x", core=core)
    produced = deliver(wire, fwd, sender, il, "to all")
    copies = [(ol, take(wire, receiver)) for receiver, ol in consumers]
    assert all([text for _, text in got] == ["to all"] for _, got in copies)
    for ol, [(delivery, _)] in copies[:2]:
        decide(wire, fwd, ol, delivery, Delivery.ACCEPTED)
    assert not produced.settled, "one copy is still out"
    ol, [(delivery, _)] = copies[2]
    decide(wire, fwd, ol, delivery, Delivery.ACCEPTED)
    assert produced.remote_state == Delivery.ACCEPTED and produced.settled


def test_nothing_to_receive_releases_an_unsettled_message() -> None:
    core = router()
    wire = Wire()
    _, fwd = forwarder(core)
    sender, il = wire.producer(core=core)
    assert il.blocked, "no consumer: the sender is blocked"
    produced = deliver(wire, fwd, sender, il, "nobody")
    assert produced.remote_state == Delivery.RELEASED and produced.settled


def test_a_message_above_the_size_limit_is_rejected_and_the_link_marked() -> None:
    core = router()
    wire = Wire()
    pending, fwd = forwarder(core)
    wire.consumer(core=core)
    sender, il = wire.producer(core=core)
    il.max_size = 8
    produced = deliver(wire, fwd, sender, il, "far more than eight bytes")
    assert produced.remote_state == Delivery.REJECTED
    assert produced.remote.condition.name == "amqp:link:message-size-exceeded"
    assert pending.oversized == [il], "the link and its connection are closed next"


def test_a_released_message_goes_to_the_next_consumer_before_its_producer_hears() -> None:
    core = router(AddressSpec(prefix="retry", distribution=Distribution.BALANCED,
                              redelivery_limit=2))
    wire = Wire()
    _, fwd = forwarder(core)
    first, first_ol = wire.consumer(address="retry.q", core=core)
    second, second_ol = wire.consumer(address="retry.q", core=core)
    sender, il = wire.producer(address="retry.q", core=core)
    produced = deliver(wire, fwd, sender, il, "again")
    got = take(wire, first) or take(wire, second)
    [(delivery, text)] = got
    assert text == "again"
    ol_first = first_ol if delivery.link.name == first_ol.name else second_ol
    other = second if ol_first is first_ol else first
    decide(wire, fwd, ol_first, delivery, Delivery.RELEASED)
    assert not produced.settled, "the producer has heard nothing yet"
    [(again, text)] = take(wire, other)
    assert text == "again" and fwd.counters.redelivered == 1
    decide(wire, fwd, second_ol if ol_first is first_ol else first_ol, again, Delivery.ACCEPTED)
    assert produced.remote_state == Delivery.ACCEPTED and produced.settled
