"""Large messages stream through: a message of many frames is forwarded frame
by frame as it arrives, to one consumer or to every multicast copy, across
routers too; an abort reaches the consumers as an abort; a consumer that
falls behind stops the router reading the producer, so router memory stays
bounded by a few frames whatever the message size."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from proton import Delivery, Message
from proton.utils import BlockingConnection, BlockingSender

from tests.system.clients import connect, wait_credit
from tests.system.conftest import StartRouter
from tests.system.harness import Hop, router_conf
from tests.system.mgmt import Management
from tests.system.network import start_network
from tests.system.stream_consumer import StreamConsumer, run_until

MULTICAST = """address {
    prefix: mc
    distribution: multicast
}
"""

MB = 1 << 20


def big(size: int, seed: int = 0, address: str | None = None) -> bytes:
    pattern = bytes((i * 7 + seed) & 0xFF for i in range(4096))
    return bytes(Message(address=address, body=pattern * (size // 4096)).encode())


def begin(sender: BlockingSender, tag: bytes, data: bytes) -> Delivery:
    """Start a delivery with the first part of a message, not completing it."""
    link = sender.link
    delivery = link.delivery(tag)
    link.stream(data)
    return delivery


def finish(sender: BlockingSender, data: bytes) -> None:
    sender.link.stream(data)
    sender.link.advance()


def rss_kb(hop: Hop, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{hop.proc.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for hopd")


def unread(port: int) -> int:
    """The most bytes waiting unread in one of the sockets of the router's ``port``."""
    most = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port:
            most = max(most, int(fields[4].split(":")[1], 16))
    return most


def pump_of(conn: BlockingConnection) -> Callable[[], None]:
    conn.container.timeout = 0.002

    def pump() -> None:
        conn.container.process()
    return pump


def ready(pumps: list[Callable[[], None]], conn: BlockingConnection,
          address: str) -> BlockingSender:
    sender = conn.create_sender(address)
    run_until(lambda: sender.link.credit > 0, pumps, what=f"credit on {address}")
    return sender


def test_anycast_frames_flow_before_the_message_is_complete(hop: Hop) -> None:
    consumer = StreamConsumer(hop.ports[0], "stream.q")
    producer = connect(hop.url)
    pumps = [consumer.pump, pump_of(producer)]
    sender = ready(pumps, producer, "stream.q")
    message = big(4 * MB)

    delivery = begin(sender, b"one", message[:MB])
    run_until(lambda: len(consumer.arriving) >= MB // 2, pumps,
              what="half of the first megabyte at the consumer before the rest is sent")
    assert not consumer.complete
    finish(sender, message[MB:])
    run_until(lambda: delivery.settled, pumps, what="the producer's outcome")
    assert delivery.remote_state == Delivery.ACCEPTED
    assert consumer.complete == [message]

    # Aborted mid-way: the consumer's copy is aborted, not completed.
    aborted = begin(sender, b"two", message[:MB])
    run_until(lambda: len(consumer.arriving) >= MB // 2, pumps,
              what="the second message streaming")
    aborted.abort()
    run_until(lambda: len(consumer.aborted) == 1, pumps, what="the abort at the consumer")
    assert consumer.aborted[0] >= MB // 2
    assert consumer.complete == [message]

    # The link carries on.
    after = sender.link.send(Message(body="after"))
    run_until(lambda: after.settled, pumps, what="the next message's outcome")
    assert after.remote_state == Delivery.ACCEPTED
    assert len(consumer.complete) == 2
    producer.close()
    consumer.close()

    mgmt = Management(hop.url)
    [router] = mgmt.query("router", "deliveriesStreamed", "deliveriesStreamedAborted")
    mgmt.close()
    assert router == {"deliveriesStreamed": 2, "deliveriesStreamedAborted": 1}


