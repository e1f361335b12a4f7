"""Re-forwarding: a delivery one consumer gives back goes to another before
its producer hears anything (docs/routing.md#re-forwarding-released-deliveries).

Real ``hopd`` processes and proton clients; each consumer here settles by
a rule of its own (release everything, fail everything, accept), driven
together with the producer in one loop.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from proton import Delivery, Message, symbol
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender

from tests.system.clients import connect, wait_all
from tests.system.conftest import StartRouter
from tests.system.harness import STANDARD_LISTENER, Hop, router_conf
from tests.system.mgmt import PREFIX, Management
from tests.system.network import start_network
from tests.system.test_metrics import HTTP_LISTENER, scrape
from tests.system.test_tools import hopstat

# How a consumer settles what it gets: it sets the delivery's local state
# (and its details) and returns the outcome.
Rule = Callable[[Delivery, Message], int]


def release(delivery: Delivery, message: Message) -> int:
    return int(Delivery.RELEASED)


def accept(delivery: Delivery, message: Message) -> int:
    return int(Delivery.ACCEPTED)


def fail(delivery: Delivery, message: Message) -> int:
    """MODIFIED with delivery-failed, and an annotation of the consumer's."""
    delivery.local.failed = True
    delivery.local.annotations = {symbol("x-opt-failed-by"): "first"}
    return int(Delivery.MODIFIED)


def refuse_here(delivery: Delivery, message: Message) -> int:
    """MODIFIED with undeliverable-here: not for this consumer, ever."""
    delivery.local.undeliverable = True
    return int(Delivery.MODIFIED)


def addresses(limit: int | None, prefix: str = "again", distribution: str = "balanced") -> str:
    """An address section, with ``redeliveryLimit`` unless ``limit`` is None."""
    text = f"address {{\n    prefix: {prefix}\n    distribution: {distribution}\n"
    if limit is not None:
        text += f"    redeliveryLimit: {limit}\n"
    return text + "}\n"


def standalone(router_limit: int, extra: str) -> str:
    """One router whose ``redeliveryLimit`` default is ``router_limit``."""
    return (f"router {{\n    mode: standalone\n    id: HopTest\n"
            f"    redeliveryLimit: {router_limit}\n}}\n{STANDARD_LISTENER}{extra}")


class Consumer:
    """A receiver that settles each message by its rule and keeps what it got."""

    def __init__(self, conn: BlockingConnection, address: str, rule: Rule,
                 credit: int = 100) -> None:
        self.conn = conn
        self.rule = rule
        self.receiver: BlockingReceiver = conn.create_receiver(address, credit=credit)
        self.got: list[Message] = []

    def serve(self) -> None:
        fetcher = self.receiver.fetcher
        while fetcher.has_message:
            message = fetcher.pop()
            self.got.append(message)
            delivery = fetcher.unsettled[0]
            fetcher.settle(self.rule(delivery, message))

    @property
    def bodies(self) -> list[Any]:
        return [m.body for m in self.got]


def produce(conns: list[BlockingConnection], producer: BlockingConnection, address: str,
            count: int, consumers: list[Consumer], sender: BlockingSender | None = None,
            timeout: float = 20.0) -> list[Delivery]:
    """Send ``count`` messages (on ``sender``, or a new sender of
    ``producer``) and serve the consumers until every one is settled at the
    producer; the producer's deliveries."""
    if sender is None:
        sender = producer.create_sender(address)
    link = sender.link
    wait_all(conns, lambda: link.credit >= count, what=f"credit on {address}")
    deliveries = [sender.link.send(Message(body=i, durable=True)) for i in range(count)]
    serve_until_settled(conns, deliveries, consumers, timeout)
    return deliveries


def serve_until_settled(conns: list[BlockingConnection], deliveries: list[Delivery],
                        consumers: list[Consumer], timeout: float = 20.0) -> None:
    """Serve the consumers until the producer has every delivery settled."""
    def done() -> bool:
        for consumer in consumers:
            consumer.serve()
        return all(d.settled for d in deliveries)

    wait_all(conns, done, timeout, "every delivery settled at the producer")


