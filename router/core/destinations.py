"""What changes when an address record gains or loses destinations.

Owns the credit rule of reference 5.2 as transitions: a targeted sender is
blocked while its address has nowhere to send (no local consumer, no remote
router, no fallback destination it may use) and unblocked when it gains
one.  Every place that changes a record's destinations (consumers attaching
and leaving, auto-links, remote routers learnt or lost) ends with
``senders_changed``, so the rule lives here once.  Pure: it returns effects.
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
        for sender in rec.senders:
            blocked = not rec.may_feed(sender)
            if blocked is sender.blocked:
                continue
            sender.blocked = blocked
            if blocked:
                # An auto-link's broker is never drained: RabbitMQ ends the
                # session when asked to drain a receiver it cannot fill.
                effects.append(BlockSender(link=sender, drain=sender.autolink is None))
            else:
                effects.append(UnblockSender(link=sender))
    return effects


__all__ = ["senders_changed"]
