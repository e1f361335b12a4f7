"""Exchanges on the data path: each message an exchange took, forwarded by
its subject (docs/routing.md#exchanges).

Owns what happens to a message once an exchange's consumer took it, after
the wake-up that delivered it: its subject matched against the bindings
(``addressing.Exchange.next_hops``), one pre-settled copy to each next hop
that has a destination, else to the alternate, and the producer's
delivery settled, ACCEPTED when a copy went anywhere, RELEASED when none
did (qdrouterd leaves that delivery unsettled).  A copy carries the next
hop's address and phase as ``x-opt-qd.to`` and ``x-opt-qd.phase``, and no
ingress or trace: it is routed as a new message from this router, as an
anonymous sender's message is (``Forwarder.route``).  A large message
that is still arriving is forwarded the same way as it arrives: its copies
stream (docs/routing.md#large-messages), and its producer is held while a
copy is too far behind, as for any streamed copy.  Binding the
exchanges' addresses is the core's (``router.core.exchanges``); this module
must not choose destinations itself.
"""

from __future__ import annotations

import logging

from addressing import Exchange, NextHop
from router.adapter.forwarding.forwarder import Forwarder
from router.core import (
    UNAVAILABLE,
    AddressRecord,
    Fanout,
    InLink,
    LinkId,
    MessageFormatError,
    MessageInfo,
    MessageReader,
    OutLink,
    Router,
    Stream,
    Transfer,
    annotate_upward,
    subject_of,
)
from router.core.edges import EDGE_KEY
from router.core.settlement import ACCEPTED, REJECTED, RELEASED

log = logging.getLogger(__name__)


class ExchangeForwarding:
    """Forwards what the exchanges took.

    Args:
        router: the routing core (its exchanges and address records).
        forwarder: routes the copies and settles the producers' deliveries.
        raise_internal_errors: a message that fails unexpectedly is logged and
            released; tests raise its exception instead.
    """

    def __init__(self, router: Router, forwarder: Forwarder,
                 raise_internal_errors: bool = False) -> None:
        self.router = router
        self.exchanges = router.exchanges
        self.forwarder = forwarder
        self.raise_internal_errors = raise_internal_errors
        self.reader = MessageReader()
        # Copies enter routing on this link, pre-settled and addressed by
        # their annotations, as an anonymous sender's messages.
        self.sender = InLink(LinkId(0), self.exchanges.conn, name="$exchanges", address=None,
                             record=None)

    @property
    def pending(self) -> bool:
        return bool(self.exchanges.pending)

    def serve(self) -> None:
        """Forward every message the exchanges took since the last call, and
        those the copies bring to other exchanges of this router (the core
        refuses bindings that go round in a circle, so this ends)."""
        pending = self.exchanges.pending
        while pending:
            taken = pending[:]
            pending.clear()
            for exchange, consumer, data, ref in taken:
                try:
                    self._forward(exchange, consumer, data, ref)
                except Exception:
                    log.exception("internal error forwarding a message of exchange %r",
                                  exchange.name)
                    if self.raise_internal_errors:
                        raise
                    self.forwarder.consumed(ref, RELEASED)

    def _forward(self, exchange: Exchange, consumer: OutLink, data: bytes | Stream,
                 ref: Transfer | Fanout | None) -> None:
        consumer.delivered += 1
        exchange.received += 1
        stream: Stream | None = None
        if isinstance(data, Stream):
            # A large message still arriving: its copies stream from its
            # first bytes, and the bytes kept since for this consumer follow
            # them (``Sender``); the producer is held while a copy is behind.
            stream = data
            head = stream.heads.pop(consumer, None)
            if head is None:  # aborted meanwhile: no copy, no outcome due
                exchange.dropped += 1
                return
            stream.waiting.remove(consumer)
            data = head
        try:
            self._forward_one(exchange, data, ref, stream)
        finally:
            if stream is not None and not stream.waiting:
                stream.backlog = bytearray()

    def _forward_one(self, exchange: Exchange, data: bytes, ref: Transfer | Fanout | None,
                     stream: Stream | None) -> None:
        try:
            info = self.reader.scan(data, read_to=False)
            subject = subject_of(data, info)
        except MessageFormatError as exc:
            log.info("exchange %r: message rejected: %s", exchange.name, exc)
            exchange.dropped += 1
            self.forwarder.consumed(ref, REJECTED)
            return
        forwarded = False
        for hop in exchange.next_hops(subject):
            if self._send(exchange, hop, data, info, stream):
                forwarded = True
        alternate = exchange.alternate
        if not forwarded and alternate is not None and self._send(exchange, alternate, data,
                                                                  info, stream):
            forwarded = True
            exchange.diverted += 1
        if forwarded:
            exchange.forwarded += 1
            self.forwarder.consumed(ref, ACCEPTED)
        else:
            exchange.dropped += 1
            log.debug("exchange %r: message with subject %r went nowhere", exchange.name,
                      subject)
            self.forwarder.consumed(ref, RELEASED)

    def _send(self, exchange: Exchange, hop: NextHop, data: bytes, info: MessageInfo,
              stream: Stream | None) -> bool:
        """Route a copy to ``hop`` if it has a destination; whether it had."""
        if not self._reachable(hop):
            return False
        try:
            copy = annotate_upward(data, info, to=hop.address, phase=hop.phase or None)
        except MessageFormatError as exc:
            log.info("exchange %r: message not forwarded: %s", exchange.name, exc)
            return False
        log.debug("exchange %r forwarding a message to %r (phase %d)", exchange.name,
                  hop.address, hop.phase)
        self.forwarder.route(None, self.sender, copy, stream)
        return True

    def _reachable(self, hop: NextHop) -> bool:
        """Whether a message for ``hop`` finds a destination: a consumer here or
        on another router, or, on an edge router, the way up its uplink."""
        found = self.router.lookup(hop.address, hop.phase)
        if found is UNAVAILABLE:
            return False
        if isinstance(found, AddressRecord) and found.has_destination:
            return True
        if self.router.uplink is not None:
            beyond = self.router.records.get(EDGE_KEY)
            return beyond is not None and bool(beyond.remotes)
        return False


__all__ = ["ExchangeForwarding"]