@contextmanager
def two_consumers(hop: Hop, address: str, count: int, first: Rule = release,
                  second: Rule = accept) -> Iterator[tuple[list[Delivery], Consumer, Consumer]]:
    """``count`` messages from a producer to two consumers of ``address`` on
    one router, settling by ``first`` and ``second``: the producer's
    deliveries once all are settled, and the consumers.  The connections
    close on leaving the block (the address's record, and its counters,
    go with its last link)."""
    producer, c1, c2 = connect(hop.url), connect(hop.url), connect(hop.url)
    one, two = Consumer(c1, address, first), Consumer(c2, address, second)
    try:
        yield produce([producer, c1, c2], producer, address, count, [one, two]), one, two
    finally:
        for conn in (producer, c1, c2):
            conn.close()


def outcomes(deliveries: list[Delivery]) -> list[int]:
    return [int(d.remote_state) for d in deliveries]


def counters(url: str, key: str) -> tuple[int, int]:
    """The router's and the address's ``deliveriesRedelivered``."""
    mgmt = Management(url)
    try:
        [router] = mgmt.query("router", "deliveriesRedelivered")
        rows = [r for r in mgmt.query("router.address", "name", "deliveriesRedelivered")
                if r["name"] == key]
    finally:
        mgmt.close()
    return router["deliveriesRedelivered"], rows[0]["deliveriesRedelivered"] if rows else 0


DEBUG_LOG = "log {\n    module: ROUTER_CORE\n    enable: debug+\n}\n"


def test_what_one_consumer_releases_the_other_accepts(start_router: StartRouter) -> None:
    hop = start_router(router_conf(addresses(3) + DEBUG_LOG))
    with two_consumers(hop, "again.q", 20) as (deliveries, releasing, accepting):
        assert outcomes(deliveries) == [Delivery.ACCEPTED] * 20
        assert sorted(accepting.bodies) == list(range(20))
        assert releasing.got, "balanced sent nothing to the releasing consumer"
        # Each message it gave back went on once, and was counted.
        assert counters(hop.url, "M0again.q") == (len(releasing.got), len(releasing.got))
        logged = re.findall(r"ROUTER_CORE \(debug\) .*a delivery released by .* forwarded again, "
                            r"to .* \(1 of 3\)", hop.log_text())
        assert len(logged) == len(releasing.got)


def first_then_second(hop: Hop, address: str, first: Rule, second: Rule,
                      message: Message) -> tuple[Delivery, Consumer, Consumer]:
    """Send ``message`` while only the ``first`` consumer is attached (it is
    routed there), then attach the ``second`` and serve both until the
    producer has its outcome.  The connections are closed."""
    producer, c1 = connect(hop.url), connect(hop.url)
    one = Consumer(c1, address, first)
    sender = producer.create_sender(address)
    wait_all([producer, c1], lambda: sender.link.credit > 0, what="credit")
    delivery = sender.link.send(message)
    c2 = connect(hop.url)
    two = Consumer(c2, address, second)

    try:
        serve_until_settled([producer, c1, c2], [delivery], [one, two])
    finally:
        for conn in (producer, c1, c2):
            conn.close()
    return delivery, one, two


def test_a_failed_delivery_reaches_the_next_consumer_counted_and_annotated(
        start_router: StartRouter) -> None:
    hop = start_router(router_conf(addresses(3)))
    delivery, failing, accepting = first_then_second(
        hop, "again.fail", fail, accept,
        Message(body="m", durable=True, annotations={symbol("x-opt-mine"): 1}))
    assert delivery.remote_state == Delivery.ACCEPTED
    assert [m.delivery_count for m in failing.got] == [0]
    [second] = accepting.got
    assert second.delivery_count == 1 and not second.first_acquirer
    assert second.durable and second.body == "m"
    assert second.annotations == {symbol("x-opt-mine"): 1, symbol("x-opt-failed-by"): "first"}


