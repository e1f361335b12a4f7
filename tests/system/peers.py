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

from proton import Delivery, Described, symbol
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector

DECLARE = (symbol("amqp:declare:list"), 0x31)
DISCHARGE = (symbol("amqp:discharge:list"), 0x32)
DECLARED = 0x33
TRANSACTIONAL_STATE = 0x34


class TransactionalPeer(MessagingHandler):  # type: ignore[misc]
    """A transaction coordinator and message sink.

    ``declared`` lists the transaction ids it gave out, ``discharged`` the
    ``(id, failed)`` discharges, ``received`` ``(address, body, id)`` for
    each message (``id`` None outside a transaction).
    """

    def __init__(self, url: str, *, listen: bool = False, container_id: str = "txn-peer"
                 ) -> None:
        super().__init__(prefetch=10, auto_accept=False)
        self.url = url
        self.listen = listen
        self.declared: list[bytes] = []
        self.discharged: list[tuple[bytes, bool]] = []
        self.received: list[tuple[str, Any, bytes | None]] = []
        self._ids = itertools.count(1)
        self._container = Container(self)
        self._container.container_id = container_id
        # The reactor is not thread-safe: the test stops it through an event.
        self._injector = EventInjector()
        self._container.selectable(self._injector)
        self._thread = threading.Thread(target=self._container.run, daemon=True)
        self._connection: Any = None
        self.lock = threading.Lock()

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
            self._connection = event.container.connect(self.url, reconnect=False)

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


__all__ = ["TransactionalPeer"]
