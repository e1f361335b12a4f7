"""Settlement, as a state machine driving a real router in-process.

A hypothesis ``RuleBasedStateMachine`` runs a real ``Engine`` (epoll loop,
forwarder, routing core) single-threaded, with proton clients on socket
pairs (``tests/property/inproc.py``).  Producers (targeted or anonymous)
and consumers (unsettled or pre-settled receivers) attach to a balanced
address ``q.a`` and a multicast address ``mc.a``, on shared or separate
connections; producers send unsettled or pre-settled messages (anonymous
ones also to ``q.nowhere``, which nobody consumes), settle first (with or
without an outcome) or detach; consumers grant or drain credit, give
outcomes with or without settling, settle without an outcome, or detach;
connections vanish without an AMQP close.  After every step, once the wire
is quiet, it checks (docs/routing.md#credit,
docs/routing.md#when-nothing-can-receive,
docs/routing.md#settlement-and-dispositions):

* the engine is really idle: a further wake-up with nothing to read or
  write sends no client anything (work left for the next timer tick would
  reach clients up to a second late);
* the router settles each unsettled delivery of a producer at most once (by
  counting ``settled=true`` dispositions on the wire), never one the
  producer settled first or sent pre-settled;
* it settles it exactly when it is due: at once when no consumer was bound
  to the address at send time (RELEASED), and otherwise once the copy
  (anycast) or every copy (multicast) was settled by its consumer, arrived
  pre-settled, or lost with its consumer -- never before;
* the outcome is the consumer's (anycast; none if the consumer settled
  without one, as qdrouterd passes that through) or the folded outcome of
  the copies (multicast: rejected > accepted > modified > released, a copy
  settled without an outcome counting as accepted), a copy lost unsent
  counting RELEASED and one lost unsettled MODIFIED; MODIFIED toward a
  producer always carries ``delivery-failed``; an unsettled delivery shows
  its consumer's outcome (anycast) or, once every copy has one, the folded
  outcome (multicast), and nothing before;
* copies go only to consumers bound at send time, one per consumer
  (multicast) or one in all (anycast); copies of a pre-settled delivery
  arrive settled; when the producer settled first the router settles the
  copies still open with the producer's outcome, and when a multicast
  producer goes away, with MODIFIED;
* a sender's credit plus its unsettled deliveries never exceed the link
  capacity, equal it while its address has a consumer (or it is
  anonymous), and a targeted sender without a consumer has no credit or
  has been asked to drain; a draining consumer ends with no credit;
* the router's own records agree: its unsettled maps match what is open on
  the wire, no outgoing link sits on queued copies with credit, links
  detached or dropped are forgotten;
* at the end, once every consumer has detached, nothing is left unsettled,
  and once every producer has too, no link and no address record remains.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule
from proton import Delivery, Event, Link, Message

from addressing import AddressSpec, AddressTable, Distribution
from router.core import InLink, OutLink, RoutedEnd
from tests.property.inproc import Client, Harness

ACCEPTED = int(Delivery.ACCEPTED)
REJECTED = int(Delivery.REJECTED)
RELEASED = int(Delivery.RELEASED)
MODIFIED = int(Delivery.MODIFIED)
NO_STATE = 0
NAMES = {NO_STATE: "no state", ACCEPTED: "ACCEPTED", REJECTED: "REJECTED",
         RELEASED: "RELEASED", MODIFIED: "MODIFIED"}

BALANCED = "q.a"
MULTICAST = "mc.a"
NOWHERE = "q.nowhere"  # never has a consumer; only anonymous producers send to it
CONSUMED = (BALANCED, MULTICAST)

# Connections and links alive at a time.
MAX_CLIENTS = 3
MAX_PRODUCERS = 2
MAX_CONSUMERS = 3

# Multicast folding order (docs/routing.md#multicast-outcomes).
_RANK = {RELEASED: 0, MODIFIED: 1, ACCEPTED: 2, REJECTED: 3}


def fold(outcomes: Iterable[int]) -> int:
    return max(outcomes, key=_RANK.__getitem__)


def folds(choices: list[set[int]]) -> set[int]:
    """Every folded outcome the per-copy choices allow."""
    return {fold(combo) for combo in itertools.product(*choices)}


def named(states: Iterable[int]) -> str:
    return "{" + ", ".join(sorted(NAMES.get(s, hex(s)) for s in states)) + "}"


@dataclass(eq=False)
class Consumer:
    name: str
    client: Client
    link: Any
    address: str
    presettled: bool
    copies: dict[str, Copy] = field(default_factory=dict)  # by producer delivery tag
    # open copies by their proton delivery (router tags need not be UTF-8,
    # which proton's ``Delivery.tag`` insists on)
    by_delivery: dict[Any, Copy] = field(default_factory=dict)
    detached: bool = False

    @property
    def gone(self) -> bool:
        return self.detached or not self.client.alive


@dataclass(eq=False)
class Copy:
    """A message as one consumer received it."""

    tag: str  # the producer's delivery tag, carried as the message body
    consumer: Consumer
    delivery: Any  # ``None`` once settled on the consumer's side
    arrived_settled: bool
    outcome: int = NO_STATE  # what the consumer set
    failed: bool = False  # the delivery-failed flag of a MODIFIED it set
    consumer_settled: bool = False
    router_settled: bool = False
    router_state: int = NO_STATE

    @property
    def open(self) -> bool:
        return self.delivery is not None


@dataclass(eq=False)
class Producer:
    name: str
    client: Client
    link: Any
    address: str | None  # ``None``: anonymous
    honours_drain: bool
    sent: list[Sent] = field(default_factory=list)
    detached: bool = False

    @property
    def gone(self) -> bool:
        return self.detached or not self.client.alive


@dataclass(eq=False)
class Sent:
    """One delivery a producer sent."""

    tag: str
    producer: Producer
    address: str
    presettled: bool
    targets: tuple[Consumer, ...]  # consumers bound to the address when it was sent
    delivery: Any  # ``None`` once settled on the producer's side
    settled_first: bool = False  # the producer settled before the router did
    first_state: int = NO_STATE  # the outcome it gave then
    router_settled: bool = False
    remote_state: int = NO_STATE
    failed: bool = False

    @property
    def multicast(self) -> bool:
        return self.address.startswith("mc.")

    @property
    def outstanding(self) -> bool:
        """Sent unsettled and settled by nobody yet."""
        return not (self.presettled or self.settled_first or self.router_settled)


class SettlementMachine(RuleBasedStateMachine):
    """Clients of one router; every rule ends with ``settle_down()``: pump
    until the wire is quiet, then check every invariant.  ``clean`` is False
    while a step is unfinished, so that ``teardown`` does not pile its own
    checks on a failure."""

    def __init__(self) -> None:
        super().__init__()
        self.harness: Harness | None = None
        self.capacity = 250
        self.clients: list[Client] = []
        self.producers: list[Producer] = []
        self.consumers: list[Consumer] = []
        self.sent: dict[str, Sent] = {}
        self.producer_by_link: dict[str, Producer] = {}
        self.consumer_by_link: dict[str, Consumer] = {}
        self.counter = itertools.count(1)
        self.clean = False

    # -- plumbing ----------------------------------------------------------------

    @property
    def h(self) -> Harness:
        assert self.harness is not None
        return self.harness

    def live_clients(self) -> list[Client]:
        return [c for c in self.clients if c.alive]

    def live_producers(self) -> list[Producer]:
        return [p for p in self.producers if not p.gone]

    def live_consumers(self) -> list[Consumer]:
        return [c for c in self.consumers if not c.gone]

    def client_for(self, choice: int | None) -> Client:
        """A live connection (``choice`` < their number) or a new one (always
        for ``None``)."""
        live = self.live_clients()
        if choice is not None and (choice < len(live) or len(live) >= MAX_CLIENTS):
            return live[choice % len(live)]
        client = self.h.connect(f"c{next(self.counter)}")
        client.on_event = self.on_event
        self.clients.append(client)
        return client

    def step(self, text: str) -> None:
        self.clean = False
        note(text)

    def settle_down(self) -> None:
        self.h.pump()
        self.check()
        self.clean = True

    # -- client events -------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        if event.type == Event.DELIVERY:
            delivery = event.delivery
            if delivery.link.is_receiver:
                self.on_copy(delivery)
            else:
                self.on_outcome(delivery)
        elif event.type == Event.LINK_FLOW:
            link = event.link
            producer = self.producer_by_link.get(link.name) if link.is_sender else None
            if (producer is not None and producer.honours_drain and link.drain_mode
                    and link.credit > 0):
                link.drained()

    def on_copy(self, delivery: Any) -> None:
        link = delivery.link
        consumer = self.consumer_by_link[link.name]
        copy = consumer.by_delivery.get(delivery._impl)
        if copy is None:
            if not delivery.readable or delivery.partial:
                return
            data = link.recv(delivery.pending)
            link.advance()
            message = Message()
            message.decode(data)
            tag = str(message.body)
            assert tag not in consumer.copies, f"{consumer.name} got {tag} twice"
            copy = Copy(tag=tag, consumer=consumer, delivery=delivery,
                        arrived_settled=bool(delivery.settled))
            consumer.copies[tag] = copy
            if copy.arrived_settled:
                delivery.settle()
                copy.delivery = None
            else:
                consumer.by_delivery[delivery._impl] = copy
            return
        if copy.open and delivery.settled:
            copy.router_settled = True
            copy.router_state = int(delivery.remote_state)
            del consumer.by_delivery[delivery._impl]
            delivery.settle()
            copy.delivery = None

    def on_outcome(self, delivery: Any) -> None:
        sent = self.sent.get(str(delivery.tag))
        if sent is None or sent.delivery is None:
            return
        sent.remote_state = int(delivery.remote_state)
        if delivery.settled:
            sent.router_settled = True
            sent.failed = bool(delivery.remote.failed)
            delivery.settle()
            sent.delivery = None

    # -- rules -----------------------------------------------------------------------

    @initialize(capacity=st.sampled_from([2, 3, 250]),
                consumers=st.lists(st.tuples(st.sampled_from(CONSUMED), st.integers(0, 3)),
                                   max_size=MAX_CONSUMERS),
                producers=st.lists(st.sampled_from([BALANCED, MULTICAST, None]),
                                   max_size=MAX_PRODUCERS))
    def start(self, capacity: int, consumers: list[tuple[str, int]],
              producers: list[str | None]) -> None:
        """A router, and the consumers and producers present from the start,
        each on a connection of its own."""
        table = AddressTable()
        table.add(AddressSpec(prefix="mc", distribution=Distribution.MULTICAST))
        self.capacity = capacity
        self.harness = Harness(addresses=table, link_capacity=capacity)
        note(f"linkCapacity {capacity}")
        for address, credit in consumers:
            self.add_consumer(address, None, credit, presettled=False)
        for producer in producers:
            self.add_producer(producer, None, honours_drain=True)
        self.h.pump()
        self.check()
        self.clean = True

    @precondition(lambda self: len(self.live_producers()) < MAX_PRODUCERS)
    @rule(address=st.sampled_from([BALANCED, MULTICAST, None]), choice=st.integers(0, 3),
          honours_drain=st.booleans())
    def attach_producer(self, address: str | None, choice: int, honours_drain: bool) -> None:
        self.clean = False
        self.add_producer(address, choice, honours_drain)
        self.settle_down()

    def add_producer(self, address: str | None, choice: int | None, honours_drain: bool) -> None:
        client = self.client_for(choice)
        name = f"P{next(self.counter)}"
        note(f"{name} attaches on {client.name} to {address or 'anonymous'}"
             f"{'' if honours_drain else ' (ignores drain)'}")
        link = client.session.sender(name)
        if address is not None:
            link.target.address = address
        link.open()
        producer = Producer(name, client, link, address, honours_drain)
        self.producers.append(producer)
        self.producer_by_link[name] = producer

    @precondition(lambda self: len(self.live_consumers()) < MAX_CONSUMERS)
    @rule(address=st.sampled_from(CONSUMED), choice=st.integers(0, 3), credit=st.integers(0, 3),
          presettled=st.sampled_from([False, False, True]))
    def attach_consumer(self, address: str, choice: int, credit: int, presettled: bool) -> None:
        self.clean = False
        self.add_consumer(address, choice, credit, presettled)
        self.settle_down()

    def add_consumer(self, address: str, choice: int | None, credit: int,
                     presettled: bool) -> None:
        client = self.client_for(choice)
        name = f"C{next(self.counter)}"
        note(f"{name} attaches on {client.name} to {address} with credit {credit}"
             f"{' (pre-settled)' if presettled else ''}")
        link = client.session.receiver(name)
        link.source.address = address
        if presettled:
            link.snd_settle_mode = Link.SND_SETTLED
        link.open()
        if credit:
            link.flow(credit)
        consumer = Consumer(name, client, link, address, presettled)
        self.consumers.append(consumer)
        self.consumer_by_link[name] = consumer

    def senders(self) -> list[Producer]:
        return [p for p in self.live_producers() if p.link.credit > 0]

    @precondition(lambda self: bool(self.senders()))
    @rule(which=st.integers(0, 3), to=st.sampled_from([BALANCED, MULTICAST] * 2 + [NOWHERE]),
          batch=st.lists(st.sampled_from([False, False, True]), min_size=1, max_size=3))
    def send(self, which: int, to: str, batch: list[bool]) -> None:
        """Send up to ``len(batch)`` messages at once (``True``: pre-settled)."""
        candidates = self.senders()
        producer = candidates[which % len(candidates)]
        link = producer.link
        address = producer.address or to
        targets = tuple(c for c in self.live_consumers() if c.address == address)
        batch = batch[:link.credit]
        tags = [f"{producer.name}.{len(producer.sent) + i}" for i in range(len(batch))]
        self.step(f"{producer.name} sends {', '.join(tags)} to {address}"
                  f"{' (' + ', '.join('pre-settled' if p else 'unsettled' for p in batch) + ')'}"
                  f"; bound: {[c.name for c in targets]}")
        for tag, presettled in zip(tags, batch, strict=True):
            delivery = link.delivery(tag.encode())
            message = Message(body=tag)
            if producer.address is None:
                message.address = to
            link.send(message.encode())
            link.advance()
            if presettled:
                delivery.settle()
            sent = Sent(tag, producer, address, presettled, targets,
                        None if presettled else delivery)
            producer.sent.append(sent)
            self.sent[tag] = sent
        self.settle_down()

    @precondition(lambda self: bool(self.live_consumers()))
    @rule(which=st.integers(0, 3), credit=st.integers(1, 3))
    def grant(self, which: int, credit: int) -> None:
        live = self.live_consumers()
        consumer = live[which % len(live)]
        self.step(f"{consumer.name} grants {credit} more credit")
        consumer.link.flow(credit)
        self.settle_down()

    def holders(self) -> list[Consumer]:
        return [c for c in self.live_consumers() if any(k.open for k in c.copies.values())]

    @precondition(lambda self: bool(self.holders()))
    @rule(which=st.integers(0, 3), pick=st.integers(0, 5),
          outcome=st.sampled_from([NO_STATE, ACCEPTED, REJECTED, RELEASED, MODIFIED]),
          settle=st.booleans(), failed=st.booleans())
    def dispose(self, which: int, pick: int, outcome: int, settle: bool,
                failed: bool = False) -> None:
        holders = self.holders()
        consumer = holders[which % len(holders)]
        open_copies = [k for k in consumer.copies.values() if k.open]
        copy = open_copies[pick % len(open_copies)]
        if copy.outcome != NO_STATE:
            outcome = NO_STATE  # a terminal outcome is not changed, only settled
        if outcome == NO_STATE:
            settle = True
        self.step(f"{consumer.name} {'settles' if settle else 'updates'} its copy of "
                  f"{copy.tag}" + (f" with {NAMES[outcome]}" if outcome else ""))
        if outcome != NO_STATE:
            if outcome == MODIFIED:
                copy.delivery.local.failed = failed
                copy.failed = failed
            copy.delivery.update(outcome)
            copy.outcome = outcome
        if settle:
            del consumer.by_delivery[copy.delivery._impl]
            copy.delivery.settle()
            copy.delivery = None
            copy.consumer_settled = True
        self.settle_down()

    def open_sent(self) -> list[Sent]:
        return [s for p in self.live_producers() for s in p.sent if s.delivery is not None]

    @precondition(lambda self: bool(self.open_sent()))
    @rule(pick=st.integers(0, 7), outcome=st.sampled_from([NO_STATE, ACCEPTED, RELEASED]))
    def producer_settles_first(self, pick: int, outcome: int) -> None:
        candidates = self.open_sent()
        sent = candidates[pick % len(candidates)]
        self.step(f"{sent.producer.name} settles {sent.tag} first"
                  + (f" with {NAMES[outcome]}" if outcome else ""))
        if outcome != NO_STATE:
            sent.delivery.update(outcome)
        sent.delivery.settle()
        sent.delivery = None
        sent.settled_first = True
        sent.first_state = outcome
        self.settle_down()

    @precondition(lambda self: bool(self.live_consumers()))
    @rule(which=st.integers(0, 3))
    def drain(self, which: int) -> None:
        """A consumer asks for its credit to be used up or given back
        (docs/routing.md#credit)."""
        live = self.live_consumers()
        consumer = live[which % len(live)]
        self.step(f"{consumer.name} drains its credit of {consumer.link.credit}")
        consumer.link.drain(0)
        self.h.pump()
        assert consumer.link.credit == 0, (
            f"{consumer.name} still has credit {consumer.link.credit} after draining")
        consumer.link.drain_mode = False
        self.check()
        self.clean = True

    def endpoints(self) -> list[Producer | Consumer]:
        return [*self.live_producers(), *self.live_consumers()]

    @precondition(lambda self: bool(self.endpoints()))
    @rule(which=st.integers(0, 5), drop=st.booleans())
    def leave(self, which: int, drop: bool) -> None:
        """A link detaches, or its connection drops its socket without an AMQP
        close (taking the connection's other links with it)."""
        live = self.endpoints()
        endpoint = live[which % len(live)]
        if drop:
            client = endpoint.client
            links = [e.name for e in live if e.client is client]
            self.step(f"{client.name} drops its socket (links {', '.join(links)})")
            client.drop()
        else:
            self.step(f"{endpoint.name} detaches")
            endpoint.link.close()
            endpoint.detached = True
        self.settle_down()

    # -- expectations ----------------------------------------------------------------

    def copy_result(self, sent: Sent, consumer: Consumer) -> tuple[bool, set[int], int]:
        """For one copy: is it finished, the outcomes it may count as, and the
        outcome its consumer reported without settling (``NO_STATE`` if none)."""
        copy = consumer.copies.get(sent.tag)
        if copy is None:
            # Never sent to the consumer: released when the consumer goes
            # (docs/routing.md#when-a-link-or-connection-goes).
            return consumer.gone, {RELEASED}, NO_STATE
        if copy.arrived_settled:
            return True, {ACCEPTED}, NO_STATE
        if copy.consumer_settled:
            return True, {copy.outcome}, NO_STATE
        if consumer.gone:
            # Sent, unsettled, then lost: MODIFIED
            # (docs/routing.md#when-a-link-or-connection-goes); a consumer that had
            # already given its outcome may have that one counted instead.
            return True, {MODIFIED} | ({copy.outcome} - {NO_STATE}), NO_STATE
        return False, set(), copy.outcome

    def expectation(self, sent: Sent) -> tuple[bool | None, set[int], set[int]]:
        """Whether the router must have settled ``sent`` (``None``: cannot tell),
        the outcomes it may settle with, and the states it may show meanwhile."""
        if not sent.targets:
            return True, {RELEASED}, {NO_STATE}
        if sent.multicast:
            results = [self.copy_result(sent, c) for c in sent.targets]
            if all(done for done, _, _ in results):
                # A copy settled without an outcome counts as accepted.
                choices = [{ACCEPTED if s == NO_STATE else s for s in allowed}
                           for _, allowed, _ in results]
                return True, folds(choices), set()
            if all(done or reported for done, _, reported in results):
                choices = [({ACCEPTED if s == NO_STATE else s for s in allowed}
                            if done else {reported}) for done, allowed, reported in results]
                return False, set(), folds(choices)
            return False, set(), {NO_STATE}
        holders = [c for c in sent.targets if sent.tag in c.copies]
        if holders:
            done, allowed, reported = self.copy_result(sent, holders[0])
            return done, allowed, {reported}
        gone = [c for c in sent.targets if c.gone]
        if len(gone) == len(sent.targets):
            return True, {RELEASED}, {NO_STATE}
        # The copy is queued somewhere; if it was for a consumer now gone it is
        # RELEASED, otherwise it is still waiting for credit.
        return (None if gone else False), {RELEASED}, {NO_STATE}

    # -- invariants -----------------------------------------------------------------

    def check(self) -> None:
        for sent in self.sent.values():
            self.check_sent(sent)
        for consumer in self.consumers:
            for copy in consumer.copies.values():
                self.check_copy(copy)
        for producer in self.live_producers():
            self.check_credit(producer)
        self.check_router()

    def check_sent(self, sent: Sent) -> None:
        settlements = sent.producer.client.wire.settlements.get(sent.tag, 0)
        assert settlements <= 1, f"{sent.tag} settled {settlements} times by the router"
        if sent.presettled:
            assert settlements == 0, f"pre-settled {sent.tag} got a settlement"
            return
        if sent.settled_first:
            assert settlements == 0, f"{sent.tag} settled by the router after its producer"
            return
        if sent.producer.gone:
            return  # its outcome goes nowhere (docs/routing.md#when-a-link-or-connection-goes)
        assert settlements == int(sent.router_settled), sent.tag
        done, allowed, shown = self.expectation(sent)
        if sent.router_settled:
            assert done is not False, (
                f"{sent.tag} settled ({NAMES.get(sent.remote_state)}) before its copies were "
                f"settled or lost: {self.describe(sent)}")
            assert sent.remote_state in allowed, (
                f"{sent.tag} settled with {NAMES.get(sent.remote_state, sent.remote_state)}, "
                f"expected one of {named(allowed)}: {self.describe(sent)}")
            if sent.remote_state == MODIFIED:
                self.check_failed(sent)
        else:
            assert done is not True, f"{sent.tag} left unsettled: {self.describe(sent)}"
            assert sent.remote_state in shown, (
                f"{sent.tag} shows {NAMES.get(sent.remote_state, sent.remote_state)} while "
                f"unsettled, expected {named(shown)}: {self.describe(sent)}")

    def check_failed(self, sent: Sent) -> None:
        """An anycast consumer's own MODIFIED reaches the producer with the
        consumer's delivery-failed flag (Hop passes it through; qdrouterd
        forces it on, docs/compatibility.md#modified-outcomes); a MODIFIED the
        router makes itself (a copy lost unsettled, a multicast fold) always
        carries delivery-failed."""
        copies = [c.copies[sent.tag] for c in sent.targets if sent.tag in c.copies]
        if not sent.multicast and len(copies) == 1 and copies[0].outcome == MODIFIED:
            copy = copies[0]
            if copy.consumer_settled:
                assert sent.failed == copy.failed, (
                    f"{sent.tag}: delivery-failed {sent.failed}, consumer set {copy.failed}")
            return
        assert sent.failed, f"{sent.tag}: router-made MODIFIED without delivery-failed"

    def describe(self, sent: Sent) -> str:
        parts = []
        for consumer in sent.targets:
            copy = consumer.copies.get(sent.tag)
            state = "not received" if copy is None else (
                "arrived settled" if copy.arrived_settled else
                f"outcome {NAMES[copy.outcome]}"
                f"{', settled' if copy.consumer_settled else ''}"
                f"{', settled by router' if copy.router_settled else ''}")
            parts.append(f"{consumer.name}{' (gone)' if consumer.gone else ''}: {state}")
        return "; ".join(parts) or "no consumer bound when sent"

    def check_copy(self, copy: Copy) -> None:
        sent = self.sent[copy.tag]
        consumer = copy.consumer
        assert consumer in sent.targets, (
            f"{consumer.name} got {sent.tag}, sent when only "
            f"{[c.name for c in sent.targets]} were bound")
        if not sent.multicast:
            holders = [c.name for c in sent.targets if sent.tag in c.copies]
            assert len(holders) == 1, f"anycast {sent.tag} reached {holders}"
        if sent.presettled:
            assert copy.arrived_settled, f"copy of pre-settled {sent.tag} arrived unsettled"
        producer_left = sent.producer.gone
        if copy.router_settled and not consumer.detached:
            # (Settling the copies of a detached link is only housekeeping.)
            assert sent.settled_first or (sent.multicast and producer_left), (
                f"router settled {consumer.name}'s copy of {sent.tag} on its own")
            expected = sent.first_state if sent.settled_first else MODIFIED
            assert copy.router_state == expected, (
                f"{consumer.name}'s copy of {sent.tag} settled with "
                f"{NAMES.get(copy.router_state)}, not {NAMES[expected]}, when its producer "
                f"{'settled first' if sent.settled_first else 'left'} (6.1, 6.2, 6.4)")
        if copy.arrived_settled and not sent.presettled:
            assert consumer.presettled or sent.settled_first or producer_left, (
                f"unsettled {sent.tag} reached {consumer.name} settled")
        if not consumer.gone and (sent.settled_first or (sent.multicast and producer_left)):
            assert not copy.open, (
                f"{consumer.name}'s copy of {sent.tag} still open after its producer "
                f"{'settled' if sent.settled_first else 'left'} (6.1, 6.2, 6.4)")

    def check_credit(self, producer: Producer) -> None:
        link = producer.link
        credit = int(link.credit)
        outstanding = sum(1 for s in producer.sent if s.outstanding)
        assert credit + outstanding <= self.capacity, (
            f"{producer.name}: credit {credit} + unsettled {outstanding} > {self.capacity}")
        consumed = any(c.address == producer.address for c in self.live_consumers())
        if producer.address is None or consumed:
            assert credit + outstanding == self.capacity, (
                f"{producer.name}: credit {credit} + unsettled {outstanding} != "
                f"{self.capacity} while it can send")
        else:
            assert credit == 0 or link.drain_mode, (
                f"{producer.name} holds credit {credit} for {producer.address}, "
                "which has no consumer, and was not asked to drain")

    def check_router(self) -> None:
        engine = self.h.engine
        by_name: dict[str, InLink | OutLink | RoutedEnd] = {
            link.name: link for link in engine.events.links.table.values()}
        expected = {p.name for p in self.live_producers()} | {
            c.name for c in self.live_consumers()}
        assert set(by_name) == expected, f"router links {sorted(by_name)} != {sorted(expected)}"
        for producer in self.live_producers():
            link = by_name[producer.name]
            assert isinstance(link, InLink)
            outstanding = sum(1 for s in producer.sent if s.outstanding)
            assert len(link.unsettled) == outstanding, (
                f"router holds {len(link.unsettled)} unsettled for {producer.name}, "
                f"wire says {outstanding}")
        for consumer in self.live_consumers():
            link = by_name[consumer.name]
            assert isinstance(link, OutLink)
            open_copies = sum(1 for k in consumer.copies.values() if k.open)
            assert len(link.unsettled) == open_copies, (
                f"router holds {len(link.unsettled)} unsettled for {consumer.name}, "
                f"wire says {open_copies}")
            assert not (link.queue and link.credit > 0), (
                f"{consumer.name}: {len(link.queue)} copies queued with credit {link.credit}")
            assert link.credit == consumer.link.credit, (
                f"{consumer.name}: router credit {link.credit} != {consumer.link.credit}")
        routed = {conn.sock for conn in engine.transports.conns.values()}
        assert len(routed) == len(self.live_clients()), (
            f"router has {len(routed)} connections, {len(self.live_clients())} are alive")

    # -- the end ----------------------------------------------------------------------

    def teardown(self) -> None:
        try:
            if self.harness is not None and self.clean:
                self.finish()
        finally:
            if self.harness is not None:
                self.harness.close()

    def finish(self) -> None:
        """Every consumer leaves: nothing may stay in limbo."""
        note("teardown: every consumer detaches")
        for consumer in self.live_consumers():
            consumer.link.close()
            consumer.detached = True
        self.h.pump()
        self.check()
        for producer in self.live_producers():
            for sent in producer.sent:
                assert not sent.outstanding, f"{sent.tag} never settled: {self.describe(sent)}"
        for link in self.h.engine.events.links.table.values():
            assert isinstance(link, InLink), f"{link!r} outlived its consumer"
            assert not link.unsettled, f"{link!r} still holds {len(link.unsettled)} deliveries"
        note("teardown: every producer detaches")
        for producer in self.live_producers():
            producer.link.close()
            producer.detached = True
        self.h.pump()
        table = self.h.engine.events.links.table
        assert not table, f"links left: {list(table.values())}"
        assert not self.h.router.records, f"address records left: {self.h.router.records}"


SettlementMachine.TestCase.settings = settings(max_examples=200, stateful_step_count=30,
                                               deadline=None)
TestSettlement = SettlementMachine.TestCase