def test_one_releasing_consumer_the_producer_is_told_released(start_router: StartRouter) -> None:
    hop = start_router(router_conf(addresses(5)))
    producer, c1 = connect(hop.url), connect(hop.url)
    releasing = Consumer(c1, "again.one", release)
    deliveries = produce([producer, c1], producer, "again.one", 5, [releasing])
    assert outcomes(deliveries) == [Delivery.RELEASED] * 5
    # Nowhere else to go: each was given to it once, none forwarded again.
    assert sorted(releasing.bodies) == list(range(5))
    assert counters(hop.url, "M0again.one") == (0, 0)
    for conn in [producer, c1]:
        conn.close()


def test_at_most_the_limit_then_the_last_outcome(start_router: StartRouter) -> None:
    hop = start_router(router_conf(addresses(2)))
    producer = connect(hop.url)
    conns = [producer]
    consumers = []
    for _ in range(4):
        conn = connect(hop.url)
        conns.append(conn)
        consumers.append(Consumer(conn, "again.lim", release))
    deliveries = produce(conns, producer, "again.lim", 8, consumers)
    assert outcomes(deliveries) == [Delivery.RELEASED] * 8
    # The first consumer, then two more: three of the four see each message.
    seen: dict[int, int] = {}
    for consumer in consumers:
        assert len(consumer.bodies) == len(set(consumer.bodies)), "a consumer got one twice"
        for body in consumer.bodies:
            seen[body] = seen.get(body, 0) + 1
    assert seen == {i: 3 for i in range(8)}
    assert counters(hop.url, "M0again.lim") == (16, 16)
    for conn in conns:
        conn.close()


def test_a_failure_then_a_release_tells_the_producer_modified_failed(
        start_router: StartRouter) -> None:
    hop = start_router(router_conf(addresses(3)))
    delivery, _, releasing = first_then_second(hop, "again.fr", fail, release,
                                               Message(body="m"))
    assert [m.delivery_count for m in releasing.got] == [1]
    # Released by the last, but failed by one before: the producer must
    # count a delivery attempt (AMQP 1.0 section 3.4.5).
    assert delivery.remote_state == Delivery.MODIFIED and delivery.remote.failed


def test_undeliverable_here_is_not_forwarded_again(start_router: StartRouter) -> None:
    hop = start_router(router_conf(addresses(3)))
    with two_consumers(hop, "again.ud", 10, refuse_here) as (deliveries, refusing, accepting):
        refused = sorted(refusing.bodies)
        assert refused, "balanced sent nothing to the refusing consumer"
        for i, d in enumerate(deliveries):
            if i in refused:
                assert d.remote_state == Delivery.MODIFIED and d.remote.undeliverable
            else:
                assert d.remote_state == Delivery.ACCEPTED
        assert sorted(accepting.bodies) == sorted(set(range(10)) - set(refused))


@pytest.mark.parametrize("conf", [router_conf(addresses(None)), standalone(4, addresses(0))],
                         ids=["unset", "zero-over-router-default"])
def test_limit_zero_is_todays_behaviour(start_router: StartRouter, conf: str) -> None:
    hop = start_router(conf)
    with two_consumers(hop, "again.z", 20) as (deliveries, releasing, accepting):
        released = set(releasing.bodies)
        assert released and len(released) + len(accepting.bodies) == 20
        assert outcomes(deliveries) == [
            Delivery.RELEASED if i in released else Delivery.ACCEPTED for i in range(20)]
        assert counters(hop.url, "M0again.z") == (0, 0)


def test_the_router_default_applies_to_addresses_without_a_limit(
        start_router: StartRouter) -> None:
    hop = start_router(standalone(2, addresses(None)))
    with two_consumers(hop, "other.d", 10) as (deliveries, releasing, _):
        assert outcomes(deliveries) == [Delivery.ACCEPTED] * 10
        assert releasing.got


