"""Two AMQP connections joined in memory, for unit tests of the adapter's
per-message parts: the router's side, whose deliveries the parts get as the
raw pointers the adapter works on, and a peer's, seen through the binding.

No socket and no loop: ``pump`` moves the bytes each transport has to write
to the other until neither has any.  The core's records of the router's
links are made here too, so a part can be given what the adapter would
give it.
"""

from __future__ import annotations

import itertools
from typing import Any

from proton import Connection, Delivery, Link, Message, Transport

from router.core import (
    AddressRecord,
    ConnectionId,
    IncomingAccepted,
    InLink,
    LinkId,
    OutgoingAccepted,
    OutLink,
    Router,
)
from router.core import Connection as CoreConnection

_ids = itertools.count(1)


def pump(one: Transport, other: Transport) -> None:
    """Move the bytes each of two transports has to write to the other,
    until neither has any."""
    for _ in range(50):
        moved = False
        for out, into in ((one, other), (other, one)):
            pending = out.pending()
            if pending > 0:
                into.push(out.peek(pending))
                out.pop(pending)
                moved = True
        if not moved:
            return
    raise AssertionError("the two sides kept talking")


class Wire:
    """The router's connection and a peer's, joined in memory."""

    def __init__(self) -> None:
        self.router = Connection()
        self.router_transport = Transport(Transport.SERVER)
        self.router_transport.bind(self.router)
        self.peer = Connection()
        self.peer_transport = Transport()
        self.peer_transport.bind(self.peer)
        self.peer.open()
        self.router.open()
        self.router_session = self.router.session()
        self.router_session.open()
        self.pump()
        self.peer_session = self.peer.session_head(0)
        assert self.peer_session is not None
        self.peer_session.open()
        #: The core's record of the router's side (its handle stands for the
        #: adapter's connection: what the parts mark as having output).
        self.core = CoreConnection(ConnectionId(next(_ids)), strip_in=False, strip_out=False)
        self.core.handle = self
        #: As the adapter's connection says: not closing.
        self.closed = False

    def pump(self) -> None:
        """Move bytes both ways until neither side has more to write."""
        pump(self.peer_transport, self.router_transport)

    def router_link(self, name: str) -> Link:
        """The router's end of the link the peer attached as ``name``."""
        link = self.router.link_head(0)
        while link is not None and link.name != name:
            link = link.next(0)
        assert link is not None, f"no link {name}"
        return link

    def _answer(self, name: str) -> Link:
        """The router's end of ``name``, opened with the peer's termini."""
        self.pump()
        link = self.router_link(name)
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.open()
        return link

    def _pair(self, peer: Link, address: str, credit: int) -> Link:
        """Attach the peer's ``peer`` to ``address`` and the router's end of
        it; the receiving end gives ``credit``."""
        if peer.is_sender:
            peer.target.address = address
        else:
            peer.source.address = address
        peer.open()
        ours = self._answer(peer.name)
        (ours if peer.is_sender else peer).flow(credit)
        self.pump()
        return ours

    def _record(self, incoming: bool, core: Router | None, name: str, address: str,
                record: AddressRecord | None, ours: Link) -> InLink | OutLink:
        """The router's record of the link whose router end is ``ours``:
        the one ``core``'s attach decision binds, or a bare one on
        ``record``."""
        if core is None:
            kind = InLink if incoming else OutLink
            return kind(LinkId(next(_ids)), self.core, name=name, address=address,
                        record=record, handle=ours._impl)
        if incoming:
            accepted: object = core.incoming_link_attached(
                self.core, name=name, address=address, handle=ours._impl)[0]
            assert isinstance(accepted, IncomingAccepted), accepted
            return accepted.link
        accepted = core.outgoing_link_attached(
            self.core, name=name, address=address, handle=ours._impl)[0]
        assert isinstance(accepted, OutgoingAccepted), accepted
        return accepted.link

    # -- a producer: the peer sends, the router receives ------------------------------

    def producer(self, address: str = "q", record: AddressRecord | None = None,
                 credit: int = 10, core: Router | None = None) -> tuple[Link, InLink]:
        """A peer's sender and the router's record of it (an ``InLink``
        whose handle is the router's receiver), with ``credit``; with a
        ``core``, the record is the one its attach decision binds."""
        name = f"p{next(_ids)}"
        sender = self.peer_session.sender(name)
        il = self._record(True, core, name, address, record, self._pair(sender, address, credit))
        assert isinstance(il, InLink)
        return sender, il

    def arrive(self, sender: Link, body: str, settled: bool = False) -> tuple[Delivery, Delivery]:
        """The peer sends ``body``: its delivery, and the router's as it
        arrived (nothing read from it yet)."""
        delivery = sender.delivery(f"t{next(_ids)}".encode())
        sender.send(Message(body=body).encode())
        sender.advance()
        if settled:
            delivery.settle()
        self.pump()
        incoming = self.router_link(sender.name).current
        assert incoming is not None
        return delivery, incoming

    def send(self, sender: Link, body: str, settled: bool = False) -> tuple[Delivery, Any]:
        """The peer sends ``body``: its delivery, and the router's (a raw
        ``pn_delivery_t``), read as the forwarder reads it."""
        delivery, incoming = self.arrive(sender, body, settled)
        receiver = incoming.link
        receiver.recv(incoming.pending)
        receiver.advance()
        return delivery, incoming._impl

    # -- a consumer: the router sends, the peer receives ------------------------------

    def consumer(self, address: str = "q", record: AddressRecord | None = None,
                 credit: int = 10, core: Router | None = None) -> tuple[Link, OutLink]:
        """A peer's receiver with ``credit`` and the router's record of it
        (an ``OutLink`` whose handle is the router's sender); with a
        ``core``, the record is the one its attach decision binds."""
        name = f"c{next(_ids)}"
        receiver = self.peer_session.receiver(name)
        sender = self._pair(receiver, address, credit)
        ol = self._record(False, core, name, address, record, sender)
        assert isinstance(ol, OutLink)
        ol.credit = sender.credit
        return receiver, ol

    def received(self, receiver: Link) -> tuple[Delivery, object]:
        """The delivery the peer's ``receiver`` has now, and its message's body."""
        self.pump()
        delivery = receiver.current
        assert delivery is not None, "nothing arrived"
        data = receiver.recv(delivery.pending)
        receiver.advance()
        return delivery, body(data)


def record(address: str = "q", redelivery_limit: int = 0) -> AddressRecord:
    """A mobile address's record, balanced."""
    from addressing import Distribution

    return AddressRecord("M0" + address, address, Distribution.BALANCED, None,
                         redelivery_limit)


def body(data: bytes) -> object:
    message = Message()
    message.decode(data)
    return message.body


def encoded(text: str) -> bytes:
    return bytes(Message(body=text).encode())


__all__ = ["Wire", "body", "encoded", "pump", "record"]
