"""Relaying link-routed links: the per-delivery path of a routed pair
(docs/brokers.md#the-routed-pair).

Owns passing everything between the two links of a pair without parsing a
message: each transfer with its delivery tag (refused above 32 bytes), its
bytes as they arrive (a multi-frame message streams through, an aborted one
is aborted on the other side), its settlement and any delivery state it
carries (a transactional state); dispositions both ways; credit granted by
the receiving side and drain, and the sender's "drained" back.  When one
link of a pair goes away it settles what passed through it: a producer
whose message went to a receiver that left is told MODIFIED (RELEASED when
it never left the router, or when the producer does not take MODIFIED);
copies of a departed producer's messages carry on, a partial one aborted.

Decisions about the pair itself (answers, detaches) are the core's
(``router.core.linkrouting``); this module must not make them.
"""

from __future__ import annotations

from typing import Any

from router.adapter.forwarding.accel import SETTLED, pass_outcome, relay_whole
from router.adapter.forwarding.outcomes import copy_disposition, settle_with
from router.adapter.pending import Pending, ReceiveBuffer
from router.adapter.pn import lib
from router.core import OUTCOME_INDEX, RoutedEnd, count_outcome
from router.core.settlement import ACCEPTED, MODIFIED, REJECTED, RELEASED

MAX_TAG = 32

pn_delivery = lib.pn_delivery
pn_delivery_tag = lib.pn_delivery_tag
pn_delivery_pending = lib.pn_delivery_pending
pn_delivery_partial = lib.pn_delivery_partial
pn_delivery_aborted = lib.pn_delivery_aborted
pn_delivery_settled = lib.pn_delivery_settled
pn_delivery_settle = lib.pn_delivery_settle
pn_delivery_remote_state = lib.pn_delivery_remote_state
pn_delivery_local_state = lib.pn_delivery_local_state
pn_link_recv = lib.pn_link_recv
pn_link_send = lib.pn_link_send
pn_link_advance = lib.pn_link_advance
pn_link_current = lib.pn_link_current
pn_link_credit = lib.pn_link_credit


