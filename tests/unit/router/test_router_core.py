"""The routing core's attach decisions and credit transitions
(docs/routing.md#attaching-links, docs/routing.md#credit)."""

from __future__ import annotations

import itertools

import pytest

from addressing import AddressSpec, AddressTable, Distribution
from router.core import (
    UNAVAILABLE,
    AddressRecord,
    AttachRefused,
    BlockSender,
    Connection,
    ConnectionId,
    IncomingAccepted,
    OutgoingAccepted,
    Router,
    UnblockSender,
    waypoint_ordinal,
)


def make_router(*specs: AddressSpec,
                default: Distribution = Distribution.BALANCED) -> Router:
    table = AddressTable()
    for spec in specs:
        table.add(spec)
    counter = itertools.count()
    return Router(router_id="R1", addresses=table, default_distribution=default,
                  token=lambda: f"tok{next(counter)}")


def conn(n: int = 1, capacity: int = 250) -> Connection:
    return Connection(ConnectionId(n), link_capacity=capacity)


def rec(accepted: OutgoingAccepted) -> AddressRecord:
    record = accepted.link.record
    assert record is not None
    return record


def attach_sender(router: Router, c: Connection, address: str | None, **kw: object
                  ) -> IncomingAccepted:
    result = router.incoming_link_attached(c, name="s", address=address, **kw)[0]  # type: ignore[arg-type]
    assert isinstance(result, IncomingAccepted)
    return result


def attach_receiver(router: Router, c: Connection, address: str | None, **kw: object
                    ) -> tuple[OutgoingAccepted, list[object]]:
    result, effects = router.outgoing_link_attached(c, name="r", address=address, **kw)  # type: ignore[arg-type]
    assert isinstance(result, OutgoingAccepted)
    return result, list(effects)


def test_sender_without_consumer_is_blocked_then_unblocked_by_first_consumer() -> None:
    router = make_router()
    sender = attach_sender(router, conn(), "orders").link
    assert sender.blocked
    _, effects = attach_receiver(router, conn(2), "orders")
    assert effects == [UnblockSender(link=sender)]
    assert not sender.blocked
    _, effects = attach_receiver(router, conn(3), "orders")
    assert effects == [], "a second consumer changes nothing for credit"


def test_last_consumer_leaving_blocks_senders() -> None:
    router = make_router()
    sender = attach_sender(router, conn(), "orders").link
    first, _ = attach_receiver(router, conn(2), "orders")
    second, _ = attach_receiver(router, conn(3), "orders")
    assert router.link_detached(first.link) == []
    assert router.link_detached(second.link) == [BlockSender(link=sender)]
    assert sender.blocked


def test_anonymous_sender_is_never_blocked() -> None:
    router = make_router()
    sender = attach_sender(router, conn(), None).link
    assert sender.anonymous and not sender.blocked


def test_records_are_freed_when_unused() -> None:
    router = make_router()
    receiver, _ = attach_receiver(router, conn(), "temp.q")
    assert "M0temp.q" in router.records
    router.link_detached(receiver.link)
    assert router.records == {}


def test_a_freed_dynamic_address_leaves_nothing_in_the_lookup_caches() -> None:
    """A requester's reply address each session: the lookups of messages sent
    to it are cached while it lives and forgotten with its record, so a
    thousand sessions leave the caches as they were (docs/reliability.md#what-grows)."""
    router = make_router()
    sender = attach_sender(router, conn(9), "orders").link
    attach_receiver(router, conn(8), "orders")
    router.lookup("orders")
    before = router.addresses.cached
    for n in range(1000):
        reply, _ = attach_receiver(router, conn(n + 10), None, dynamic=True)
        assert router.lookup(reply.address or "") is reply.link.record
        assert router.addresses.cached > before
        router.link_detached(reply.link)
    assert router.addresses.cached == before
    assert router.lookup("orders") is not None and not sender.blocked


def test_a_freed_waypoint_record_forgets_its_phased_lookup() -> None:
    router = make_router(AddressSpec(prefix="queue", waypoint=True))
    receiver, _ = attach_receiver(router, conn(), "queue.a")
    record = rec(receiver)
    phase = int(record.key[1])
    assert phase != 0
    assert router.lookup("queue.a", phase) is record
    router.link_detached(receiver.link)
    assert router.addresses.cached == 0


def test_treatment_comes_from_best_matching_address_config() -> None:
    router = make_router(AddressSpec(prefix="mc", distribution=Distribution.MULTICAST),
                         AddressSpec(pattern="mc.*.closest", distribution=Distribution.CLOSEST))
    multicast, _ = attach_receiver(router, conn(), "mc.news")
    closest, _ = attach_receiver(router, conn(), "mc.x.closest")
    other, _ = attach_receiver(router, conn(), "plain")
    assert rec(multicast).distribution is Distribution.MULTICAST
    assert rec(closest).distribution is Distribution.CLOSEST
    assert rec(other).distribution is Distribution.BALANCED