def test_multicast_copies_stream_and_abort_together(start_router: StartRouter) -> None:
    hop = start_router(router_conf(MULTICAST))
    consumers = [StreamConsumer(hop.ports[0], "mc.big") for _ in range(3)]
    producer = connect(hop.url)
    pumps = [*(c.pump for c in consumers), pump_of(producer)]
    sender = ready(pumps, producer, "mc.big")
    message = big(3 * MB, seed=1)

    delivery = begin(sender, b"one", message[:MB])
    run_until(lambda: all(len(c.arriving) >= MB // 2 for c in consumers), pumps,
              what="every copy streaming")
    finish(sender, message[MB:])
    run_until(lambda: delivery.settled, pumps, what="the folded outcome")
    assert delivery.remote_state == Delivery.ACCEPTED
    assert all(c.complete == [message] for c in consumers)

    aborted = begin(sender, b"two", message[:MB])
    run_until(lambda: all(len(c.arriving) >= MB // 2 for c in consumers), pumps,
              what="every copy streaming again")
    aborted.abort()
    run_until(lambda: all(len(c.aborted) == 1 for c in consumers), pumps,
              what="every copy aborted")
    assert all(c.complete == [message] for c in consumers)
    producer.close()
    for c in consumers:
        c.close()


def test_a_consumer_that_falls_behind_holds_the_producer(hop: Hop) -> None:
    """The consumer is not read for a while: the router stops reading the
    producer instead of buffering the message."""
    consumer = StreamConsumer(hop.ports[0], "slow.q")
    producer = connect(hop.url)
    produce = pump_of(producer)
    pumps = [consumer.pump, produce]
    sender = ready(pumps, producer, "slow.q")
    message = big(64 * MB, seed=2)
    before = rss_kb(hop)

    delivery = begin(sender, b"big", message)
    sender.link.advance()
    # Only the producer runs: it can hand the router no more than the
    # router's copy may fall behind plus what the sockets buffer.
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        produce()
    # The kernel's socket buffers take tens of megabytes here; what they
    # hold on the router's side, unread, shows it stopped reading.
    assert unread(hop.ports[0]) > 64 * 1024
    assert rss_kb(hop) - before < 20 * 1024

    run_until(lambda: delivery.settled, pumps, timeout=60, what="the whole message")
    assert delivery.remote_state == Delivery.ACCEPTED
    assert consumer.complete == [message]
    assert rss_kb(hop, "VmHWM") - before < 20 * 1024
    producer.close()
    consumer.close()
    mgmt = Management(hop.url)
    [router] = mgmt.query("router", "streamingPauses")
    mgmt.close()
    assert router["streamingPauses"] >= 1


def test_a_copy_waiting_for_credit_keeps_little_and_then_streams(hop: Hop) -> None:
    consumer = StreamConsumer(hop.ports[0], "later.q", credit=0)
    producer = connect(hop.url)
    pumps = [consumer.pump, pump_of(producer)]
    sender = ready(pumps, producer, "later.q")
    message = big(32 * MB, seed=3)
    before = rss_kb(hop)

    delivery = begin(sender, b"later", message)
    sender.link.advance()
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        for pump in pumps:
            pump()
    assert not consumer.arriving
    assert unread(hop.ports[0]) > 64 * 1024, "the router read on with no consumer credit"
    assert rss_kb(hop) - before < 20 * 1024

    consumer.link.flow(1)
    run_until(lambda: delivery.settled, pumps, timeout=60, what="the outcome")
    assert delivery.remote_state == Delivery.ACCEPTED
    assert consumer.complete == [message]
    assert rss_kb(hop, "VmHWM") - before < 20 * 1024
    producer.close()
    consumer.close()


def test_a_multicast_consumer_without_credit_that_leaves_lets_the_others_finish(
        start_router: StartRouter) -> None:
    """Its waiting copy held the producer; once it is gone the producer is
    read again and the other copies complete."""
    hop = start_router(router_conf(MULTICAST))
    stalled = StreamConsumer(hop.ports[0], "mc.stall", credit=0)
    fast = [StreamConsumer(hop.ports[0], "mc.stall") for _ in range(2)]
    producer = connect(hop.url)
    pumps = [stalled.pump, *(c.pump for c in fast), pump_of(producer)]
    sender = ready(pumps, producer, "mc.stall")
    message = big(8 * MB, seed=5)

    delivery = begin(sender, b"held", message)
    sender.link.advance()
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        for pump in pumps:
            pump()
    assert not any(c.complete for c in fast), "the waiting copy holds the producer"
    stalled.close()
    pumps.remove(stalled.pump)
    run_until(lambda: all(c.complete == [message] for c in fast), pumps, timeout=30,
              what="the other copies after the stalled consumer left")
    run_until(lambda: delivery.settled, pumps, what="the outcome")
    producer.close()
    for c in fast:
        c.close()


def test_consumer_leaving_mid_message_and_producer_leaving_mid_message(hop: Hop) -> None:
    consumer = StreamConsumer(hop.ports[0], "leave.q")
    producer = connect(hop.url)
    produce = pump_of(producer)
    sender = ready([consumer.pump, produce], producer, "leave.q")
    message = big(4 * MB, seed=4)

    # The consumer goes: the producer is told its copy was not delivered.
    delivery = begin(sender, b"one", message[:MB])
    run_until(lambda: len(consumer.arriving) >= MB // 2, [consumer.pump, produce],
              what="the copy streaming")
    consumer.close()
    finish(sender, message[MB:])
    run_until(lambda: delivery.settled, [produce], what="the producer's outcome")
    assert delivery.remote_state in (Delivery.RELEASED, Delivery.MODIFIED)

    # The producer goes: the consumer's copy is aborted.
    consumer = StreamConsumer(hop.ports[0], "leave.q")
    run_until(lambda: sender.link.credit > 0, [consumer.pump, produce], what="credit again")
    begin(sender, b"two", message[:MB])
    run_until(lambda: len(consumer.arriving) >= MB // 2, [consumer.pump, produce],
              what="the second copy streaming")
    producer.close()
    run_until(lambda: len(consumer.aborted) == 1, [consumer.pump], what="the abort")
    assert consumer.complete == []

    # The router serves on.
    producer = connect(hop.url)
    pumps = [consumer.pump, pump_of(producer)]
    sender = ready(pumps, producer, "leave.q")
    done = sender.link.send(Message(body="next"))
    run_until(lambda: done.settled, pumps, what="the next message")
    assert done.remote_state == Delivery.ACCEPTED
    producer.close()
    consumer.close()


def test_streams_cross_the_network_and_aborts_follow(start_router: StartRouter) -> None:
    net = start_network(start_router, {"A": [], "B": ["A"]}, extra=MULTICAST)
    consumers = [StreamConsumer(net["B"].ports[0], address) for address in ("net.q", "mc.net")]
    producer = connect(net.url("A"))
    pumps = [*(c.pump for c in consumers), pump_of(producer)]
    message = big(3 * MB, seed=5)
    for consumer in consumers:
        _stream_across(consumer, producer, pumps, message)
    producer.close()
    for c in consumers:
        c.close()


def _stream_across(consumer: StreamConsumer, producer: BlockingConnection,
                   pumps: list[Callable[[], None]], message: bytes) -> None:
    address = consumer.link.source.address
    sender = ready(pumps, producer, address)
    delivery = begin(sender, b"one", message[:MB])
    run_until(lambda: len(consumer.arriving) >= MB // 2, pumps,
              what=f"{address} streaming across")
    finish(sender, message[MB:])
    run_until(lambda: delivery.settled, pumps, what=f"{address} outcome")
    assert delivery.remote_state == Delivery.ACCEPTED
    assert consumer.complete == [message]
    aborted = begin(sender, b"two", message[:MB])
    run_until(lambda: len(consumer.arriving) >= MB // 2, pumps,
              what=f"{address} streaming again")
    aborted.abort()
    run_until(lambda: len(consumer.aborted) == 1, pumps, what=f"{address} abort across")


def test_a_large_management_request_is_refused(hop: Hop) -> None:
    """A request that streams (it arrives in more wake-ups than one) is
    refused: the agent takes whole messages only.  1 MB cannot arrive whole
    in the two wake-ups that read up to 64 KiB and then 256 KiB; 300 kB,
    sent fast enough, sometimes did and was served."""
    conn = connect(hop.url)
    sender = conn.create_sender("$management")
    wait_credit(conn, sender, 250)
    request = Message(body=b"x" * 1_000_000, reply_to="nowhere",
                      properties={"operation": "QUERY", "type": "org.amqp.management"})
    delivery = sender.link.send(request)
    conn.wait(lambda: delivery.settled, timeout=10)
    assert delivery.remote_state == Delivery.REJECTED
    assert delivery.remote.condition.name == "amqp:not-implemented"
    conn.close()


def test_a_presettled_large_message_streams(hop: Hop) -> None:
    consumer = StreamConsumer(hop.ports[0], "pre.q")
    producer = connect(hop.url)
    pumps = [consumer.pump, pump_of(producer)]
    sender = ready(pumps, producer, "pre.q")
    messages = [big(2 * MB, seed=6), big(MB, seed=7)]
    for i, message in enumerate(messages):
        delivery = begin(sender, b"%d" % i, message)
        sender.link.advance()
        delivery.settle()  # before any of it is written: every frame says settled
    run_until(lambda: consumer.complete == messages, pumps, what="both whole messages")
    producer.close()
    consumer.close()


@pytest.mark.parametrize("shape", ["interiors", "edges"])
def test_a_streaming_message_holds_up_no_other_message_between_routers(
        start_router: StartRouter, shape: str) -> None:
    """While a large message is still streaming from one router to the next,
    other messages to the same next hop overtake it: it has a link of its
    own (qd.streaming-links), the rest share theirs (here an anonymous
    sender's messages: one data link between interiors, the anonymous
    uplink of an edge)."""
    if shape == "interiors":
        net = start_network(start_router, {"A": [], "B": ["A"]})
        near, far = "A", "B"
    else:
        net = start_network(start_router, {"I": []}, edges={"E1": ["I"], "E2": ["I"]})
        near, far = "E1", "E2"
    streamed = StreamConsumer(net[far].ports[0], "hol.big")
    small = StreamConsumer(net[far].ports[0], "hol.small")
    producer = connect(net.url(near))
    pumps = [streamed.pump, small.pump, pump_of(producer)]
    # Two anonymous senders: the router puts the messages of both on the
    # link to the next router (a client's own link carries one at a time).
    anonymous, second = producer.create_sender(None), producer.create_sender(None)
    run_until(lambda: anonymous.link.credit > 0 and second.link.credit > 0, pumps,
              what="credit")
    # Consumers on another router are known here within a moment.
    spread = time.monotonic() + 1.0
    run_until(lambda: time.monotonic() > spread, pumps, what="the addresses to spread")
    message = big(3 * MB, seed=9, address="hol.big")
    delivery = begin(anonymous, b"big", message[:MB])
    run_until(lambda: len(streamed.arriving) >= MB // 2, pumps,
              what="the large message streaming to the far router")
    overtaking = second.link.send(Message(address="hol.small", body="overtakes"))
    run_until(lambda: overtaking.settled, pumps,
              what="the small message's outcome while the large one still streams")
    assert overtaking.remote_state == Delivery.ACCEPTED
    assert len(small.complete) == 1 and not streamed.complete
    finish(anonymous, message[MB:])
    run_until(lambda: delivery.settled, pumps, what="the large message's outcome")
    assert delivery.remote_state == Delivery.ACCEPTED
    assert streamed.complete == [message]
    # The streaming link is kept for the next large message, which streams too.
    again = begin(anonymous, b"again", message[:MB])
    finish(anonymous, message[MB:])
    run_until(lambda: again.settled, pumps, what="the second large message's outcome")
    assert again.remote_state == Delivery.ACCEPTED
    assert streamed.complete == [message, message]
    producer.close()
    streamed.close()
    small.close()


@pytest.mark.parametrize(("args", "kept"), [((), 4), (("-T",), 2)],
                         ids=["default", "test-hooks"])
def test_streaming_links_are_kept_for_the_next_streams_up_to_four(
        start_router: StartRouter, args: tuple[str, ...], kept: int) -> None:
    """Six messages streaming from A to B at once take six streaming links;
    once they are done A keeps four for the next ones and closes the rest
    (two with qdrouterd's test hooks, ``-T``, as qdrouterd keeps)."""
    net = start_network(start_router, {"A": [], "B": ["A"]},
                        starters={"A": functools.partial(start_router, args=args)})
    at_a = Management(net.url("A"))

    def links_to_b() -> int:
        conns = {row["identity"] for row in at_a.query("connection", "identity", "role")
                 if row["role"] == "inter-router"}
        return sum(1 for row in at_a.query("router.link", "connectionId", "linkDir")
                   if row["connectionId"] in conns and row["linkDir"] == "out")

    consumers = [StreamConsumer(net["B"].ports[0], f"many.{i}") for i in range(6)]
    producer = connect(net.url("A"))
    pumps = [*(c.pump for c in consumers), pump_of(producer)]
    senders = [ready(pumps, producer, f"many.{i}") for i in range(6)]
    before = links_to_b()
    message = big(2 * MB, seed=1)
    deliveries = [begin(sender, b"m", message[:MB]) for sender in senders]
    run_until(lambda: all(len(c.arriving) >= MB // 2 for c in consumers), pumps,
              what="six messages streaming at once")
    assert links_to_b() == before + 6
    for sender in senders:
        finish(sender, message[MB:])
    run_until(lambda: all(d.settled for d in deliveries), pumps, what="the six outcomes")
    assert [d.remote_state for d in deliveries] == [Delivery.ACCEPTED] * 6
    assert all(c.complete == [message] for c in consumers)
    run_until(lambda: links_to_b() == before + kept, pumps, timeout=5,
              what=f"{kept} idle streaming links kept, {6 - kept} closed")
    producer.close()
    for c in consumers:
        c.close()
    at_a.close()


@pytest.mark.parametrize("shape", ["one router", "two routers"])
def test_messages_streaming_at_once_to_one_consumer_all_arrive(
        start_router: StartRouter, shape: str) -> None:
    """Six producers send a 1.6 MiB message each at once to one consumer,
    whose link carries one at a time: the others wait with more than the
    1 MiB a copy may fall behind.  Between routers they all come over one
    connection; holding it would stop the message being delivered too (and
    the routing protocol with it), so a connection from another router is
    never held, and all six arrive (qpid-dispatch's streaming-link scrubber
    test sends twelve)."""
    if shape == "one router":
        net = start_network(start_router, {"A": []})
        far = "A"
    else:
        net = start_network(start_router, {"A": [], "B": ["A"]})
        far = "B"
    consumer = StreamConsumer(net[far].ports[0], "together.q")
    producers = [connect(net.url("A")) for _ in range(6)]
    pumps = [consumer.pump, *(pump_of(p) for p in producers)]
    senders = [p.create_sender("together.q") for p in producers]
    run_until(lambda: all(s.link.credit > 0 for s in senders), pumps, what="credit")
    messages = [big(8 * MB // 5, seed=n) for n in range(6)]
    deliveries = []
    for sender, message in zip(senders, messages, strict=True):
        deliveries.append(sender.link.delivery(b"t"))
        sender.link.stream(message)
        sender.link.advance()
    run_until(lambda: all(d.settled for d in deliveries), pumps, timeout=30,
              what="the six outcomes")
    assert [d.remote_state for d in deliveries] == [Delivery.ACCEPTED] * 6
    assert sorted(consumer.complete) == sorted(messages)
    for producer in producers:
        producer.close()
    consumer.close()
