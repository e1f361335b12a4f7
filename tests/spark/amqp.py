"""Independent proton clients for the Spark tests: a producer and a consumer in threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from proton import Delivery, Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

WAIT_S = 120.0


class _Thread:
    def __init__(self, handler: Any) -> None:
        self.container = Container(handler)
        self.thread = threading.Thread(target=self.container.run, daemon=True)

    def join(self) -> None:
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive(), "the client thread did not finish"


class Producer(MessagingHandler):  # type: ignore[misc]
    """Send messages unsettled; record each outcome; stop when all are settled."""

    def __init__(self, url: str, address: str, messages: list[Message]) -> None:
        super().__init__(auto_settle=True)
        self.url, self.address, self.messages = url, address, messages
        self.outcomes: dict[str, int] = {}
        self.attached = threading.Event()
        self.done = threading.Event()
        self._next = 0
        self._thread = _Thread(self)

    def start(self) -> Producer:
        self._thread.thread.start()
        assert self.attached.wait(WAIT_S)
        return self

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url)
        self.sender = event.container.create_sender(self.conn, self.address)

    def on_link_opened(self, event: Any) -> None:
        self.attached.set()

    def on_sendable(self, event: Any) -> None:
        while self.sender.credit and self._next < len(self.messages):
            self.sender.send(self.messages[self._next])
            self._next += 1

    def on_settled(self, event: Any) -> None:
        dlv = event.delivery
        self.outcomes[str(len(self.outcomes))] = dlv.remote_state
        if len(self.outcomes) == len(self.messages):
            self.conn.close()
            self.done.set()

    def wait(self, timeout: float = WAIT_S) -> list[int]:
        assert self.done.wait(timeout), \
            f"{len(self.outcomes)} of {len(self.messages)} messages settled"
        self._thread.join()
        return list(self.outcomes.values())


Decide = Callable[[Message, int], int]


def accept_all(message: Message, index: int) -> int:
    return int(Delivery.ACCEPTED)


class Consumer(MessagingHandler):  # type: ignore[misc]
    """Receive from an address until stopped; ``decide`` gives each message's outcome."""

    def __init__(self, url: str, address: str, decide: Decide = accept_all,
                 credit: int = 500) -> None:
        super().__init__(prefetch=credit, auto_accept=False)
        self.url, self.address, self.decide = url, address, decide
        self.messages: list[Message] = []
        self.outcomes: list[int] = []
        self.attached = threading.Event()
        self._stop = threading.Event()
        self._thread = _Thread(self)

    def start(self) -> Consumer:
        self._thread.thread.start()
        assert self.attached.wait(WAIT_S)
        return self

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url)
        event.container.create_receiver(self.conn, self.address)
        event.container.schedule(0.05, self)

    def on_link_opened(self, event: Any) -> None:
        self.attached.set()

    def on_timer_task(self, event: Any) -> None:
        if self._stop.is_set():
            self.conn.close()
        else:
            event.container.schedule(0.05, self)

    def on_message(self, event: Any) -> None:
        outcome = self.decide(event.message, len(self.messages))
        self.messages.append(event.message)
        self.outcomes.append(outcome)
        event.delivery.update(outcome)
        event.delivery.settle()

    def wait_for(self, count: int, timeout: float = WAIT_S) -> list[Message]:
        deadline = time.monotonic() + timeout
        while len(self.messages) < count:
            assert time.monotonic() < deadline, \
                f"received {len(self.messages)} of {count} messages"
            time.sleep(0.05)
        return self.messages

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
