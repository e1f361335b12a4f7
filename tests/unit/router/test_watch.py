"""Delivery ages and zero credit from the once-a-second sweep (docs/operations.md#counters)."""

from __future__ import annotations

from router.core import Connection, ConnectionId, InLink, LinkId, OutLink, Transfer
from router.core.watch import Watch


def links() -> tuple[InLink, OutLink]:
    conn = Connection(ConnectionId(1))
    incoming = InLink(LinkId(1), conn, name="in", address="q", record=None)
    outgoing = OutLink(LinkId(2), conn, name="out", address="q", record=None)
    return incoming, outgoing


def settle_after(seconds: int, watch: Watch, link: InLink, start: float = 100.0) -> None:
    """A delivery arrives just after the sweep at ``start`` and is settled
    ``seconds`` later, with a sweep every second in between."""
    transfer = Transfer(object(), link)
    watch.sweep([link], start)
    link.unsettled[object()] = transfer
    for tick in range(1, seconds + 1):
        watch.sweep([link], start + tick)
    link.unsettled.clear()
    watch.sweep([link], start + seconds + 1)


def test_a_delivery_settled_within_the_second_is_not_delayed() -> None:
    incoming, _ = links()
    watch = Watch()
    settle_after(0, watch, incoming)
    assert (incoming.delayed1, incoming.delayed10, incoming.stuck) == (0, 0, 0)
    assert incoming.watched == {}


def test_deliveries_settled_late_count_as_delayed_by_their_age() -> None:
    incoming, _ = links()
    watch = Watch()
    settle_after(3, watch, incoming)
    assert (incoming.delayed1, incoming.delayed10) == (1, 0)
    settle_after(12, watch, incoming, start=200.0)
    assert (incoming.delayed1, incoming.delayed10) == (1, 1)


def test_a_stuck_delivery_is_flagged_once() -> None:
    incoming, _ = links()
    watch = Watch(stuck_s=10.0)
    incoming.unsettled[object()] = Transfer(object(), incoming)
    newly = [watch.sweep([incoming], float(t)).stuck for t in range(0, 15)]
    flagged = [found for found in newly if found]
    assert flagged == [[(incoming, 1)]], "reported in one sweep only"
    assert (incoming.stuck, incoming.stuck_now) == (1, 1)


def test_a_stuck_delivery_stops_counting_as_stuck_now_once_settled() -> None:
    incoming, _ = links()
    watch = Watch(stuck_s=3.0)
    key = object()
    incoming.unsettled[key] = Transfer(object(), incoming)
    for t in range(5):
        watch.sweep([incoming], float(t))
    assert incoming.stuck_now == 1
    del incoming.unsettled[key]
    watch.sweep([incoming], 5.0)
    assert (incoming.stuck, incoming.stuck_now) == (1, 0), "found once, stuck no more"


def test_queued_copies_on_an_outgoing_link_age_too() -> None:
    incoming, outgoing = links()
    watch = Watch(stuck_s=2.0)
    transfer = Transfer(object(), incoming)
    outgoing.queue.append((b"m", transfer))
    outgoing.queue.append((b"presettled", None))
    for t in range(4):
        watch.sweep([outgoing], float(t))
    assert outgoing.stuck == 1 and list(outgoing.watched) == [transfer]


def test_an_outgoing_link_without_credit_is_blocked_once_until_credit_returns() -> None:
    _, outgoing = links()
    watch = Watch(blocked_s=10.0)
    blocked = [watch.sweep([outgoing], float(t)).blocked for t in range(0, 13)]
    assert [t for t, found in enumerate(blocked) if found] == [10]
    assert outgoing.starved and Watch.zero_credit_seconds(outgoing, 12.0) == 12
    outgoing.credit = 5
    # Credit counts at once, before the next sweep.
    assert Watch.zero_credit_seconds(outgoing, 12.5) == 0
    assert watch.sweep([outgoing], 13.0).blocked == []
    assert not outgoing.starved and Watch.zero_credit_seconds(outgoing, 13.0) == 0


def blocked_at(watch: Watch, link: InLink | OutLink, seconds: range) -> list[int]:
    return [t for t in seconds if watch.sweep([link], float(t)).blocked]


def test_credit_the_router_spent_blocks_a_consumer_only_while_copies_wait() -> None:
    _, outgoing = links()
    watch = Watch(blocked_s=10.0)
    outgoing.credit = 1
    outgoing.withheld = False  # the consumer gave credit, as a flow does
    watch.sweep([outgoing], 0.0)
    outgoing.credit = 0  # spent on a reply; the consumer has not sent more yet
    assert blocked_at(watch, outgoing, range(1, 30)) == []
    assert Watch.zero_credit_seconds(outgoing, 30.0) == 0
    outgoing.queue.append((b"m", None))  # now a copy waits for credit
    assert blocked_at(watch, outgoing, range(30, 45)) == [40]
    assert outgoing.starved


def test_a_consumer_that_takes_its_credit_back_is_blocked() -> None:
    _, outgoing = links()
    watch = Watch(blocked_s=10.0)
    outgoing.withheld = True  # a flow (or a drain) left it without credit
    assert blocked_at(watch, outgoing, range(0, 15)) == [10]


def test_a_producer_the_router_gives_no_credit_is_blocked_until_it_gets_some() -> None:
    incoming, _ = links()
    watch = Watch(blocked_s=10.0)
    assert blocked_at(watch, incoming, range(0, 13)) == [10]
    assert incoming.starved and Watch.zero_credit_seconds(incoming, 12.0) == 12
    incoming.credit = 250
    assert blocked_at(watch, incoming, range(13, 30)) == []
    assert not incoming.starved and Watch.zero_credit_seconds(incoming, 30.0) == 0


def test_a_connections_last_delivery_is_when_its_links_counts_last_grew() -> None:
    incoming, outgoing = links()
    conn = incoming.conn
    conn.in_links[incoming.link_id] = incoming
    conn.out_links[outgoing.link_id] = outgoing
    assert conn.last_delivery_seconds(10.0) is None, "no delivery yet"
    incoming.delivered += 1
    conn.note_deliveries(11.0)
    assert conn.last_delivery_seconds(14.5) == 3
    del conn.in_links[incoming.link_id]  # the link went, its count kept
    conn.delivered_gone += incoming.delivered
    assert conn.last_delivery_seconds(15.0) == 4, "a link that leaves is no delivery"
    outgoing.delivered += 1
    assert conn.last_delivery_seconds(16.0) == 0