def test_default_distribution_applies_to_unmatched_addresses() -> None:
    router = make_router(default=Distribution.MULTICAST)
    receiver, _ = attach_receiver(router, conn(), "anything")
    assert rec(receiver).distribution is Distribution.MULTICAST


def test_unavailable_address_refuses_both_directions() -> None:
    router = make_router(AddressSpec(prefix="no", distribution=Distribution.UNAVAILABLE))
    refused = router.incoming_link_attached(conn(), name="s", address="no.way")[0]
    assert isinstance(refused, AttachRefused) and refused.condition == "amqp:not-found"
    refused_out, _ = router.outgoing_link_attached(conn(), name="r", address="no.way")
    assert isinstance(refused_out, AttachRefused) and refused_out.condition == "amqp:not-found"
    assert router.lookup("no.way") is UNAVAILABLE


def test_an_address_in_use_keeps_its_treatment_when_the_default_is_unavailable() -> None:
    router = make_router(default=Distribution.UNAVAILABLE)
    agent = router.in_process_attached(conn(), "$management", name="agent")
    sender = router.incoming_link_attached(conn(), name="s", address="$management")[0]
    assert isinstance(sender, IncomingAccepted) and sender.link.record is agent.record
    refused = router.incoming_link_attached(conn(), name="t", address="elsewhere")[0]
    assert isinstance(refused, AttachRefused) and refused.condition == "amqp:not-found"


def test_waypoint_phases_bind_senders_and_receivers_to_different_keys() -> None:
    router = make_router(AddressSpec(prefix="queue", waypoint=True))
    sender = attach_sender(router, conn(), "queue.a").link
    receiver, _ = attach_receiver(router, conn(), "queue.a")
    assert sender.record is not None and sender.record.key == "M0queue.a"
    assert rec(receiver).key == "M1queue.a"


def test_waypoint_capability_overrides_phases() -> None:
    router = make_router()
    sender = attach_sender(router, conn(), "q", capabilities=("qd.waypoint.2",)).link
    receiver, _ = attach_receiver(router, conn(), "q", capabilities=("qd.waypoint",))
    assert sender.record is not None and sender.record.key == "M2q"
    assert rec(receiver).key == "M0q"


@pytest.mark.parametrize(("caps", "expected"), [
    ((), None), (("qd.waypoint",), 1), (("x", "qd.waypoint.9"), 9), (("qd.waypoint.10",), None),
    # A digit to str.isdigit that int() refuses: no ordinal, no failure.
    (("qd.waypoint.²",), None),
])
def test_waypoint_ordinal(caps: tuple[str, ...], expected: int | None) -> None:
    assert waypoint_ordinal(caps) == expected


def test_dynamic_source_gets_a_unique_topological_address() -> None:
    router = make_router()
    first, _ = attach_receiver(router, conn(), None, dynamic=True)
    second, _ = attach_receiver(router, conn(), None, dynamic=True)
    assert first.address == "amqp:/_topo/0/R1/temp.tok0"
    assert second.address != first.address
    record = router.lookup(first.address or "")
    assert record is first.link.record


def test_dynamic_target_gets_a_mobile_temporary_address() -> None:
    router = make_router()
    sender = attach_sender(router, conn(), None, dynamic=True)
    assert sender.address == "amqp:/_$temp.tok0"
    assert sender.link.record is not None and sender.link.record.key == "M0_$temp.tok0"


def test_receiver_on_router_class_address_is_refused() -> None:
    router = make_router()
    refused, _ = router.outgoing_link_attached(conn(), name="r", address="_topo/0/R2/x")
    assert isinstance(refused, AttachRefused)
    assert refused.condition == "qd:no-route-to-dest"


def test_coordinator_without_link_route_is_refused_with_null_target() -> None:
    refused = make_router().incoming_link_attached(conn(), name="tx", address=None,
                                                   coordinator=True)[0]
    assert isinstance(refused, AttachRefused)
    assert refused.condition == "amqp:precondition-failed"
    assert refused.null_terminus


def test_lookup_for_anonymous_messages() -> None:
    router = make_router()
    receiver, _ = attach_receiver(router, conn(), "fruit.apples")
    assert router.lookup("fruit.apples") is receiver.link.record
    assert router.lookup("amqp://host:5672/fruit.apples") is receiver.link.record
    assert router.lookup("fruit.pears") is None
    assert router.lookup("_local/nothing") is None


def test_connection_closed_unbinds_every_link_and_reports_others_blocked() -> None:
    router = make_router()
    producer = conn(1)
    consumer = conn(2)
    sender = attach_sender(router, producer, "q").link
    attach_receiver(router, consumer, "q")
    assert router.connection_closed(consumer) == [BlockSender(link=sender)]
    assert router.connection_closed(producer) == []
    assert router.records == {}
