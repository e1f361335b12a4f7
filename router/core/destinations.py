"""What changes when an address record gains or loses destinations.

Owns the credit rule of docs/routing.md#credit as transitions: a targeted sender is
blocked while its address has nowhere to send (no local consumer, no remote
router, no fallback destination it may use) and unblocked when it gains
one.  Every place that changes a record's destinations or senders
(consumers attaching and leaving, auto-links, remote routers learnt or
lost) ends with ``senders_changed``, so the rule lives here once.  Pure: it
returns effects.

It also decides which senders get *demand* credit: credit no larger than
what the address's local consumers can take now, instead of the full
window.  That is a sender whose only destinations are brokers (out
auto-links: the producer is paced by the broker's credit) and an in
auto-link whose messages go to local consumers (the broker is asked for
messages only while a consumer can take them, so a consumer leaving sends
back at most its credit's worth, once, instead of the router holding a
window's worth).  With remote destinations the credit of consumers on other
routers is unknown here, and the window applies.
"""

from __future__ import annotations

from router.core.effects import BlockSender, Effect, UnblockSender
from router.core.records import AddressRecord


def senders_changed(record: AddressRecord) -> list[Effect]:
    """Block or unblock the senders whose credit ``record``'s destinations
    decide: its own, and the primary's when it is a fallback record."""
    effects: list[Effect] = []
    for rec in (record, record.primary):
        if rec is None:
            continue
        demand_changed(rec)
        for sender in rec.senders:
            blocked = not rec.may_feed(sender)
            if blocked is not sender.blocked:
                sender.blocked = blocked
                if blocked:
                    # An auto-link's broker is never drained: RabbitMQ ends the
                    # session when asked to drain a receiver it cannot fill.
                    effects.append(BlockSender(link=sender, drain=sender.autolink is None))
                else:
                    effects.append(UnblockSender(link=sender))
            edge = sender.conn.edge
            if edge is not None:
                # An edge's producer: the edge learns whether the address has
                # destinations beyond it (docs/networks.md#edge-routers).
                answer = edge.tracked(sender)
                if answer is not None:
                    effects.append(answer)
    return effects


def demand_changed(record: AddressRecord) -> None:
    """Recompute which of ``record``'s senders get demand credit."""
    consumers = record.consumers
    local = bool(consumers) and not record.remotes
    brokered = local and all(c.autolink is not None for c in consumers)
    demand = []
    for sender in record.senders:
        sender.demand = local and (brokered or sender.autolink is not None)
        if sender.demand:
            demand.append(sender)
    record.demand_senders = demand


__all__ = ["demand_changed", "senders_changed"]