class Relay:
    """Passes deliveries, dispositions and credit between the two links of
    each link-routed pair.

    Args:
        pending: the wake-up's shared work (connections to write).
        buffer: what incoming bytes are read into.
    """

    def __init__(self, pending: Pending, buffer: ReceiveBuffer) -> None:
        self.dirty = pending.output
        self.oversized = pending.oversized
        self.buffer = buffer

    def relay(self, d: Any, end: RoutedEnd, n: int, flags: int, state: int) -> None:
        """A PN_DELIVERY event on a routed link, with its pending bytes, flags
        and remote state as ``accel.next_event`` found them."""
        if end.receiving:
            if not flags and n and state == 0 and d not in end.deliveries:
                self._relay_whole(d, end, n)
            else:
                self._relay_transfer(d, end)
        else:
            self._relay_disposition(d, end, flags & SETTLED, state)

    def _relay_whole(self, d: Any, end: RoutedEnd, n: int) -> None:
        """A new, complete, unsettled transfer with no state of its own: the
        common case, passed on in one call."""
        partner = end.partner
        pair = end.pair
        buffer = self.buffer
        if partner is None or partner.handle is None or pair is None or not pair.open \
                or n > end.max_size or n > buffer.size:
            self._relay_transfer(d, end)  # refused, or too large: the general path
            return
        od = relay_whole(d, end.handle, partner.handle, buffer.cbuf, n, MAX_TAG)
        if not od:
            self._refuse(d, end, REJECTED, "amqp:invalid-field", "delivery tag length exceeded")
            return
        end.deliveries[d] = od
        partner.deliveries[od] = d
        end.delivered += 1
        partner.delivered += 1
        end.size = 0
        self.dirty.add(partner.conn.handle)

    def _relay_transfer(self, d: Any, end: RoutedEnd) -> None:
        """A transfer (or an update of one) from the sender on ``end``."""
        od = end.deliveries.get(d)
        partner = end.partner
        n = pn_delivery_pending(d)
        if od is None:
            pair = end.pair
            if end.max_size < 0:
                # What follows a message above the size limit, before the link
                # and connection close.
                pn_delivery_settle(d)
                return
            if partner is None or partner.handle is None or pair is None or not pair.open:
                self._refuse(d, end, RELEASED)
                return
            tag = pn_delivery_tag(d)
            if tag.size > MAX_TAG:
                self._refuse(d, end, REJECTED, "amqp:invalid-field",
                             "delivery tag length exceeded")
                return
            if not n and not pn_delivery_partial(d) and not lib.pn_delivery_aborted(d):
                # A transfer with no message at all (AMQP 1.0 section 3.2: a
                # message has a body): not passed on, and the credit it took
                # is given back, since the container never saw it.
                self._refuse(d, end, REJECTED, "amqp:decode-error", "invalid message format")
                lib.pn_link_flow(end.handle, 1)
                return
            od = pn_delivery(partner.handle, tag)
            state = pn_delivery_remote_state(d)
            if state:  # a state on the transfer itself, e.g. transactional
                copy_disposition(od, d, state)
            end.deliveries[d] = od
            partner.deliveries[od] = d
            end.size = 0
            end.delivered += 1
            partner.delivered += 1
            if pn_delivery_settled(d):
                end.presettled += 1
                partner.presettled += 1
        assert partner is not None
        lptr = end.handle
        if n:
            buffer = self.buffer
            if n > buffer.size:
                buffer.grow(n)
            # pn_link_send copies what it is given: pass the receive buffer itself.
            got = pn_link_recv(lptr, buffer.cbuf, n)
            if got > 0:
                size = end.size + got
                if size > end.max_size:
                    self._oversized(d, od, end)
                    return
                end.size = size
                pn_link_send(partner.handle, buffer.cbuf, got)
        self.dirty.add(partner.conn.handle)
        if pn_delivery_partial(d):
            return
        settled = pn_delivery_settled(d)
        if settled and pn_delivery_aborted(d):
            # proton settles an aborted transfer; the copy is aborted too
            # (docs/routing.md#aborted-deliveries).
            if pn_link_current(lptr) == d:
                pn_link_advance(lptr)
            lib.pn_delivery_abort(od)
            del end.deliveries[d]
            partner.deliveries.pop(od, None)
            pn_delivery_settle(d)
            return
        # Complete: both links move on to the next delivery, once.  Bytes read
        # just now that completed it mean it was not advanced before.
        if n or pn_link_current(lptr) == d:
            pn_link_advance(lptr)
            pn_link_advance(partner.handle)
        if settled:
            state = pn_delivery_remote_state(d)
            if state and state != pn_delivery_local_state(od):
                copy_disposition(od, d, state)
            pn_delivery_settle(od)
            pn_delivery_settle(d)
            del end.deliveries[d]
            partner.deliveries.pop(od, None)
            self.dirty.add(end.conn.handle)

    def _oversized(self, d: Any, od: Any, end: RoutedEnd) -> None:
        """A message above the sender's size limit (policy ``maxMessageSize``,
        docs/security.md#policy), as the router refuses any: the copy begun is
        aborted, the message rejected, and the link and its connection are
        closed (``Pending.oversized``)."""
        partner = end.partner
        lib.pn_delivery_abort(od)
        del end.deliveries[d]
        if partner is not None:
            partner.deliveries.pop(od, None)
            self.dirty.add(partner.conn.handle)
        end.max_size = -1
        self._refuse(d, end, REJECTED, "amqp:link:message-size-exceeded",
                     "Message size exceeded")
        self.oversized.append(end)

    def _refuse(self, d: Any, end: RoutedEnd, state: int, condition: str | None = None,
                description: str | None = None) -> None:
        """Give a transfer the router's own outcome (nothing to relay it to)."""
        lptr = end.handle
        buffer = self.buffer
        while pn_delivery_pending(d) > 0 and pn_link_recv(lptr, buffer.cbuf, buffer.size) > 0:
            pass
        if pn_link_current(lptr) == d and not pn_delivery_partial(d):
            pn_link_advance(lptr)
        count_outcome(end, state)
        settle_with(d, state, condition, description)
        self.dirty.add(end.conn.handle)

    def _relay_disposition(self, od: Any, end: RoutedEnd, settled: int, state: int) -> None:
        """The receiver on ``end`` updated or settled a delivery the router
        sent (``state``: its remote state)."""
        d = end.deliveries.get(od)
        if d is None:
            if settled:
                pn_delivery_settle(od)
            return
        if settled and state in (ACCEPTED, RELEASED):
            pass_outcome(d, od, state)  # the common case: update and both settled
        else:
            if state and state != pn_delivery_local_state(d):
                copy_disposition(d, od, state)
            if settled:
                pn_delivery_settle(d)
                pn_delivery_settle(od)
        partner = end.partner
        if settled:
            index = OUTCOME_INDEX.get(state)
            if index is not None:
                end.outcomes[index] += 1
                if partner is not None:
                    partner.outcomes[index] += 1
            del end.deliveries[od]
            if partner is not None:
                partner.deliveries.pop(d, None)
        if partner is not None and partner.conn.handle is not None:
            self.dirty.add(partner.conn.handle)

    def relay_flow(self, end: RoutedEnd) -> None:
        """A PN_LINK_FLOW on a routed link: pass credit, drain and drained on."""
        partner = end.partner
        pair = end.pair
        if partner is None or partner.handle is None or pair is None or not pair.open:
            return
        if end.receiving:
            # The sender on ``end`` answered a drain: the partner's receiver
            # learns that its credit is used up.
            if lib.pn_link_get_drain(partner.handle) and pn_link_credit(end.handle) <= 0:
                lib.pn_link_drained(partner.handle)
                self.dirty.add(partner.conn.handle)
            return
        # The receiver on ``end`` gave credit: the sender on the partner gets as
        # much outstanding, and the same drain flag.
        want = pn_link_credit(end.handle)
        have = pn_link_credit(partner.handle)
        if want > have:
            lib.pn_link_flow(partner.handle, want - have)
            self.dirty.add(partner.conn.handle)
        drain = bool(lib.pn_link_get_drain(end.handle))
        if drain != partner.drain:
            partner.drain = drain
            lib.pn_link_set_drain(partner.handle, drain)
            self.dirty.add(partner.conn.handle)

    def routed_gone(self, end: RoutedEnd) -> None:
        """``end`` was detached by its peer or lost with its connection: settle
        what passed through it (docs/routing.md#when-a-link-or-connection-goes)."""
        deliveries = end.deliveries
        end.deliveries = {}
        partner = end.partner
        if partner is None:
            return
        if end.receiving:
            # Its producer left: copies carry on unlinked, a partial one is aborted.
            for od in deliveries.values():
                partner.deliveries.pop(od, None)
                if partner.handle is not None and pn_link_current(partner.handle) == od:
                    lib.pn_delivery_abort(od)  # not advanced: still incomplete
                    self.dirty.add(partner.conn.handle)
            return
        # Its receiver left: each producer's delivery gets an outcome.  The
        # newest ``queued`` copies never left the router.
        queued = lib.pn_link_queued(end.handle) if end.handle is not None else 0
        copies = list(deliveries.items())
        for index, (od, d) in enumerate(copies):
            partner.deliveries.pop(d, None)
            sent = index < len(copies) - queued
            state = MODIFIED if sent and partner.may_modify else RELEASED
            count_outcome(partner, state)
            settle_with(d, state)
            pn_delivery_settle(od)
        if copies and partner.conn.handle is not None:
            self.dirty.add(partner.conn.handle)


__all__ = ["MAX_TAG", "Relay"]
