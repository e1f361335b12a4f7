"""Distribution among local consumers: closest round-robins, balanced prefers
the consumer with the fewest unsettled deliveries (docs/routing.md#distributions)."""

from __future__ import annotations

from proton import Delivery, Message

from tests.system.clients import connect, wait_credit, wait_settled
from tests.system.harness import Hop, router_conf

ADDRESSES = """
address {
    prefix: near
    distribution: closest
}
address {
    pattern: work.*.jobs
    distribution: balanced
}
"""


def test_closest_spreads_evenly_among_equal_consumers(start_router: object) -> None:
    hop: Hop = start_router(router_conf(ADDRESSES))  # type: ignore[operator]
    conn = connect(hop.url)
    receivers = [conn.create_receiver("near.svc", credit=50, name=f"r{i}") for i in range(2)]
    sender = conn.create_sender("near.svc")
    wait_credit(conn, sender, 250)
    deliveries = [sender.link.send(Message(body=i)) for i in range(10)]
    conn.wait(lambda: sum(r.fetcher.has_message for r in receivers) == 10, timeout=10)
    counts = [r.fetcher.has_message for r in receivers]
    for receiver, count in zip(receivers, counts, strict=True):
        for _ in range(count):
            receiver.receive(timeout=5)
            receiver.accept()
    assert counts == [5, 5]
    for delivery in deliveries:
        assert wait_settled(conn, delivery) == Delivery.ACCEPTED
    conn.close()


def test_balanced_prefers_the_consumer_with_fewer_unsettled(start_router: object) -> None:
    hop: Hop = start_router(router_conf(ADDRESSES))  # type: ignore[operator]
    conn = connect(hop.url)
    slow = conn.create_receiver("work.eu.jobs", credit=50, name="slow")
    fast = conn.create_receiver("work.eu.jobs", credit=50, name="fast")
    sender = conn.create_sender("work.eu.jobs")
    wait_credit(conn, sender, 250)
    for i in range(10):
        delivery = sender.link.send(Message(body=i))
        conn.wait(lambda: slow.fetcher.has_message + fast.fetcher.has_message > 0, timeout=10)
        if fast.fetcher.has_message:
            fast.receive(timeout=5)
            fast.accept()
            assert wait_settled(conn, delivery) == Delivery.ACCEPTED
        else:
            slow.receive(timeout=5)  # held unsettled: the slow consumer's load stays 1
    assert len(slow.fetcher.unsettled) == 1
    conn.close()


def test_pattern_address_precedence_picks_the_most_specific(start_router: object) -> None:
    extra = ADDRESSES + "address {\n    pattern: work.#\n    distribution: multicast\n}\n"
    hop: Hop = start_router(router_conf(extra))  # type: ignore[operator]
    conn = connect(hop.url)
    jobs = [conn.create_receiver("work.us.jobs", credit=10, name=f"j{i}") for i in range(2)]
    news = [conn.create_receiver("work.news", credit=10, name=f"n{i}") for i in range(2)]
    sender = conn.create_sender(None)
    wait_credit(conn, sender, 250)
    sender.link.send(Message(address="work.us.jobs", body="job"))
    sender.link.send(Message(address="work.news", body="news"))
    conn.wait(lambda: sum(r.fetcher.has_message for r in jobs + news) == 3, timeout=10)
    assert sorted(r.fetcher.has_message for r in jobs) == [0, 1], "balanced: one copy"
    assert [r.fetcher.has_message for r in news] == [1, 1], "multicast: every consumer"
    conn.close()