def test_a_consumer_leaving_with_unsettled_deliveries_hands_them_on(hop_conf_start: Hop) -> None:
    hop = hop_conf_start
    producer, c1 = connect(hop.url), connect(hop.url)
    # Takes 4 and never settles them; 6 more wait in the router for credit.
    leaving = c1.create_receiver("again.leave", credit=0)
    leaving.link.flow(4)
    sender = producer.create_sender("again.leave")
    wait_all([producer, c1], lambda: sender.link.credit > 0, what="credit")
    deliveries = [sender.link.send(Message(body=i)) for i in range(10)]
    wait_all([producer, c1], lambda: leaving.fetcher.has_message == 4, what="4 at the consumer")
    c2 = connect(hop.url)
    accepting = Consumer(c2, "again.leave", accept)
    conns = [producer, c2]
    mgmt = Management(hop.url)
    wait_all([*conns, c1], lambda: any(
        r["name"] == "M0again.leave" and r["subscriberCount"] == 2
        for r in mgmt.query("router.address", "name", "subscriberCount")), what="2 consumers")
    mgmt.close()
    c1.close()
    serve_until_settled(conns, deliveries, [accepting])
    assert outcomes(deliveries) == [Delivery.ACCEPTED] * 10
    assert sorted(accepting.bodies) == list(range(10))
    # The 4 it held may have been processed: each comes with one more
    # delivery-count; the 6 it never saw come as they were.
    counts = {m.body: m.delivery_count for m in accepting.got}
    assert sorted(counts.values()) == [0] * 6 + [1] * 4
    assert all(counts[i] == 1 for i in range(4))
    for conn in conns:
        conn.close()


@pytest.fixture
def hop_conf_start(start_router: StartRouter) -> Hop:
    return start_router(router_conf(addresses(3)))


def test_a_line_of_three_the_middle_releases_the_far_end_accepts(
        start_router: StartRouter) -> None:
    net = start_network(start_router, {"A": [], "B": ["A"], "C": ["B"]},
                        extra=addresses(3, prefix="line"))
    producer, at_b, at_c = connect(net.url("A")), connect(net.url("B")), connect(net.url("C"))
    conns = [producer, at_b, at_c]
    releasing = Consumer(at_b, "line.q", release)
    accepting = Consumer(at_c, "line.q", accept)
    mgmt = Management(net.url("A"))
    wait_all(conns, lambda: any(
        r["name"] == "M0line.q" and r["remoteCount"] == 2
        for r in mgmt.query("router.address", "name", "remoteCount")), what="A knowing B and C")
    mgmt.close()
    deliveries = produce(conns, producer, "line.q", 20, [releasing, accepting])
    assert outcomes(deliveries) == [Delivery.ACCEPTED] * 20
    assert sorted(accepting.bodies) == list(range(20))
    assert releasing.got, "B's consumer got nothing"
    # B, which knows where else the message can go, forwarded it again.
    assert counters(net.url("B"), "M0line.q")[1] == len(releasing.got)
    for conn in conns:
        conn.close()


def test_a_release_from_another_router_goes_the_other_way(start_router: StartRouter) -> None:
    # B and C both hang off A.  B's consumer has no credit: what A sends B's
    # way waits at B; when it leaves, B has nowhere else to send it (not
    # back to A), so it comes back released and A sends it to C.
    net = start_network(start_router, {"A": [], "B": ["A"], "C": ["A"]},
                        extra=addresses(3, prefix="star"))
    producer, at_b = connect(net.url("A")), connect(net.url("B"))
    stalled = at_b.create_receiver("star.q", credit=0)
    mgmt = Management(net.url("A"))

    def remotes(count: int) -> Callable[[], bool]:
        return lambda: any(r["name"] == "M0star.q" and r["remoteCount"] == count
                           for r in mgmt.query("router.address", "name", "remoteCount"))

    wait_all([producer, at_b], remotes(1), what="A knowing B's consumer")
    sender = producer.create_sender("star.q")
    wait_all([producer, at_b], lambda: sender.link.credit > 0, what="credit")
    deliveries = [sender.link.send(Message(body=i)) for i in range(5)]
    wait_all([producer, at_b], lambda: counters(net.url("B"), "M0star.q") == (0, 0)
             and _unsettled_at(net.url("B")) == 5, what="5 waiting at B")
    at_c = connect(net.url("C"))
    accepting = Consumer(at_c, "star.q", accept)
    conns = [producer, at_b, at_c]
    wait_all(conns, remotes(2), what="A knowing C's consumer")
    mgmt.close()
    stalled.close()
    serve_until_settled(conns, deliveries, [accepting])
    assert outcomes(deliveries) == [Delivery.ACCEPTED] * 5
    assert sorted(accepting.bodies) == list(range(5))
    assert counters(net.url("A"), "M0star.q") == (5, 5)
    for conn in conns:
        conn.close()


