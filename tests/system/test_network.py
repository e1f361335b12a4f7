"""Networks of interior routers: multi-hop delivery, router annotations,
distribution across routers, settlement across hops, rerouting when a router
dies or joins, and credit driven by remote consumers (docs/networks.md,
docs/routing.md#credit, docs/routing.md#settlement-and-dispositions)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from proton import Condition, Data, Delivery, Message, symbol
from proton.reactor import AtMostOnce, Container, LinkOption
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender, LinkDetached

from tests.system.clients import connect, pump, wait_all
from tests.system.conftest import StartRouter
from tests.system.mgmt import Management
from tests.system.network import Network, start_network

LINE = {"A": [], "B": ["A"], "C": ["B"]}
PAIR = {"A": [], "B": ["A"]}
APP_ANNOTATIONS = {symbol("x-opt-app"): "keep"}


def address_conf(prefix: str, distribution: str) -> str:
    return f"address {{\n    prefix: {prefix}\n    distribution: {distribution}\n}}\n"


def ready_sender(conns: list[BlockingConnection], conn: BlockingConnection,
                 address: str | None) -> BlockingSender:
    """A sender on ``conn``, once the router has given it credit."""
    sender = conn.create_sender(address)
    wait_all(conns, lambda: sender.link.credit > 0, what=f"credit on {address}")
    return sender


def settle_all(conns: list[BlockingConnection], deliveries: list[Delivery],
               timeout: float = 15.0) -> list[int]:
    """Wait until every delivery is settled by the router; their outcomes."""
    def done() -> bool:
        return all(d.settled for d in deliveries)

    try:
        wait_all(conns, done, timeout, "settlement")
    except AssertionError:
        open_ = [i for i, d in enumerate(deliveries) if not d.settled]
        raise AssertionError(f"{len(open_)} of {len(deliveries)} deliveries never settled "
                             f"(indexes {open_[:20]}...)") from None
    return [int(d.remote_state) for d in deliveries]


def take(receiver: BlockingReceiver, accept: bool = True) -> Message:
    """Pop a message the fetcher already holds; optionally accept it."""
    message: Message = receiver.fetcher.pop()
    if accept:
        receiver.fetcher.settle(Delivery.ACCEPTED)
    return message


def collect(receivers: Mapping[str, BlockingReceiver],
            into: dict[str, list[Any]]) -> None:
    """Accept whatever the receivers hold, appending bodies to ``into``."""
    for name, receiver in receivers.items():
        while receiver.fetcher.has_message:
            into[name].append(take(receiver).body)


def collect_until(conns: list[BlockingConnection], receivers: Mapping[str, BlockingReceiver],
                  into: dict[str, list[Any]], condition: Callable[[], bool],
                  timeout: float = 10.0, what: str = "condition") -> None:
    """Pump the clients, accepting and collecting, until ``condition()`` holds."""
    def step() -> bool:
        collect(receivers, into)
        return condition()

    wait_all(conns, step, timeout, what)


def collect_for(conns: list[BlockingConnection], receivers: Mapping[str, BlockingReceiver],
                into: dict[str, list[Any]], seconds: float) -> None:
    """Pump the clients for ``seconds``, accepting and collecting."""
    deadline = time.monotonic() + seconds
    collect_until(conns, receivers, into, lambda: time.monotonic() > deadline, seconds + 5)


def probe_until_reached(conns: list[BlockingConnection],
                        receivers: Mapping[str, BlockingReceiver], sender: BlockingSender,
                        timeout: float) -> None:
    """Send probes until every receiver has had one (the producer's router
    learns remote consumers by mobile-address sync), let them settle, then
    drain what is left so the next messages start clean."""
    got: dict[str, list[Any]] = {name: [] for name in receivers}
    probes: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while not all(any(isinstance(b, str) for b in bodies) for bodies in got.values()):
        assert time.monotonic() < deadline, f"probes did not reach every consumer: {got}"
        probes.append(sender.link.send(Message(body=f"probe {len(probes)}")))
        collect_for(conns, receivers, got, 0.3)
    collect_until(conns, receivers, got, lambda: all(p.settled for p in probes),
                  timeout, "probes settled")
    collect_for(conns, receivers, got, 1.0)  # a mobile-sync tick: the others learn too


def give_each_outcome(receiver: BlockingReceiver,
                      annotations: dict[Any, Any] | None = None) -> None:
    """Settle the four deliveries ``receiver`` holds, oldest first, as REJECTED
    (with a condition), RELEASED, MODIFIED (failed, undeliverable, with
    ``annotations``) and ACCEPTED."""
    rejected, _, modified, _ = list(receiver.fetcher.unsettled)
    rejected.local.condition = Condition("app:bad-order", "order 7 is invalid", {"code": 7})
    modified.local.failed = True
    modified.local.undeliverable = True
    if annotations is not None:
        modified.local.annotations = annotations
    for state in (Delivery.REJECTED, Delivery.RELEASED, Delivery.MODIFIED, Delivery.ACCEPTED):
        receiver.fetcher.settle(state)  # settles the oldest held delivery


def route_of(message: Message) -> tuple[Any, Any]:
    annotations = message.annotations or {}
    return annotations.get("x-opt-qd.ingress"), annotations.get("x-opt-qd.trace")


# 1 ---------------------------------------------------------------------------

def test_line_of_three_delivers_in_order_and_traces_the_path(
        start_router: StartRouter) -> None:
    net = start_network(start_router, LINE, unstripped=["C"])
    producer = connect(net.url("A"))
    consumer = connect(net.url("C"))
    raw_consumer = connect(net.unstripped_url("C"))
    conns = [producer, consumer, raw_consumer]
    receiver = consumer.create_receiver("line.q", credit=30)
    sender = ready_sender(conns, producer, "line.q")
    deliveries = [sender.link.send(Message(body=i, annotations=dict(APP_ANNOTATIONS)))
                  for i in range(20)]
    wait_all(conns, lambda: receiver.fetcher.has_message == 20, what="20 messages on C")
    messages = [take(receiver) for _ in range(20)]
    assert [m.body for m in messages] == list(range(20))
    assert settle_all(conns, deliveries) == [Delivery.ACCEPTED] * 20
    for message in messages:
        assert message.annotations == APP_ANNOTATIONS, "router annotations not stripped"

    raw = raw_consumer.create_receiver("line.raw", credit=5)
    raw_sender = ready_sender(conns, producer, "line.raw")
    delivery = raw_sender.link.send(Message(body="raw", annotations=dict(APP_ANNOTATIONS)))
    wait_all(conns, lambda: raw.fetcher.has_message == 1, what="message on unstripped listener")
    message = take(raw)
    assert message.body == "raw"
    assert message.annotations["x-opt-app"] == "keep"
    assert route_of(message) == ("0/A", ["0/A", "0/B", "0/C"])
    assert settle_all(conns, [delivery]) == [Delivery.ACCEPTED]
    for conn in conns:
        conn.close()


# 2 ---------------------------------------------------------------------------

def test_request_reply_across_the_line(start_router: StartRouter) -> None:
    net = start_network(start_router, LINE)
    client = connect(net.url("A"))
    service = connect(net.url("C"))
    conns = [client, service]
    replies = client.create_receiver(None, dynamic=True, credit=10)
    reply_to = replies.link.remote_source.address
    assert reply_to.startswith("amqp:/_topo/0/A/temp")
    requests = service.create_receiver("svc", credit=10)
    responder = ready_sender(conns, service, None)
    request_sender = ready_sender(conns, client, "svc")
    request = request_sender.link.send(
        Message(body="ping", reply_to=reply_to, correlation_id=7))
    wait_all(conns, lambda: requests.fetcher.has_message == 1, what="request on C")
    incoming = take(requests)
    assert (incoming.body, incoming.reply_to) == ("ping", reply_to)
    answer = responder.link.send(Message(address=incoming.reply_to, body="pong",
                                         correlation_id=incoming.correlation_id))
    wait_all(conns, lambda: replies.fetcher.has_message == 1, what="reply on A")
    reply = take(replies)
    assert (reply.body, reply.correlation_id) == ("pong", 7)
    assert settle_all(conns, [request, answer]) == [Delivery.ACCEPTED] * 2
    client.close()
    service.close()


# 3 ---------------------------------------------------------------------------

def test_balanced_sends_to_the_remote_consumer_when_local_one_is_loaded(
        start_router: StartRouter) -> None:
    net = start_network(start_router, PAIR, extra=address_conf("bal", "balanced"))
    producer = connect(net.url("A"))
    local_conn = connect(net.url("A"))
    remote_conn = connect(net.url("B"))
    conns = [producer, local_conn, remote_conn]
    remote = remote_conn.create_receiver("bal.q", credit=30)
    sender = ready_sender(conns, producer, "bal.q")  # A has learnt B's consumer
    local = local_conn.create_receiver("bal.q", credit=30)
    held: list[int] = []
    at_b: list[int] = []
    deliveries = []
    for i in range(20):
        deliveries.append(sender.link.send(Message(body=i)))
        wait_all(conns, lambda: local.fetcher.has_message + remote.fetcher.has_message > 0,
                 what=f"message {i} at a consumer")
        if local.fetcher.has_message:
            held.append(take(local, accept=False).body)  # stays unsettled: A's load grows
        else:
            at_b.append(take(remote).body)
            assert settle_all(conns, deliveries[-1:]) == [Delivery.ACCEPTED]
    # docs/routing.md#distributions: local load 0 wins; at load 1 it ties with B's load (0
    # outstanding + cost 1) and the local candidate is kept; at load 2 B wins,
    # and as B accepts at once its load stays 1 for every later message.
    assert held == [0, 1], f"A's consumer got {held}, B's got {at_b}"
    assert at_b == list(range(2, 20))
    for _ in held:
        local.fetcher.settle(Delivery.ACCEPTED)
    assert settle_all(conns, deliveries) == [Delivery.ACCEPTED] * 20
    pump(producer, 0.3)
    assert local.fetcher.has_message == remote.fetcher.has_message == 0
    for conn in conns:
        conn.close()


def test_balanced_counts_what_is_outstanding_over_a_next_hop_for_every_router_beyond(
        start_router: StartRouter) -> None:
    # A-B-C, cost 1 each, a consumer on each router that settles nothing.  A
    # weighs its own consumer against B's hop (outstanding over it + 1); C,
    # beyond B, shares B's count and costs more, so A never picks it: B
    # divides what reaches it between its consumer and C (qdrouterd's rule).
    net = start_network(start_router, LINE, extra=address_conf("bal", "balanced"))
    conns = {r: connect(net.url(r)) for r in "ABC"}
    producer = connect(net.url("A"))
    everyone = [producer, *conns.values()]
    receivers = {r: conns[r].create_receiver("bal.line", credit=50) for r in "ABC"}
    at_a = Management(net.url("A"))
    wait_all(everyone, lambda: any(
        row["name"] == "M0bal.line" and row["remoteCount"] == 2
        for row in at_a.query("router.address", "name", "remoteCount")),
        what="A learning B's and C's consumers")
    at_a.close()
    sender = ready_sender(everyone, producer, "bal.line")
    got: dict[str, list[int]] = {"A": [], "B": [], "C": []}
    for i in range(20):
        sender.link.send(Message(body=i))
        wait_all(everyone, lambda: sum(r.fetcher.has_message for r in receivers.values()) > 0,
                 what=f"message {i} at a consumer")
        [where] = [r for r, rcv in receivers.items() if rcv.fetcher.has_message]
        got[where].append(take(receivers[where], accept=False).body)
    # A: loads 0 and 1 (a tie with B's hop) stay, then A and B's hop alternate.
    assert got["A"] == [0, 1, *range(3, 20, 2)]
    # B: the same between its consumer and C (cost 1 beyond it).
    assert got["B"] == [2, 4, 8, 12, 16] and got["C"] == [6, 10, 14, 18]
    for conn in everyone:
        conn.close()


# 4 ---------------------------------------------------------------------------

def test_closest_prefers_the_local_consumer_then_fails_over(
        start_router: StartRouter) -> None:
    net = start_network(start_router, PAIR, extra=address_conf("closest", "closest"))
    producer = connect(net.url("A"))
    local_conn = connect(net.url("A"))
    remote_conn = connect(net.url("B"))
    conns = [producer, local_conn, remote_conn]
    remote = remote_conn.create_receiver("closest.q", credit=30)
    sender = ready_sender(conns, producer, "closest.q")  # A has learnt B's consumer
    local = local_conn.create_receiver("closest.q", credit=30)
    first = [sender.link.send(Message(body=i)) for i in range(10)]
    got: dict[str, list[Any]] = {"A": [], "B": []}
    receivers = {"A": local, "B": remote}
    collect_until(conns, receivers, got, lambda: len(got["A"] + got["B"]) >= 10,
                  what="first 10 messages")
    assert settle_all(conns, first) == [Delivery.ACCEPTED] * 10
    collect(receivers, got)
    assert got == {"A": list(range(10)), "B": []}

    local.close()
    second = [sender.link.send(Message(body=i)) for i in range(10, 20)]
    collect_until(conns, receivers, got, lambda: len(got["B"]) >= 10,
                  what="10 messages at B after A's consumer left")
    assert got == {"A": list(range(10)), "B": list(range(10, 20))}
    assert settle_all(conns, second) == [Delivery.ACCEPTED] * 10
    for conn in conns:
        conn.close()


# 5 ---------------------------------------------------------------------------

def test_multicast_on_a_triangle_delivers_exactly_one_copy_each(
        start_router: StartRouter) -> None:
    net = start_network(start_router, {"A": [], "B": ["A"], "C": ["A", "B"]},
                        extra=address_conf("mc", "multicast"))
    producer = connect(net.url("A"))
    consumers = {r: connect(net.url(r)) for r in "ABC"}
    conns = [producer, *consumers.values()]
    receivers = {r: c.create_receiver("mc.t", credit=50) for r, c in consumers.items()}
    sender = ready_sender(conns, producer, "mc.t")
    probe_until_reached(conns, receivers, sender, 15)
    got: dict[str, list[Any]] = {r: [] for r in "ABC"}

    deliveries = [sender.link.send(Message(body=i)) for i in range(20)]
    collect_until(conns, receivers, got, lambda: all(len(b) >= 20 for b in got.values()),
                  what="20 copies at each consumer")
    assert settle_all(conns, deliveries) == [Delivery.ACCEPTED] * 20
    collect_for(conns, receivers, got, 1.0)
    assert got == {r: list(range(20)) for r in "ABC"}
    for conn in conns:
        conn.close()


# 6 ---------------------------------------------------------------------------

def test_consumer_outcomes_cross_two_hops(start_router: StartRouter) -> None:
    net = start_network(start_router, LINE)
    producer = connect(net.url("A"))
    consumer = connect(net.url("C"))
    conns = [producer, consumer]
    receiver = consumer.create_receiver("outcome.q", credit=10)
    sender = ready_sender(conns, producer, "outcome.q")
    deliveries = [sender.link.send(Message(body=i)) for i in range(4)]
    wait_all(conns, lambda: receiver.fetcher.has_message == 4, what="4 messages on C")
    for _ in range(4):
        take(receiver, accept=False)
    give_each_outcome(receiver, {symbol("retry-after"): 5})
    assert settle_all(conns, deliveries) == [Delivery.REJECTED, Delivery.RELEASED,
                                             Delivery.MODIFIED, Delivery.ACCEPTED]
    condition = deliveries[0].remote.condition
    assert condition is not None
    assert (condition.name, condition.description) == ("app:bad-order", "order 7 is invalid")
    assert condition.info == {"code": 7}
    assert deliveries[2].remote.failed is True
    assert deliveries[2].remote.undeliverable is True
    assert deliveries[2].remote.annotations == {"retry-after": 5}
    producer.close()
    consumer.close()


# 7 ---------------------------------------------------------------------------

class Stream:
    """A producer sending numbered messages at a steady rate while a consumer
    accepts everything; records when each message was sent and received."""

    def __init__(self, sender: BlockingSender, receiver: BlockingReceiver,
                 conns: list[BlockingConnection], interval: float = 0.02) -> None:
        self.sender = sender
        self.receiver = receiver
        self.conns = conns
        self.interval = interval
        self.deliveries: list[Delivery] = []
        self.sent_at: list[float] = []
        self.received: list[int] = []
        self.received_at: list[float] = []
        self.next_send = time.monotonic()
        self.sending = True
        self.drained_at: list[float] = []

    def step(self) -> None:
        for conn in self.conns:
            conn.container.timeout = 0.005
            conn.container.process()
        now = time.monotonic()
        link = self.sender.link
        if link.drain_mode and link.credit > 0:
            self.drained_at.append(now)
            link.drained()  # the router withdrew credit: nothing to send
        if self.sending and now >= self.next_send and link.credit > 0 and not link.drain_mode:
            self.deliveries.append(link.send(Message(body=len(self.deliveries))))
            self.sent_at.append(now)
            self.next_send = now + self.interval
        while self.receiver.fetcher.has_message:
            self.received.append(take(self.receiver).body)
            self.received_at.append(time.monotonic())

    def run_until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: sent "
                                     f"{len(self.deliveries)}, received {len(self.received)}")
            self.step()


def test_router_killed_mid_stream_traffic_resumes_via_the_other_path(
        start_router: StartRouter, killable: StartRouter,
        record_property: Callable[[str, object], None]) -> None:
    # A-B-C-D-A; A-D and D-C cost 5, so A reaches C via B (cost 2), else via D (10).
    net = start_network(start_router, {"A": [], "B": ["A"], "C": ["B"], "D": ["A", "C"]},
                        costs={("D", "A"): 5, ("D", "C"): 5}, starters={"B": killable})
    net.wait_route("A", "C", "B", 2)
    producer = connect(net.url("A"))
    consumer = connect(net.url("C"))
    conns = [producer, consumer]
    receiver = consumer.create_receiver("sq.q", credit=100)
    sender = ready_sender(conns, producer, "sq.q")
    stream = Stream(sender, receiver, conns)
    stream.run_until(lambda: len(stream.received) >= 40, 15, "40 messages before the kill")

    net.kill("B")
    killed_at = time.monotonic()
    first_after = len(stream.deliveries)  # first message sent after the kill

    def resumed() -> bool:
        return sum(1 for b in stream.received if b >= first_after) >= 40

    stream.run_until(resumed, 30, "40 messages sent after the kill to arrive via D")
    stream.sending = False
    stream.run_until(lambda: all(d.settled for d in stream.deliveries), 15,
                     "every delivery to be settled")

    states = [int(d.remote_state) for d in stream.deliveries]
    assert set(states) <= {Delivery.ACCEPTED, Delivery.RELEASED, Delivery.MODIFIED}, states
    assert len(stream.received) == len(set(stream.received)), "a message arrived twice"
    accepted = {i for i, s in enumerate(states) if s == Delivery.ACCEPTED}
    assert accepted <= set(stream.received), "accepted but never received"
    assert all(states[b] == Delivery.ACCEPTED for b in stream.received if b >= first_after)

    first_rx = next(t for b, t in zip(stream.received, stream.received_at, strict=True)
                    if b >= first_after)
    resumed_send = next(stream.sent_at[i] for i in range(first_after, len(states))
                        if states[i] == Delivery.ACCEPTED)
    timings = {
        "kill_to_first_new_message_received_s": round(first_rx - killed_at, 3),
        "kill_to_first_accepted_send_s": round(resumed_send - killed_at, 3),
        "sender_drained_times": sum(1 for t in stream.drained_at if t >= killed_at),
        "deliveries_sent": len(states),
        "deliveries_modified": states.count(Delivery.MODIFIED),
        "deliveries_released": states.count(Delivery.RELEASED),
    }
    for key, value in timings.items():
        record_property(key, value)
    print(f"\nsquare, SIGKILL of B mid-stream: {timings}")
    net.wait_route("A", "C", "D", 10)
    producer.close()
    consumer.close()


# 8 ---------------------------------------------------------------------------

def test_late_router_shortens_the_path_and_traffic_follows(
        start_router: StartRouter) -> None:
    net = start_network(start_router, LINE, costs={("B", "A"): 5, ("C", "B"): 5},
                        unstripped=["C"])
    net.wait_route("A", "C", "B", 10)
    producer = connect(net.url("A"))
    consumer = connect(net.unstripped_url("C"))
    conns = [producer, consumer]
    receiver = consumer.create_receiver("reroute.q", credit=20)
    sender = ready_sender(conns, producer, "reroute.q")

    def send_batch(first: int) -> list[Message]:
        deliveries = [sender.link.send(Message(body=i)) for i in range(first, first + 5)]
        wait_all(conns, lambda: receiver.fetcher.has_message == 5, what="5 messages on C")
        messages = [take(receiver) for _ in range(5)]
        assert settle_all(conns, deliveries) == [Delivery.ACCEPTED] * 5
        return messages

    before = send_batch(0)
    assert [m.body for m in before] == list(range(5))
    assert {tuple(route_of(m)[1]) for m in before} == {("0/A", "0/B", "0/C")}

    net.add_router("D", ["A", "C"])
    net.wait_converged()
    net.wait_route("A", "C", "D", 2)
    # A switches to D as soon as its routes say so; D learns C's addresses a
    # tick or two later (MAR/MAU, docs/networks.md#mobile-addresses) and releases transit
    # deliveries until then. Wait for the first message to get through.
    deadline = time.monotonic() + 10
    while True:
        probe = sender.link.send(Message(body="probe"))
        wait_all(conns, lambda p=probe: p.settled or receiver.fetcher.has_message > 0,
                 what="the probe to arrive or be released")
        if receiver.fetcher.has_message:
            break
        assert probe.remote_state == Delivery.RELEASED
        assert time.monotonic() < deadline, "nothing reached C via D"
        pump(producer, 0.1)
    assert route_of(take(receiver))[1] == ["0/A", "0/D", "0/C"]
    assert settle_all(conns, [probe]) == [Delivery.ACCEPTED]
    after = send_batch(5)
    assert [m.body for m in after] == list(range(5, 10))
    assert {tuple(route_of(m)[1]) for m in after} == {("0/A", "0/D", "0/C")}
    producer.close()
    consumer.close()


# 9 ---------------------------------------------------------------------------

def test_sender_credit_follows_a_consumer_on_another_router(
        start_router: StartRouter) -> None:
    net: Network = start_network(start_router, PAIR)
    producer = connect(net.url("A"))
    consumer = connect(net.url("B"))
    conns = [producer, consumer]
    sender = producer.create_sender("credit.q")
    pump(producer, 1.5)
    assert sender.link.credit == 0, "credit without a consumer anywhere"

    receiver = consumer.create_receiver("credit.q", credit=10)
    wait_all(conns, lambda: sender.link.credit > 0, what="credit after remote consumer")
    assert not sender.link.drain_mode

    receiver.close()
    left_at = time.monotonic()
    wait_all(conns, lambda: sender.link.drain_mode, timeout=8,
             what="drain after the remote consumer left")
    print(f"\ncredit drained {time.monotonic() - left_at:.2f}s after the consumer left")
    sender.link.drained()
    wait_all(conns, lambda: sender.link.credit == 0, what="credit drained")

    again = consumer.create_receiver("credit.q", credit=10, name="again")
    wait_all(conns, lambda: sender.link.credit > 0 and not sender.link.drain_mode,
             what="credit back after a consumer returned")
    delivery = sender.link.send(Message(body="after"))
    wait_all(conns, lambda: again.fetcher.has_message == 1, what="message at the new consumer")
    assert take(again).body == "after"
    assert settle_all(conns, [delivery]) == [Delivery.ACCEPTED]
    producer.close()
    consumer.close()


# 9 ---------------------------------------------------------------------------

def test_loop_guard_releases_a_message_whose_trace_is_longer_than_the_network(
        start_router: StartRouter) -> None:
    """docs/networks.md#the-loop-guard: more hops in the trace than radius + 1 (here 3,
    from the end of a line of three) is released, whether the consumer is
    local or on another router; a shorter trace is delivered."""
    net = start_network(start_router, LINE, unstripped=["A"])
    producer = connect(net.unstripped_url("A"))
    local_consumer = connect(net.url("A"))
    remote_consumer = connect(net.url("C"))
    conns = [producer, local_consumer, remote_consumer]
    receivers = {"local": local_consumer.create_receiver("guard.local", credit=10),
                 "remote": remote_consumer.create_receiver("guard.remote", credit=10)}
    long_trace = {"x-opt-qd.trace": ["0/X1", "0/X2", "0/X3", "0/X4"]}
    short_trace = {"x-opt-qd.trace": ["0/X1"]}
    for where, receiver in receivers.items():
        sender = ready_sender(conns, producer, f"guard.{where}")
        looped = sender.link.send(Message(body="looped", annotations=dict(long_trace)))
        fine = sender.link.send(Message(body="fine", annotations=dict(short_trace)))
        wait_all(conns, lambda r=receiver, d=looped: r.fetcher.has_message >= 1 and d.settled,
                 what=f"{where}: the looped message settled and the other delivered")
        assert [take(receiver).body] == ["fine"], where
        assert settle_all(conns, [looped, fine]) == [Delivery.RELEASED, Delivery.ACCEPTED], where
        assert not receiver.fetcher.has_message, where
    for conn in conns:
        conn.close()


class Capabilities(LinkOption):  # type: ignore[misc]
    """A receiving link's source capabilities."""

    def __init__(self, *names: str) -> None:
        self.names = names

    def apply(self, link: Any) -> None:
        link.source.capabilities.put_array(False, Data.SYMBOL)
        link.source.capabilities.enter()
        for name in self.names:
            link.source.capabilities.put_symbol(name)
        link.source.capabilities.exit()


