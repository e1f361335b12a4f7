"""A producer faster than its consumers (docs/reliability.md#overload): the
router holds what credit lets in and no more.  Unsettled, the producer's
credit is the bound: it never has more than ``linkCapacity`` messages
unsettled, the router never holds more, and every message is accepted once.
Pre-settled, the slow consumer's queue is shed at ``linkCapacity``: every
message sent is either delivered, in order, or counted as dropped, and a
fast consumer of the same multicast address is not held up by a slow one.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import AtMostOnce, Container

from tests.system.conftest import StartRouter
from tests.system.harness import router_conf
from tests.system.mgmt import Management

CAPACITY = 100
LISTENER = f"""\
listener {{
    host: 127.0.0.1
    port: 0
    saslMechanisms: ANONYMOUS
    authenticatePeer: no
    linkCapacity: {CAPACITY}
}}
"""
MULTICAST = """
address {
    prefix: over.mc
    distribution: multicast
}
"""
#: Seconds the producer runs flat out.
PRODUCING_S = 6.0
#: Messages a second each slow consumer grants credit for.
SLOW_RATE = 400


class Overload(MessagingHandler):  # type: ignore[misc]
    """One producer sending whenever it has credit for ``PRODUCING_S``, and
    consumers each granting credit at ``rates[i]`` messages a second (0:
    as fast as they can); then the consumers drain what is left."""

    def __init__(self, url: str, address: str, presettled: bool, rates: list[int]) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.url, self.address, self.presettled, self.rates = url, address, presettled, rates
        self.sent = 0
        self.settled = 0
        self.accepted = 0
        self.max_unsettled = 0
        self.received: list[list[int]] = [[] for _ in rates]
        self.producing = True
        self.draining = False
        self.error: str | None = None
        self.ready = threading.Event()
        #: Set by the test thread: the clients close at the next tick.
        self.stop_requested = threading.Event()

    def on_start(self, event: Any) -> None:
        self.container = event.container
        consumers = event.container.connect(self.url)
        self.receivers = [event.container.create_receiver(consumers, self.address,
                                                          name=f"consumer-{i}")
                          for i in range(len(self.rates))]
        self.producer = event.container.connect(self.url)
        options = AtMostOnce() if self.presettled else None
        self.sender = event.container.create_sender(self.producer, self.address,
                                                    options=options)
        self.started = time.monotonic()
        self.container.schedule(0.01, self)

    def on_timer_task(self, event: Any) -> None:
        if self.stop_requested.is_set():
            self.stop()
            return
        # Between batches of events: the credit a batch of frames brought may
        # be used (on_sendable) before the same batch's settlements are seen.
        self.max_unsettled = max(self.max_unsettled, self.sent - self.settled)
        if self.producing and time.monotonic() - self.started > PRODUCING_S:
            self.producing = False
            self.draining = True
        for receiver, rate in zip(self.receivers, self.rates, strict=True):
            want = 1000 if rate == 0 or self.draining else max(1, rate // 100)
            if receiver.credit < want:
                receiver.flow(want - receiver.credit)
        self.ready.set()
        if self.draining and self._all_in():
            self.stop()
            return
        self.container.schedule(0.01, self)

    def _all_in(self) -> bool:
        if self.presettled:
            return False  # the test decides, from the router's counts
        return self.settled == self.sent and all(len(r) == self.sent for r in self.received)

    def on_sendable(self, event: Any) -> None:
        sender = self.sender
        while self.producing and sender.credit > 0:
            sender.send(Message(id=self.sent, body=b"x" * 100))
            self.sent += 1

    def on_settled(self, event: Any) -> None:
        self.settled += 1

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1

    def on_message(self, event: Any) -> None:
        index = int(event.receiver.name.rsplit("-", 1)[1])
        self.received[index].append(int(event.message.id))
        if not self.presettled:
            self.accept(event.delivery)

    def on_transport_error(self, event: Any) -> None:
        self.error = str(event.transport.condition)

    def stop(self) -> None:
        self.sender.connection.close()
        for receiver in self.receivers:
            receiver.connection.close()


def _run(hop_url: str, handler: Overload) -> threading.Thread:
    thread = threading.Thread(target=Container(handler).run, daemon=True)
    thread.start()
    assert handler.ready.wait(10), "the clients did not start"
    return thread


def _links(mgmt: Management, address: str) -> list[dict[str, Any]]:
    return [row for row in mgmt.query("router.link", "linkDir", "owningAddr", "linkName",
                                      "undeliveredCount", "unsettledCount",
                                      "droppedPresettledCount", "deliveryCount")
            if row["owningAddr"] and row["owningAddr"].endswith(address)]


def test_unsettled_producer_is_held_by_credit(start_router: StartRouter) -> None:
    hop = start_router(router_conf(listener=LISTENER))
    handler = Overload(hop.url, "over.anycast", False, [SLOW_RATE])
    thread = _run(hop.url, handler)
    mgmt = Management(hop.url)
    held = 0
    while handler.producing:
        for row in _links(mgmt, "over.anycast"):
            if row["linkDir"] == "out":
                held = max(held, row["undeliveredCount"] + row["unsettledCount"])
        time.sleep(0.2)
    mgmt.close()
    thread.join(30)
    assert not thread.is_alive(), "the consumer did not drain the rest"
    assert handler.error is None
    # The producer ran ahead of its consumer ...
    assert handler.sent > SLOW_RATE * PRODUCING_S / 2
    assert held > CAPACITY / 2
    # ... but no further than its credit: the router held no more.
    assert handler.max_unsettled <= CAPACITY
    assert held <= CAPACITY
    # And nothing was lost: each message accepted, received once, in order.
    assert handler.accepted == handler.sent
    assert handler.received[0] == list(range(handler.sent))


def _drained(mgmt: Management, address: str, sent: int, received: list[list[int]]
             ) -> list[dict[str, Any]]:
    """The consumers' links once each has either delivered or dropped every
    message sent and none waits."""
    deadline = time.monotonic() + 20
    while True:
        rows = [r for r in _links(mgmt, address) if r["linkDir"] == "out"]
        counts = {r["linkName"]: r for r in rows}
        if len(counts) == len(received) and all(
                counts[f"consumer-{i}"]["undeliveredCount"] == 0
                and len(got) + counts[f"consumer-{i}"]["droppedPresettledCount"] == sent
                for i, got in enumerate(received)):
            return rows
        if time.monotonic() > deadline:
            raise AssertionError(f"not drained: sent {sent}, received "
                                 f"{[len(r) for r in received]}, links {rows}")
        time.sleep(0.2)


@pytest.mark.parametrize("address", ["over.anycast", "over.mc.one"])
def test_presettled_copies_are_shed_at_link_capacity(start_router: StartRouter,
                                                     address: str) -> None:
    hop = start_router(router_conf(MULTICAST, listener=LISTENER))
    handler = Overload(hop.url, address, True, [SLOW_RATE])
    thread = _run(hop.url, handler)
    mgmt = Management(hop.url)
    queued = 0
    while handler.producing:
        for row in _links(mgmt, address):
            if row["linkDir"] == "out":
                queued = max(queued, row["undeliveredCount"])
        time.sleep(0.2)
    rows = _drained(mgmt, address, handler.sent, handler.received)
    mgmt.close()
    handler.stop_requested.set()
    thread.join(10)
    got = handler.received[0]
    dropped = rows[0]["droppedPresettledCount"]
    assert handler.error is None
    # Far more was sent than the consumer took: the rest was shed, counted.
    assert handler.sent > 2 * len(got)
    assert dropped == handler.sent - len(got) > 0
    # The queue never held more than linkCapacity copies (one more on the way in).
    assert queued <= CAPACITY + 1
    # What the consumer got is in the order sent, each once.
    assert got == sorted(set(got))


def test_slow_multicast_consumer_does_not_hold_up_a_fast_one(start_router: StartRouter
                                                            ) -> None:
    hop = start_router(router_conf(MULTICAST, listener=LISTENER))
    handler = Overload(hop.url, "over.mc.two", True, [0, SLOW_RATE])
    thread = _run(hop.url, handler)
    mgmt = Management(hop.url)
    while handler.producing:
        time.sleep(0.2)
    rows = {r["linkName"]: r for r in _drained(mgmt, "over.mc.two", handler.sent,
                                                handler.received)}
    mgmt.close()
    handler.stop_requested.set()
    thread.join(10)
    fast, slow = handler.received
    assert handler.error is None
    assert len(slow) < handler.sent / 2
    assert rows["consumer-1"]["droppedPresettledCount"] == handler.sent - len(slow)
    # The fast consumer kept up, not waiting behind the slow one: whatever
    # it missed was shed from its own queue (its own client fell behind).
    assert len(fast) >= 0.5 * handler.sent
    assert len(fast) > 4 * len(slow)
    assert rows["consumer-0"]["droppedPresettledCount"] == handler.sent - len(fast)
    assert fast == sorted(set(fast)) and slow == sorted(set(slow))

