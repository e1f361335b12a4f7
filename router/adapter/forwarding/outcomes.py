"""Outcomes and settlement on the per-message path (docs/routing.md#settlement-and-dispositions).

Owns carrying a consumer's disposition back to the producer (anycast, with
its details), folding multicast copies, the producer settling first, and
what the producer is told when either side's link goes away; plus the
router's own outcomes (released, rejected) and withdrawing or restoring a
sender's credit.  The rules come from ``router.core.settlement``; this
module applies them with raw proton calls and must not route.  It is the
lowest of the per-message parts: it calls none of the others.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Final, Protocol

from router.adapter.forwarding.accel import update_settle
from router.adapter.pending import Counters, Pending
from router.adapter.pn import NULL, lib
from router.core import (
    OUTCOME_INDEX,
    Fanout,
    InLink,
    LostCopy,
    OutLink,
    Stream,
    Transfer,
    count_outcome,
    fold_multicast,
    outcome_for_lost_copy,
)
from router.core.settlement import ACCEPTED, MODIFIED, REJECTED, RELEASED, TERMINAL_STATES

log = logging.getLogger(__name__)

pn_delivery_settle: Final = lib.pn_delivery_settle
pn_delivery_update: Final = lib.pn_delivery_update
pn_delivery_remote_state: Final = lib.pn_delivery_remote_state
pn_delivery_remote: Final = lib.pn_delivery_remote
pn_delivery_local: Final = lib.pn_delivery_local
pn_link_set_drain: Final = lib.pn_link_set_drain

# What a producer is told for a copy whose consumer went away (the rule is
# router.core.settlement's; resolved once here, not per copy).
_LOST_UNDELIVERED = outcome_for_lost_copy(LostCopy.UNDELIVERED).value
_LOST_UNSETTLED = LOST_UNSETTLED = outcome_for_lost_copy(LostCopy.UNSETTLED).value


class Redeliverer(Protocol):
    """Forwards a delivery again when its copy comes back
    (``router.adapter.forwarding.redelivery.Redelivery``)."""

    def again(self, ref: Transfer, ol: OutLink, state: int, disposition: Any) -> bool: ...


def _say_failed(d: Any, il: InLink) -> None:
    """Tell the producer MODIFIED with ``delivery-failed`` (RELEASED when it
    does not take MODIFIED): its message came back released from the last
    consumer it was forwarded to, after an earlier one failed it."""
    if il.may_modify:
        lib.pn_disposition_set_failed(pn_delivery_local(d), True)
        pn_delivery_update(d, MODIFIED)
    else:
        pn_delivery_update(d, RELEASED)


def copy_disposition(dst: Any, src: Any, state: int) -> None:
    """Copy a consumer's delivery state, with its details, onto the producer's
    delivery (docs/routing.md#settlement-and-dispositions): rejected error,
    modified fields, received position, and the raw data of any other state
    (e.g. transactional)."""
    local = pn_delivery_local(dst)
    remote = pn_delivery_remote(src)
    if state == REJECTED:
        rc = lib.pn_disposition_condition(remote)
        if lib.pn_condition_is_set(rc):
            lc = lib.pn_disposition_condition(local)
            lib.pn_condition_set_name(lc, lib.pn_condition_get_name(rc))
            desc = lib.pn_condition_get_description(rc)
            if desc != NULL:
                lib.pn_condition_set_description(lc, desc)
            lib.pn_data_copy(lib.pn_condition_info(lc), lib.pn_condition_info(rc))
    elif state == MODIFIED:
        lib.pn_disposition_set_failed(local, lib.pn_disposition_is_failed(remote))
        lib.pn_disposition_set_undeliverable(local, lib.pn_disposition_is_undeliverable(remote))
        lib.pn_data_copy(lib.pn_disposition_annotations(local),
                         lib.pn_disposition_annotations(remote))
    elif state == 0x23:  # received
        lib.pn_disposition_set_section_number(local,
                                              lib.pn_disposition_get_section_number(remote))
        lib.pn_disposition_set_section_offset(local,
                                              lib.pn_disposition_get_section_offset(remote))
    elif state not in TERMINAL_STATES:
        lib.pn_data_copy(lib.pn_disposition_data(local), lib.pn_disposition_data(remote))
    pn_delivery_update(dst, state)


def settle_with(d: Any, state: int, condition: str | None = None,
                description: str | None = None, settle: bool = True) -> None:
    """Give a delivery the router's own outcome and settle it (unless not
    ``settle``): a REJECTED one with its error, a MODIFIED one with
    ``delivery-failed`` set."""
    if condition is not None:
        cond = lib.pn_disposition_condition(pn_delivery_local(d))
        lib.pn_condition_set_name(cond, condition.encode())
        if description:
            lib.pn_condition_set_description(cond, description.encode())
    elif state == MODIFIED:
        lib.pn_disposition_set_failed(pn_delivery_local(d), True)
    pn_delivery_update(d, state)
    if settle:
        pn_delivery_settle(d)


def whole(il: InLink) -> None:
    """``il`` is no longer in the middle of a message."""
    if il.partial is not None:
        il.partial = None
        il.conn.partials -= 1


class Outcomes:
    """Dispositions and settlement between producers and consumers.

    Args:
        pending: the wake-up's shared work (connections to write, senders
            whose credit to look at, consumers' deliveries to settle).
        counters: the router-wide counts the per-message parts keep.
    """

    def __init__(self, pending: Pending, counters: Counters) -> None:
        self.credit_dirty = pending.credit
        self.dirty = pending.output
        self.settle_later = pending.settle_later
        self.oversized_links = pending.oversized
        self.counters = counters
        #: Messages being streamed, by the link they arrive on
        #: (``router.core.Stream``); ``router.adapter.forwarding.streaming`` adds and
        #: removes them, settlement looks them up.
        self.streams: dict[InLink, Stream] = {}
        #: Forwards a delivery again when its copy comes back (set when the
        #: forwarder is assembled).
        self.redelivery: Redeliverer | None = None

    def no_destination(self, d: Any, il: InLink) -> None:
        """Nothing can receive (docs/routing.md#when-nothing-can-receive):
        release, or drop if pre-settled."""
        if d is None:
            self.counters.dropped_presettled += 1
            il.dropped_presettled += 1
            self.credit_dirty.add(il)
        else:
            log.debug("%r: no destination, released", il)
            self.finish(d, il, RELEASED)

    def finish(self, d: Any, il: InLink, state: int, condition: str | None = None,
               description: str | None = None) -> None:
        """Give a delivery the router's own outcome and settle it; a
        pre-settled one (``d`` None) that would be released is dropped."""
        self.credit_dirty.add(il)
        if d is None:
            if state == RELEASED:
                self.counters.dropped_presettled += 1
                il.dropped_presettled += 1
            return
        if state == MODIFIED and not il.may_modify:
            state = RELEASED
        count_outcome(il, state)
        settle_with(d, state, condition, description, not self.arriving(d, il))
        self.dirty.add(il.conn.handle)

    def oversized(self, d: Any, il: InLink) -> None:
        """A message above the connection's policy size limit
        (docs/security.md#policy): rejected and settled; the link and its
        connection are then closed (``Pending.oversized``).  Nothing more is
        read on the link."""
        whole(il)
        if il.max_size < 0:
            # More of it, or what followed it, before the link closes:
            # refused once is enough.
            pn_delivery_settle(d)
            return
        il.max_size = -1
        il.delivered += 1
        self.finish(d, il, REJECTED, "amqp:link:message-size-exceeded",
                    "Message size exceeded")
        self.oversized_links.append(il)

    def settle_deferred(self) -> None:
        """Settle the consumers' deliveries put off by ``outgoing``; called
        before anything may free their links (and after every batch of events)."""
        later = self.settle_later
        if not later:
            return
        for od in later:
            pn_delivery_settle(od)
        later.clear()

    def arriving(self, d: Any, il: InLink) -> bool:
        """Whether ``d`` is a streamed message still arriving; if so it is
        marked to be settled once complete (settling it now would make
        proton drop its remaining frames unread)."""
        streams = self.streams
        if not streams:
            return False
        stream = streams.get(il)
        if stream is None or stream.in_delivery != d:
            return False
        stream.settle = True
        return True

    def consumed(self, ref: Transfer | Fanout | None, state: int) -> None:
        """An in-process consumer (the management agent) took its copy with
        ``state``; there is no outgoing delivery to settle."""
        if ref is None:
            return
        if isinstance(ref, Fanout):
            self.copy_done(ref, state)
            return
        d = ref.in_delivery
        if d is not None:
            ref.in_link.unsettled.pop(d, None)
            self.finish(d, ref.in_link, state)

    def outgoing(self, od: Any, ol: OutLink, settled: int, state: int) -> None:
        """A PN_DELIVERY event on a router-outgoing link: the consumer's
        disposition, settled or not, and its state (``accel.next_event``)."""
        ref = ol.unsettled.get(od)
        if ref is None:
            if settled:
                pn_delivery_settle(od)
            return
        if type(ref) is Transfer:
            d = ref.in_delivery
            done = False  # d settled already
            if d is None and not settled and state in TERMINAL_STATES:
                # Its producer is gone: nothing upstream will ever settle
                # this copy, so the router does, now that its consumer decided.
                settled = 1
            if d is not None and state:
                if state == ACCEPTED:
                    if settled and not self.streams:
                        update_settle(d, state)  # the common case, in one call
                        done = True
                    else:
                        pn_delivery_update(d, state)
                elif ref.held is not None and state in (RELEASED, MODIFIED) \
                        and self._again(ref, od, ol, state):
                    return
                elif state == RELEASED:
                    if ref.held is not None and ref.held.failed:
                        _say_failed(d, ref.in_link)
                    else:
                        pn_delivery_update(d, state)
                elif state == MODIFIED and not ref.in_link.may_modify:
                    pn_delivery_update(d, RELEASED)
                else:
                    copy_disposition(d, od, state)
            if settled:
                del ol.unsettled[od]
                self.settle_later.append(od)
                outcome = OUTCOME_INDEX.get(state)
                if outcome is not None:
                    ol.outcomes[outcome] += 1
                if ref.target is not None:
                    ref.target.outstanding -= 1
                    ref.target = None
                if d is not None:
                    il = ref.in_link
                    if not done and (not self.streams or not self.arriving(d, il)):
                        pn_delivery_settle(d)
                    if outcome is not None:
                        il.outcomes[outcome] += 1
                    del il.unsettled[d]
                    self.credit_dirty.add(il)
            if d is not None:
                self.dirty.add(ref.in_link.conn.handle)
            return
        assert isinstance(ref, Fanout)
        if settled:
            del ol.unsettled[od]
            ref.copies.pop(od, None)
            self.settle_later.append(od)
            count_outcome(ol, state)
            if ref.terminal is not None and od in ref.terminal:
                ref.terminal.discard(od)
                self.copy_done(ref, None)
            else:
                self.copy_done(ref, state or ACCEPTED)
        elif state in TERMINAL_STATES:
            if ref.terminal is None:
                ref.terminal = set()
            if od not in ref.terminal:
                ref.terminal.add(od)
                self._copy_reported(ref, state)

    def _again(self, ref: Transfer, od: Any, ol: OutLink, state: int) -> bool:
        """A held message's copy came back: if it goes elsewhere, the copy
        that came back is settled here and the producer hears nothing yet
        (docs/routing.md#re-forwarding-released-deliveries)."""
        redelivery = self.redelivery
        if redelivery is None or not redelivery.again(ref, ol, state, pn_delivery_remote(od)):
            return False
        del ol.unsettled[od]
        self.settle_later.append(od)
        outcome = OUTCOME_INDEX.get(state)
        if outcome is not None:
            ol.outcomes[outcome] += 1
        self.dirty.add(ol.conn.handle)
        return True

    def _copy_reported(self, f: Fanout, state: int) -> None:
        """A copy gave a terminal outcome without settling (consumer in settle
        mode "second").  Once every unsettled copy has, the producer is told
        the folded outcome so it can settle (docs/routing.md#multicast-outcomes)."""
        f.outcome = fold_multicast(f.outcome, state)
        f.reported += 1
        self._maybe_report(f)

    def _maybe_report(self, f: Fanout) -> None:
        d = f.in_delivery
        if d is not None and f.reported and f.reported == f.pending and f.outcome is not None:
            outcome = f.outcome
            if outcome == MODIFIED and not f.in_link.may_modify:
                outcome = RELEASED
            pn_delivery_update(d, outcome)
            self.dirty.add(f.in_link.conn.handle)

    def copy_done(self, f: Fanout, state: int | None) -> None:
        """One multicast copy settled, with ``state`` unless already reported."""
        if state is not None:
            f.outcome = fold_multicast(f.outcome, state)
        else:
            f.reported -= 1
        f.pending -= 1
        if f.pending > 0:
            self._maybe_report(f)
            return
        d = f.in_delivery
        if d is None:
            return
        il = f.in_link
        f.in_delivery = None
        il.unsettled.pop(d, None)
        outcome = f.outcome if f.outcome is not None else RELEASED
        self.finish(d, il, outcome)

    def producer_settled(self, d: Any, il: InLink) -> None:
        """The producer settled first: pass the settlement on
        (docs/routing.md#settlement-and-dispositions)."""
        ref = il.unsettled.pop(d, None)
        if ref is not None:
            state = pn_delivery_remote_state(d)
            ref.in_delivery = None
            if type(ref) is Transfer:
                if ref.target is not None:
                    ref.target.outstanding -= 1
                    ref.target = None
                od = ref.out_delivery
                if od is not None and ref.out_link is not None:
                    ref.out_link.unsettled.pop(od, None)
                    if state:
                        pn_delivery_update(od, state)
                    pn_delivery_settle(od)
                    self.dirty.add(ref.out_link.conn.handle)
            else:
                assert isinstance(ref, Fanout)
                for od, ol in ref.copies.items():
                    ol.unsettled.pop(od, None)
                    if state:
                        pn_delivery_update(od, state)
                    pn_delivery_settle(od)
                    self.dirty.add(ol.conn.handle)
                ref.copies.clear()
        pn_delivery_settle(d)
        self.dirty.add(il.conn.handle)
        self.credit_dirty.add(il)

    # -- links going away ----------------------------------------------------------

    def lose_outgoing(self, ol: OutLink) -> None:
        """A consumer went away: every copy still routed to it ends
        (docs/routing.md#when-a-link-or-connection-goes)."""
        queue, unsettled = ol.queue, ol.unsettled
        ol.queue = deque()
        ol.unsettled = {}
        for data, ref in queue:
            if type(data) is Stream:
                data.waiting.remove(ol)
                data.heads.pop(ol, None)
                if not data.waiting:
                    # Nothing kept for it now: a producer held for this
                    # copy is read again (``Streams.check_paused``).
                    data.backlog = bytearray()
            if ref is not None:
                self.copy_lost(ref, None, _LOST_UNDELIVERED, ol)
        for od, ref in unsettled.items():
            self.copy_lost(ref, od, _LOST_UNSETTLED, ol)
            pn_delivery_settle(od)

    def copy_lost(self, ref: Transfer | Fanout, od: Any, state: int,
                  ol: OutLink | None = None) -> None:
        """A copy sent (``od``) or queued on ``ol`` will not be settled by its
        consumer: ``state`` is what it means for the producer, unless a held
        message goes elsewhere."""
        if type(ref) is Transfer:
            if ref.target is not None:
                ref.target.outstanding -= 1
                ref.target = None
            d = ref.in_delivery
            if d is not None:
                held = ref.held
                if held is not None:
                    redelivery = self.redelivery
                    if ol is not None and redelivery is not None \
                            and redelivery.again(ref, ol, state, None):
                        return
                    if state == RELEASED and held.failed:
                        state = MODIFIED
                ref.in_delivery = None
                ref.in_link.unsettled.pop(d, None)
                self.finish(d, ref.in_link, state)
            return
        assert isinstance(ref, Fanout)
        if od is not None:
            ref.copies.pop(od, None)
        if ref.terminal is not None and od in ref.terminal:
            ref.terminal.discard(od)
            self.copy_done(ref, None)
        else:
            self.copy_done(ref, state)

    def lose_incoming(self, il: InLink) -> None:
        """A producer went away (docs/routing.md#when-a-link-or-connection-goes):
        anycast copies carry on unlinked, settled here once their consumer
        has decided (now, or when it does); multicast copies are settled
        MODIFIED toward their consumers."""
        unsettled = il.unsettled
        il.unsettled = {}
        whole(il)
        for ref in unsettled.values():
            ref.in_delivery = None
            if type(ref) is Transfer:
                od, ol = ref.out_delivery, ref.out_link
                if od is not None and ol is not None and \
                        pn_delivery_remote_state(od) in TERMINAL_STATES:
                    # Its consumer decided but waits for the producer to
                    # settle first, which will never come: settle it here.
                    ol.unsettled.pop(od, None)
                    if ref.target is not None:
                        ref.target.outstanding -= 1
                        ref.target = None
                    pn_delivery_settle(od)
                    self.dirty.add(ol.conn.handle)
            elif type(ref) is Fanout:
                for od, ol in ref.copies.items():
                    ol.unsettled.pop(od, None)
                    lib.pn_disposition_set_failed(pn_delivery_local(od), True)
                    pn_delivery_update(od, MODIFIED)
                    pn_delivery_settle(od)
                    self.dirty.add(ol.conn.handle)
                ref.copies.clear()
        self.credit_dirty.discard(il)

    # -- credit ---------------------------------------------------------------------

    def block(self, il: InLink, drain: bool = True) -> None:
        """The sender's address lost its last destination: no more credit, and
        with ``drain`` the sender is asked to give back what it has."""
        if drain:
            lib.pn_link_drain(il.handle, 0)
            self.dirty.add(il.conn.handle)

    def unblock(self, il: InLink) -> None:
        """The sender's address has a destination again."""
        pn_link_set_drain(il.handle, False)
        self.credit_dirty.add(il)


__all__ = ["LOST_UNSETTLED", "Outcomes", "Redeliverer", "copy_disposition", "settle_with", "whole"]