def _unsettled_at(url: str) -> int:
    """Deliveries the router holds unsettled on its links from other routers."""
    mgmt = Management(url)
    try:
        return sum(r["unsettledCount"] for r in mgmt.query(
            "router.link", "linkType", "linkDir", "unsettledCount")
            if r["linkType"] == "inter-router" and r["linkDir"] == "in")
    finally:
        mgmt.close()


def test_multicast_copies_are_never_sent_again(start_router: StartRouter) -> None:
    conf = addresses(3) + addresses(None, prefix="mc", distribution="multicast")
    hop = start_router(router_conf(conf))
    with two_consumers(hop, "mc.q", 5) as (deliveries, releasing, accepting):
        # Multicast folds the copies' outcomes, each copy delivered once.
        assert outcomes(deliveries) == [Delivery.ACCEPTED] * 5
        assert sorted(releasing.bodies) == sorted(accepting.bodies) == list(range(5))
        assert counters(hop.url, "M0mc.q") == (0, 0)


def test_closest_hands_a_release_to_the_next_consumer_but_not_a_streamed_message(
        start_router: StartRouter) -> None:
    hop = start_router(router_conf(addresses(3, prefix="near", distribution="closest")))
    producer, c1, c2 = connect(hop.url), connect(hop.url), connect(hop.url)
    conns = [producer, c1, c2]
    releasing = Consumer(c1, "near.q", release)
    accepting = Consumer(c2, "near.q", accept)
    sender = producer.create_sender("near.q")
    wait_all(conns, lambda: sender.link.credit > 0, what="credit")
    large = "x" * (200 * 1024)  # streamed: above 128 KiB, never held whole
    results = []
    for body in (large, "small-1", "small-2"):
        delivery = sender.link.send(Message(body=body))
        serve_until_settled(conns, [delivery], [releasing, accepting])
        results.append(int(delivery.remote_state))
    # Round robin: the large one to the releasing consumer (back to the
    # producer as it was), then one each, the releasing one's going on.
    assert results == [Delivery.RELEASED, Delivery.ACCEPTED, Delivery.ACCEPTED]
    assert [len(b) for b in releasing.bodies] == [len(large), len("small-2")]
    assert accepting.bodies == ["small-1", "small-2"]
    assert counters(hop.url, "M0near.q") == (1, 1)
    for conn in conns:
        conn.close()


def test_an_edge_sends_what_its_consumer_releases_up_its_uplink(
        start_router: StartRouter) -> None:
    net = start_network(start_router, {"I": []}, edges={"E1": ["I"], "E2": ["I"]},
                        extra=addresses(2, prefix="edgy", distribution="closest"))
    producer, here, there = connect(net.url("E1")), connect(net.url("E1")), connect(net.url("E2"))
    conns = [producer, here, there]
    accepting = Consumer(there, "edgy.q", accept)
    sender = producer.create_sender("edgy.q")
    wait_all(conns, lambda: sender.link.credit > 0, what="E1 knowing the consumer beyond it")
    releasing = Consumer(here, "edgy.q", release)
    mgmt = Management(net.url("E1"))
    wait_all(conns, lambda: any(r["name"] == "M0edgy.q" and r["subscriberCount"] == 2
                                for r in mgmt.query("router.address", "name", "subscriberCount")),
             what="E1's own consumer")
    mgmt.close()
    # Closest: E1's own consumer gets every message first.
    deliveries = produce(conns, producer, "edgy.q", 10, [releasing, accepting], sender)
    assert outcomes(deliveries) == [Delivery.ACCEPTED] * 10
    assert sorted(releasing.bodies) == sorted(accepting.bodies) == list(range(10))
    assert counters(net.url("E1"), "M0edgy.q") == (10, 10)
    for conn in conns:
        conn.close()


