"""A consumer that sees a delivery's bytes as they arrive, frame by frame.

Driven by hand over a plain socket with proton's engine and a collector,
so the test decides when it reads (a consumer that falls behind) and sees
every transfer: partial ones, aborted ones, complete ones.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from proton import Collector, Connection, Delivery, Event, Transport


class StreamConsumer:
    """Receives from ``address`` with ``credit``; accepts each complete message."""

    def __init__(self, port: int, address: str, credit: int = 10) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.transport = Transport()
        self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.connection = Connection()
        self.collector = Collector()
        self.connection.collect(self.collector)
        self.transport.bind(self.connection)
        self.connection.open()
        session = self.connection.session()
        session.open()
        self.link = session.receiver(f"stream-consumer-{address}")
        self.link.source.address = address
        self.link.target.address = address
        self.link.open()
        if credit:
            self.link.flow(credit)
        #: Bytes of the delivery still arriving, messages complete, and for
        #: each aborted delivery the bytes that had come before the abort.
        self.arriving = bytearray()
        self.complete: list[bytes] = []
        self.aborted: list[int] = []
        self.closed = False

    def pump(self) -> None:
        """Write what is pending, read what has come, handle the events."""
        while self.transport.pending() > 0:
            try:
                sent = self.sock.send(self.transport.peek(self.transport.pending()))
            except BlockingIOError:
                break
            self.transport.pop(sent)
        while True:
            capacity = self.transport.capacity()
            if capacity <= 0:
                break
            try:
                data = self.sock.recv(min(capacity, 65536))
            except BlockingIOError:
                break
            if not data:
                self.transport.close_tail()
                self.closed = True
                break
            self.transport.push(data)
        while True:
            event = self.collector.peek()
            if event is None:
                break
            if event.type == Event.DELIVERY:
                self._delivery(event.delivery)
            self.collector.pop()

    def _delivery(self, _event_delivery: Delivery) -> None:
        """Take what has come of the link's deliveries, in order: an event may
        name a delivery already taken, or come before the one it names is
        the link's current one."""
        while True:
            delivery = self.link.current
            if delivery is None:
                return
            if delivery.aborted:
                self.aborted.append(len(self.arriving))
                self.arriving = bytearray()
                delivery.settle()
                self.link.flow(1)
                continue
            pending = delivery.pending
            if pending:
                self.arriving += self.link.recv(pending)
            if delivery.partial:
                return
            self.complete.append(bytes(self.arriving))
            self.arriving = bytearray()
            delivery.update(Delivery.ACCEPTED)
            self.link.advance()
            delivery.settle()
            self.link.flow(1)

    def close(self) -> None:
        self.sock.close()


def run_until(condition: Callable[[], bool], pumps: list[Callable[[], None]],
              timeout: float = 10.0, what: str = "condition") -> None:
    """Call every pump until ``condition()`` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        for pump in pumps:
            pump()
        time.sleep(0.001)
