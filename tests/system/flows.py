"""An at-least-once flow for system tests that disturb the network under load.

``AtLeastOnce`` sends numbered durable messages to an address, re-sends every
message whose outcome is not ACCEPTED (released, modified, rejected), and
receives on the same address, possibly through another router, until every
accepted message has arrived.  It runs proton's reactor in a thread of its
own, so that the test can restart brokers or kill routers meanwhile.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from proton import Delivery, Message
from proton.handlers import MessagingHandler
from proton.reactor import Container


class AtLeastOnce(MessagingHandler):  # type: ignore[misc]
    """Send ``count`` messages to ``address`` through ``producer_url`` at
    ``rate`` per second, receive them through ``consumer_url``.

    ``accepted`` holds the numbers the producer saw accepted, ``received``
    every number the consumer got (duplicates counted in ``duplicates``),
    ``outcomes`` how often each outcome came back.
    """

    def __init__(self, producer_url: str, consumer_url: str, address: str, count: int,
                 rate: float = 200.0) -> None:
        super().__init__(prefetch=50)
        self.producer_url = producer_url
        self.consumer_url = consumer_url
        self.address = address
        self.count = count
        self.interval = 1.0 / rate
        self.accepted: set[int] = set()
        self.received: set[int] = set()
        self.duplicates = 0
        self.outcomes: dict[str, int] = {}
        self.todo: deque[int] = deque(range(count))
        self.in_flight: dict[Any, int] = {}
        self.sender: Any = None
        self.connections: list[Any] = []
        self.done = threading.Event()
        self.error: str | None = None
        self._container: Container | None = None
        self._thread: threading.Thread | None = None

    # -- control from the test ---------------------------------------------------

    def start(self) -> None:
        self._container = Container(self)
        self._thread = threading.Thread(target=self._container.run, daemon=True)
        self._thread.start()

    def wait(self, timeout: float) -> None:
        """Wait until the flow completed; raise with the counts if not."""
        if not self.done.wait(timeout):
            raise AssertionError(f"flow incomplete after {timeout} s: {self.describe()}")
        assert self._thread is not None
        self._thread.join(10)
        if self.error is not None:
            raise AssertionError(f"flow failed: {self.error}; {self.describe()}")

    def describe(self) -> str:
        missing = sorted(self.accepted - self.received)[:10]
        return (f"accepted {len(self.accepted)}/{self.count}, received {len(self.received)}, "
                f"accepted but not received (first 10) {missing}, outcomes {self.outcomes}, "
                f"duplicates {self.duplicates}")

    # -- proton events -------------------------------------------------------------

    def on_start(self, event: Any) -> None:
        producer = event.container.connect(self.producer_url, reconnect=False)
        consumer = producer if self.consumer_url == self.producer_url else \
            event.container.connect(self.consumer_url, reconnect=False)
        self.connections = [producer] if consumer is producer else [producer, consumer]
        event.container.create_receiver(consumer, self.address)
        self.sender = event.container.create_sender(producer, self.address)
        event.container.schedule(self.interval, self)

    def on_timer_task(self, event: Any) -> None:
        if self.done.is_set():
            return
        sender = self.sender
        if self.todo and sender.credit > 0:
            number = self.todo.popleft()
            delivery = sender.send(Message(body=str(number), durable=True,
                                           properties={"n": number}))
            self.in_flight[delivery] = number
        event.container.schedule(self.interval, self)

    def _outcome(self, event: Any, name: str) -> None:
        self.outcomes[name] = self.outcomes.get(name, 0) + 1
        number = self.in_flight.pop(event.delivery, None)
        if number is None:
            return
        if name == "accepted":
            self.accepted.add(number)
        else:
            self.todo.append(number)
        self._check()

    def on_accepted(self, event: Any) -> None:
        self._outcome(event, "accepted")

    def on_rejected(self, event: Any) -> None:
        self._outcome(event, "rejected")

    def on_released(self, event: Any) -> None:
        state = event.delivery.remote_state
        self._outcome(event, "modified" if state == Delivery.MODIFIED else "released")

    def on_message(self, event: Any) -> None:
        number = int(event.message.properties["n"])
        if number in self.received:
            self.duplicates += 1
        self.received.add(number)
        self._check()

    def on_transport_error(self, event: Any) -> None:
        self.error = f"transport error: {event.transport.condition}"
        self._finish()

    def on_link_error(self, event: Any) -> None:
        self.error = f"link error: {event.link.remote_condition}"
        self._finish()

    def _check(self) -> None:
        if len(self.accepted) == self.count and self.accepted <= self.received:
            self._finish()

    def _finish(self) -> None:
        if not self.done.is_set():
            self.done.set()
            for connection in self.connections:
                connection.close()


__all__ = ["AtLeastOnce"]
