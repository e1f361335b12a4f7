"""A raw receiver: reads each delivery's encoded bytes without decoding them."""

from __future__ import annotations

from typing import Any

from proton import Delivery
from proton.handlers import MessagingHandler


class RawReceiver(MessagingHandler):  # type: ignore[misc]
    """Collects the encoded bytes of each delivery and accepts it."""

    def __init__(self) -> None:
        super().__init__(prefetch=100, auto_accept=False)
        self.received: list[bytes] = []
        self.aborted = 0

    def on_delivery(self, event: Any) -> None:
        delivery = event.delivery
        if delivery.aborted:
            self.aborted += 1
            delivery.settle()
            return
        if delivery.partial:
            return
        self.received.append(bytes(event.link.recv(delivery.pending)))
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
