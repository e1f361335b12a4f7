"""A consumer's side of the per-message path: its disposition carried back
to the producer, and what its producers are told when it goes away
(docs/routing.md#settlement-and-dispositions,
docs/routing.md#when-a-link-or-connection-goes).

Owns reading a consumer's outcome for an anycast copy (with its details:
rejected error, modified fields, transactional state) onto the producer's
delivery, folding a multicast copy's into its ``Fanout``, settling the
consumer's deliveries in one go once the batch of events ends, and, for a
held message whose copy comes back released or modified, asking
``router.adapter.forwarding.redelivery`` to forward it again before the
producer hears anything.  The producer's side and the router's own
outcomes are ``router.adapter.forwarding.outcomes``'s.  It must not route
beyond that one question.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final, Protocol

from router.adapter.forwarding.accel import update_settle
from router.adapter.forwarding.outcomes import (
    LOST_UNDELIVERED,
    LOST_UNSETTLED,
    Outcomes,
    copy_disposition,
)
from router.adapter.pending import Pending
from router.adapter.pn import lib
from router.core import (
    OUTCOME_INDEX,
    Fanout,
    InLink,
    OutLink,
    Stream,
    Transfer,
    count_outcome,
)
from router.core.settlement import ACCEPTED, MODIFIED, RELEASED, TERMINAL_STATES

pn_delivery_settle: Final = lib.pn_delivery_settle
pn_delivery_update: Final = lib.pn_delivery_update
pn_delivery_remote: Final = lib.pn_delivery_remote
pn_delivery_local: Final = lib.pn_delivery_local


def _say_failed(d: Any, il: InLink) -> None:
    """Tell the producer MODIFIED with ``delivery-failed`` (RELEASED when it
    does not take MODIFIED): its message came back released from the last
    consumer it was forwarded to, after an earlier one failed it."""
    if il.may_modify:
        lib.pn_disposition_set_failed(pn_delivery_local(d), True)
        pn_delivery_update(d, MODIFIED)
    else:
        pn_delivery_update(d, RELEASED)


class Redeliverer(Protocol):
    """Forwards a held delivery again when its copy comes back
    (``router.adapter.forwarding.redelivery.Redelivery``): whether it went
    somewhere else."""

    def again(self, ref: Transfer, ol: OutLink, state: int, disposition: Any) -> bool: ...


class Dispositions:
    """Consumers' dispositions, and consumers going away.

    Args:
        outcomes: the producer's side (settling, folding, the router's own outcomes).
        redelivery: forwards a held message again when its copy comes back.
        pending: the wake-up's shared work (connections to write, senders
            whose credit to look at, consumers' deliveries to settle).
    """

    def __init__(self, outcomes: Outcomes, redelivery: Redeliverer, pending: Pending) -> None:
        self.outcomes = outcomes
        self.redelivery = redelivery
        self.streams = outcomes.streams
        self.credit_dirty = pending.credit
        self.dirty = pending.output
        self.settle_later = pending.settle_later

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
                    if not done and (not self.streams or not self.outcomes.arriving(d, il)):
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
                self.outcomes.copy_done(ref, None)
            else:
                self.outcomes.copy_done(ref, state or ACCEPTED)
        elif state in TERMINAL_STATES:
            if ref.terminal is None:
                ref.terminal = set()
            if od not in ref.terminal:
                ref.terminal.add(od)
                self.outcomes.copy_reported(ref, state)

    def _again(self, ref: Transfer, od: Any, ol: OutLink, state: int) -> bool:
        """A held message's copy came back: if it goes elsewhere, the copy
        that came back is settled here and the producer hears nothing yet
        (docs/routing.md#re-forwarding-released-deliveries)."""
        if not self.redelivery.again(ref, ol, state, pn_delivery_remote(od)):
            return False
        del ol.unsettled[od]
        self.settle_later.append(od)
        outcome = OUTCOME_INDEX.get(state)
        if outcome is not None:
            ol.outcomes[outcome] += 1
        self.dirty.add(ol.conn.handle)
        return True

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
                self.copy_lost(ref, None, LOST_UNDELIVERED, ol)
        for od, ref in unsettled.items():
            self.copy_lost(ref, od, LOST_UNSETTLED, ol)
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
                    if ol is not None and self.redelivery.again(ref, ol, state, None):
                        return
                    if state == RELEASED and held.failed:
                        state = MODIFIED
                ref.in_delivery = None
                ref.in_link.unsettled.pop(d, None)
                self.outcomes.finish(d, ref.in_link, state)
            return
        assert isinstance(ref, Fanout)
        if od is not None:
            ref.copies.pop(od, None)
        if ref.terminal is not None and od in ref.terminal:
            ref.terminal.discard(od)
            self.outcomes.copy_done(ref, None)
        else:
            self.outcomes.copy_done(ref, state)


__all__ = ["Dispositions", "Redeliverer"]