def test_an_attach_from_another_router_that_no_link_route_serves_is_refused(
        start_router: StartRouter) -> None:
    """A router forwards a client's attach only along a link route; when the
    route has gone by the time it arrives, the attach is refused with
    qd:no-route-to-dest, not bound by address on the inter-router connection
    (docs/brokers.md#where-a-routed-attach-goes)."""
    net = start_network(start_router, {"A": []})
    container = Container()
    container.container_id = "Fake.Router"
    peer = BlockingConnection(f"amqp://127.0.0.1:{net['A'].ports[1]}", timeout=10,
                              container=container)
    try:
        # The control link first: without it any other attach is refused as
        # on the wrong connection role.
        peer.create_receiver(None, name="control", options=Capabilities("qd.router"))
        for receiving in (False, True):
            with pytest.raises(LinkDetached) as refused:
                if receiving:
                    peer.create_sender("gone.route/q", name="routed-in")
                else:
                    peer.create_receiver("gone.route/q", name="routed-out")
            assert refused.value.condition == "qd:no-route-to-dest"
        keys = {row["key"] for row in Management(net.url("A")).query("router.address", "key")}
        assert not any("gone.route" in key for key in keys), keys
    finally:
        peer.close()


def test_routers_tell_each_other_their_annotations_version(start_router: StartRouter) -> None:
    """Both sides of an inter-router connection send qd.annotations-version
    in OPEN, and log the peer's at debug, as qdrouterd does."""
    net = start_network(start_router, {"A": [], "B": ["A"]},
                        extra="log {\n    module: ROUTER\n    enable: debug+\n}\n")
    for router_id in ("A", "B"):
        net[router_id].wait_log(r"ROUTER \(debug\) Remote router annotations version: 1")


