"""Outcomes and settlement on the per-message path (docs/routing.md#settlement-and-dispositions).

Owns tracking a producer's delivery while its copies are out (a
``Transfer`` for one copy, a ``Fanout`` for multicast), folding multicast
copies' outcomes, the producer settling first or going away, the router's
own outcomes (released, rejected) and withdrawing or restoring a sender's
credit.  A consumer's disposition and a consumer going away are
``router.adapter.forwarding.dispositions``'s, which may forward a delivery
again.  The rules come from ``router.core.settlement``; this module applies
them with raw proton calls and must not route.  It is the lowest of the
per-message parts: it calls none of the others.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from router.adapter.pending import Counters, Pending
from router.adapter.pn import NULL, lib
from router.core import (
    AddressRecord,
    Fanout,
    Held,
    InLink,
    LostCopy,
    RouterAnnotations,
    Stream,
    Transfer,
    count_outcome,
    fold_multicast,
    outcome_for_lost_copy,
)
from router.core.settlement import MODIFIED, REJECTED, RELEASED, TERMINAL_STATES

log = logging.getLogger(__name__)

pn_delivery_settle: Final = lib.pn_delivery_settle
pn_delivery_update: Final = lib.pn_delivery_update
pn_delivery_remote_state: Final = lib.pn_delivery_remote_state
pn_delivery_remote: Final = lib.pn_delivery_remote
pn_delivery_local: Final = lib.pn_delivery_local
pn_link_set_drain: Final = lib.pn_link_set_drain

# What a producer is told for a copy whose consumer went away (the rule is
# router.core.settlement's; resolved once here, not per copy).
LOST_UNDELIVERED: Final = outcome_for_lost_copy(LostCopy.UNDELIVERED).value
LOST_UNSETTLED: Final = outcome_for_lost_copy(LostCopy.UNSETTLED).value


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

    # -- the producer's delivery, tracked until its copies' outcomes ---------------------

    def transfer(self, d: Any, il: InLink, data: bytes, record: AddressRecord,
                 ann: RouterAnnotations | None, phase: int | None,
                 stream: Stream | None) -> Transfer | None:
        """Track the producer's delivery ``d`` forwarded as one copy: a
        ``Transfer`` in its link's unsettled that the copy's outcome settles,
        holding the message to forward it again where the address has a
        redelivery limit (docs/routing.md#re-forwarding-released-deliveries;
        not a streamed one, which is never held whole).  A pre-settled
        message (``d`` None) has nothing to track: its credit comes back now."""
        if d is None:
            self.credit_dirty.add(il)
            return None
        ref = Transfer(d, il)
        il.unsettled[d] = ref
        if record.redelivery_limit and stream is None:
            ref.held = Held(data, record, phase, ann.to if ann is not None else None)
        return ref

    def fanout(self, d: Any, il: InLink, copies: int) -> Fanout | None:
        """Track the producer's delivery ``d`` forwarded as ``copies`` copies
        (multicast): settled once every copy is, with their outcomes folded
        (docs/routing.md#multicast-outcomes).  Pre-settled: None, and its
        credit comes back now."""
        if d is None:
            self.credit_dirty.add(il)
            return None
        f = Fanout(d, il)
        f.pending = copies
        il.unsettled[d] = f
        return f

    # -- the router's own outcomes ---------------------------------------------------

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

    def copy_reported(self, f: Fanout, state: int) -> None:
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


__all__ = ["LOST_UNDELIVERED", "LOST_UNSETTLED", "Outcomes", "copy_disposition", "settle_with",
           "whole"]
