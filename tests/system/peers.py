"""Small AMQP containers for system tests where no packaged broker will do.

``TransactionalPeer`` coordinates transactions, which RabbitMQ does not: it
answers a coordinator link's declare with ``declared`` and a transaction id
and its discharge with ``accepted``, and records every message it receives
with the transaction it was sent in.  It runs proton's reactor in a thread
of its own and connects to the router (a route-container listener), or
listens for the router's connector.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from proton import Condition, Delivery, Described, Message, symbol
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector

DECLARE = (symbol("amqp:declare:list"), 0x31)
DISCHARGE = (symbol("amqp:discharge:list"), 0x32)
DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34


class Peer(MessagingHandler):  # type: ignore[misc]
    """A proton container in a thread of its own that answers every attach
    with the termini it was sent (as a broker answering for its nodes)."""

    def __init__(self, url: str, *, listen: bool, container_id: str, prefetch: int) -> None:
        super().__init__(prefetch=prefetch, auto_accept=False)
        self.url = url
        self.listen = listen
        self.lock = threading.Lock()
        self.dynamic_nodes = 0
        self.aborted = 0
        self._container = Container(self)
        self._container.container_id = container_id
        # The reactor is not thread-safe: the test stops it through an event.
        self._injector = EventInjector()
        self._container.selectable(self._injector)
        self._thread = threading.Thread(target=self._container.run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._injector.trigger(ApplicationEvent("stop_peer"))
        self._thread.join(10)

    def on_stop_peer(self, event: Any) -> None:
        self._container.stop()

    def on_start(self, event: Any) -> None:
        if self.listen:
            event.container.listen(self.url)
        else:
            event.container.connect(self.url, reconnect=False)

    def on_aborted(self, event: Any) -> None:
        self.aborted += 1

    def on_link_opening(self, event: Any) -> None:
        link = event.link
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        for terminus in (link.source, link.target):
            if terminus.dynamic:  # a node made for this link
                self.dynamic_nodes += 1
                terminus.address = f"dynamic.{self.dynamic_nodes}"


class TransactionalPeer(Peer):
    """A transaction coordinator and message sink.

    ``declared`` lists the transaction ids it gave out, ``discharged`` the
    ``(id, failed)`` discharges, ``received`` ``(address, body, id)`` for
    each message (``id`` None outside a transaction).
    """

    def __init__(self, url: str, *, listen: bool = False, container_id: str = "txn-peer"
                 ) -> None:
        super().__init__(url, listen=listen, container_id=container_id, prefetch=10)
        self.declared: list[bytes] = []
        self.discharged: list[tuple[bytes, bool]] = []
        self.received: list[tuple[str, Any, bytes | None]] = []
        self._ids = itertools.count(1)

    def on_message(self, event: Any) -> None:
        delivery = event.delivery
        body = event.message.body
        if isinstance(body, Described) and body.descriptor in DECLARE:
            txn = f"txn-{next(self._ids)}".encode()
            with self.lock:
                self.declared.append(txn)
            delivery.local.data = [txn]
            delivery.update(DECLARED)
            delivery.settle()
            return
        if isinstance(body, Described) and body.descriptor in DISCHARGE:
            with self.lock:
                self.discharged.append((bytes(body.value[0]), bool(body.value[1])))
            self.accept(delivery)
            return
        within: bytes | None = None
        if delivery.remote_state == TRANSACTIONAL_STATE and delivery.remote.data:
            within = bytes(delivery.remote.data[0])
        with self.lock:
            self.received.append((event.link.remote_target.address, body, within))
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()




class MisbehavingPeer(Peer):
    """A container that takes messages but plays with credit and sessions.

    On every link it receives on it grants credit one at a time and, in
    turn, asks to drain with credit, asks to drain with none, grants in
    bursts, and every ``end_every``-th message ends the whole session with
    an error instead of settling.  It listens on ``url``.  ``accepted``
    counts the messages it accepted, ``sessions_ended`` the sessions it ended.
    """

    def __init__(self, url: str, *, end_every: int = 7) -> None:
        super().__init__(url, listen=True, container_id="misbehaving-peer", prefetch=0)
        self.end_every = end_every
        self.accepted = 0
        self.received = 0
        self.sessions_ended = 0

    def on_link_opened(self, event: Any) -> None:
        if event.link.is_receiver:
            event.link.flow(1)

    def on_message(self, event: Any) -> None:
        self.received += 1
        link = event.link
        if self.received % self.end_every == 0:
            self.sessions_ended += 1
            event.session.condition = Condition("amqp:internal-error", "misbehaving on purpose")
            event.session.close()
            return
        event.delivery.update(Delivery.ACCEPTED)
        event.delivery.settle()
        self.accepted += 1
        step = self.received % 4
        if step == 0:
            link.drain(2)  # drain with credit
        elif step == 1:
            link.drain(0)  # drain with nothing new
            link.flow(1)
        elif step == 2:
            link.flow(1)
            link.flow(2)  # a burst
        else:
            link.flow(1)




class SourcePeer(Peer):
    """A container that sends ``messages`` on every link it sends on, as its
    receiver gives credit, and answers a drain by giving the rest back
    (``drained``).  ``drains`` counts the drains it answered."""

    def __init__(self, url: str, messages: list[str]) -> None:
        super().__init__(url, listen=True, container_id="source-peer", prefetch=0)
        self.messages = list(messages)
        self.drains = 0

    def on_sendable(self, event: Any) -> None:
        self._send(event.link)

    def on_link_flow(self, event: Any) -> None:
        link = event.link
        if link.is_sender:
            self._send(link)

    def _send(self, link: Any) -> None:
        while link.credit > 0 and self.messages:
            link.send(Message(body=self.messages.pop(0)))
        if link.drain_mode and link.credit > 0 and not self.messages:
            link.drained()
            self.drains += 1



class StingyPeer(Peer):
    """A container that grants ``credit`` once on every link it receives on,
    accepts what arrives, and never grants more."""

    def __init__(self, url: str, credit: int) -> None:
        super().__init__(url, listen=True, container_id="stingy-peer", prefetch=0)
        self.credit = credit
        self.accepted = 0

    def on_link_opened(self, event: Any) -> None:
        if event.link.is_receiver:
            event.link.flow(self.credit)

    def on_message(self, event: Any) -> None:
        event.delivery.update(Delivery.ACCEPTED)
        event.delivery.settle()
        self.accepted += 1


class SinkPeer(Peer):
    """A container that connects to the router (a route-container listener),
    keeps credit on every link it receives on, and accepts and keeps what
    arrives (``bodies``)."""

    def __init__(self, url: str, container_id: str) -> None:
        super().__init__(url, listen=False, container_id=container_id, prefetch=10)
        self.bodies: list[object] = []
        self._connection: Any = None

    def on_connection_opened(self, event: Any) -> None:
        self._connection = event.connection

    def leave(self) -> None:
        """Close the connection to the router (the thread keeps running)."""
        self._injector.trigger(ApplicationEvent("leave"))

    def on_leave(self, event: Any) -> None:
        if self._connection is not None:
            self._connection.close()

    def on_message(self, event: Any) -> None:
        with self.lock:
            self.bodies.append(event.message.body)
        event.delivery.update(Delivery.ACCEPTED)
        event.delivery.settle()


class DetachAnsweringPeer(Peer):
    """A container that answers a detach (closed false) of any of its links
    by closing the link (``close``: its nodes do not outlive a detach) or by
    detaching it."""

    def __init__(self, url: str, *, close: bool) -> None:
        super().__init__(url, listen=True, container_id="detach-peer", prefetch=0)
        self.close = close
        self.detached = 0

    def on_link_remote_detach(self, event: Any) -> None:
        self.detached += 1
        if self.close:
            event.link.close()
        else:
            event.link.detach()


__all__ = ["DetachAnsweringPeer", "MisbehavingPeer", "Peer", "SinkPeer", "SourcePeer",
           "StingyPeer", "TransactionalPeer"]