def test_each_priority_has_its_data_link_and_management_shows_which(
        start_router: StartRouter) -> None:
    """A message of header priority 3 crosses on the priority-3 data link, and
    router.link shows each inter-router data link's priority, as qdrouterd."""
    net = start_network(start_router, {"A": [], "B": ["A"]})
    receiver_conn = connect(net.url("B"))
    receiver = receiver_conn.create_receiver("prio/q", credit=10)
    sender_conn = connect(net.url("A"))
    sender = sender_conn.create_sender("prio/q")
    wait_all([sender_conn, receiver_conn], lambda: sender.link.credit > 0,
             what="credit across the network")
    sent = [sender.link.send(Message(body=n, priority=3)) for n in range(5)]
    pump(sender_conn, 0.3)
    for _ in range(5):
        receiver.receive(timeout=10)
        receiver.accept()
    wait_all([sender_conn, receiver_conn], lambda: all(d.settled for d in sent),
             what="the outcomes")
    client = Management(net.url("A"))
    try:
        rows = [r for r in client.query("router.link", "linkType", "linkDir", "priority",
                                        "deliveryCount")
                if r["linkType"] == "inter-router" and r["linkDir"] == "out"]
    finally:
        client.close()
    by_priority = {r["priority"]: r["deliveryCount"] for r in rows if r["priority"] is not None}
    assert sorted(by_priority) == list(range(10))
    assert by_priority[3] == 5
    sender_conn.close()
    receiver_conn.close()