def test_management_metrics_and_hopstat_show_the_limit_and_the_count(
        start_router: StartRouter) -> None:
    hop = start_router(router_conf(HTTP_LISTENER), listeners=2)
    mgmt = Management(hop.url)
    status, _, created = mgmt.request({"prefix": "made", "redeliveryLimit": 2},
                                      operation="CREATE", type=PREFIX + "router.config.address",
                                      name="made")
    assert status == 201 and created["redeliveryLimit"] == 2
    status, description, _ = mgmt.request({"prefix": "bad", "redeliveryLimit": -1},
                                          operation="CREATE",
                                          type=PREFIX + "router.config.address", name="bad")
    assert status == 400 and "redeliveryLimit" in description
    [router] = mgmt.query("router", "redeliveryLimit")
    assert router["redeliveryLimit"] == 0
    mgmt.close()
    with two_consumers(hop, "made.q", 10) as (deliveries, releasing, _):
        assert outcomes(deliveries) == [Delivery.ACCEPTED] * 10
        again = len(releasing.got)
        assert again
        _, _, samples = scrape(hop.ports[1])
        assert samples["hop_deliveries_redelivered_total"] == again
        assert samples["hop_address_deliveries_redelivered_total{address=M0made.q}"] == again
        general = hopstat(hop, "-g")
        assert re.search(rf"Deliveries Forwarded Again\s+{again}\b", general), general
        table = hopstat(hop, "-a")
        lines = [line.split() for line in table.splitlines()]
        header = next(words for words in lines if words[:1] == ["class"])
        row = next(words for words in lines if "made.q" in words)
        assert row[header.index("again")] == str(again)


def taken_by_one(hop: Hop, address: str) -> tuple[BlockingConnection, BlockingConnection,
                                                  Delivery, Delivery]:
    """One message to the one consumer of ``address``, taken and not yet
    settled: the producer's and the consumer's connections, the producer's
    delivery and the consumer's."""
    producer, c1 = connect(hop.url), connect(hop.url)
    first = c1.create_receiver(address, credit=1)
    sender = producer.create_sender(address)
    wait_all([producer, c1], lambda: sender.link.credit > 0, what="credit")
    delivery = sender.link.send(Message(body="m"))
    wait_all([producer, c1], lambda: first.fetcher.has_message == 1, what="the message")
    first.fetcher.pop()
    return producer, c1, delivery, first.fetcher.unsettled.popleft()


def test_an_outcome_given_before_settling_is_acted_on_once(start_router: StartRouter) -> None:
    # A consumer that says RELEASED without settling (as one in receiver
    # settle mode "second" does), alone: the producer is told RELEASED.  A
    # consumer that comes later does not get the message when the first one
    # settles at last: the producer was told already.
    hop = start_router(router_conf(addresses(3)))
    producer, c1, delivery, copy = taken_by_one(hop, "again.late")
    copy.update(Delivery.RELEASED)
    wait_all([producer, c1], lambda: delivery.remote_state == Delivery.RELEASED,
             what="the producer told")
    assert not delivery.settled
    c2 = connect(hop.url)
    later = Consumer(c2, "again.late", accept)
    mgmt = Management(hop.url)
    wait_all([producer, c1, c2], lambda: any(
        r["name"] == "M0again.late" and r["subscriberCount"] == 2
        for r in mgmt.query("router.address", "name", "subscriberCount")), what="2 consumers")
    mgmt.close()
    copy.settle()
    serve_until_settled([producer, c1, c2], [delivery], [later])
    assert delivery.remote_state == Delivery.RELEASED and later.got == []
    for conn in (producer, c1, c2):
        conn.close()


def test_an_outcome_given_before_settling_goes_on_at_once(start_router: StartRouter) -> None:
    hop = start_router(router_conf(addresses(3)))
    producer, c1, delivery, copy = taken_by_one(hop, "again.early")
    c2 = connect(hop.url)
    accepting = Consumer(c2, "again.early", accept)
    copy.update(Delivery.RELEASED)  # and not settled
    serve_until_settled([producer, c1, c2], [delivery], [accepting])
    assert delivery.remote_state == Delivery.ACCEPTED and accepting.bodies == ["m"]
    # The router settled the copy that came back.
    wait_all([c1], lambda: bool(copy.settled), what="the copy settled by the router")
    for conn in (producer, c1, c2):
        conn.close()