def test_a_consumers_link_counts_its_deliveries_by_the_router_they_entered_at(
        start_router: StartRouter) -> None:
    """router.link's ingressHistogram, as qdrouterd's console charts it: one
    count per router, in router.node index order."""
    network = start_network(start_router, PAIR)
    a, b = (connect(network.routers[r].url) for r in ("A", "B"))
    try:
        receiver = b.create_receiver("histogram", credit=20, name="consumer")
        remote = a.create_sender("histogram", options=AtMostOnce())
        local = b.create_sender("histogram", options=AtMostOnce())
        wait_all([a, b], lambda: remote.link.credit > 0 and local.link.credit > 0,
                 what="credit on both routers")
        for n in range(3):
            remote.send(Message(body=f"from A {n}"))
        local.send(Message(body="from B"))
        wait_all([a, b], lambda: len(receiver.fetcher.incoming) == 4, what="four messages")
        mgmt = Management(network.routers["B"].url)
        try:
            nodes = sorted(mgmt.query("router.node", "id", "index"), key=lambda n: n["index"])
            [row] = [r for r in mgmt.query("router.link", "name", "linkDir", "ingressHistogram")
                     if r["name"] == "consumer"]
            inbound = [r for r in mgmt.query("router.link", "linkDir", "ingressHistogram")
                       if r["linkDir"] == "in"]
        finally:
            mgmt.close()
        assert dict(zip([n["id"] for n in nodes], row["ingressHistogram"], strict=True)) == {
            "A": 3, "B": 1}
        assert all(r["ingressHistogram"] is None for r in inbound)
    finally:
        a.close()
        b.close()


def test_a_transfers_state_reaches_every_copy_and_the_consumers_comes_back(
        start_router: StartRouter) -> None:
    """A producer's transfer that carries a non-terminal state and its data
    (an extension state, DISPATCH-1703) reaches its consumer on another
    router, and every consumer of a multicast address; the consumer's
    non-terminal state comes back to the producer before either settles."""
    network = start_network(start_router, PAIR, extra=address_conf("fanout", "multicast"))
    a, b = (connect(network.routers[r].url) for r in ("A", "B"))
    conns = [a, b]
    try:
        closest = b.create_receiver("states", credit=5, name="closest")
        fans = [b.create_receiver("fanout", credit=5, name=f"fan{n}") for n in range(2)]
        sender = ready_sender(conns, a, "states")
        fan_sender = ready_sender(conns, a, "fanout")

        def with_state(link_sender: BlockingSender, body: str, state: int) -> Delivery:
            link = link_sender.link
            delivery = link.delivery(body.encode())
            delivery.local.data = [1, 2, 3]
            delivery.update(state)
            link.send(Message(body=body).encode())
            link.advance()
            return delivery

        sent = with_state(sender, "anycast", 666)
        fanned = with_state(fan_sender, "multicast", 999)
        receivers = [closest, *fans]
        wait_all(conns, lambda: all(r.fetcher.incoming for r in receivers),
                 what="each consumer's copy")
        copies = [r.fetcher.incoming[0][1] for r in receivers]
        assert [(c.remote_state, c.remote.data) for c in copies] == [
            (666, [1, 2, 3]), (999, [1, 2, 3]), (999, [1, 2, 3])]
        copies[0].local.data = [10, 9, 8]
        copies[0].update(777)
        wait_all(conns, lambda: sent.remote_state == 777, what="the consumer's state back")
        assert sent.remote.data == [10, 9, 8]
        assert not sent.settled and not fanned.settled
    finally:
        a.close()
        b.close()
