"""Effective message priority for inter-router forwarding (docs/routing.md#priority).

Owns the rule that picks one of the ten priorities 0..9 for a message: the
address's configured priority wins, else the header priority clamped to
0..9, else the default 4.

Rules:

1. It only computes the number; choosing the inter-router link for it (and
   falling back to the next lower existing one) belongs to the router core.
2. It never rewrites the message header: priority only selects a link.
"""

from __future__ import annotations

import logging

from addressing.spec import MAX_PRIORITY

log = logging.getLogger(__name__)

DEFAULT_PRIORITY = 4
"""The AMQP 1.0 default ``priority`` (section 3.2.1) and qdrouterd's."""


def effective_priority(address_priority: int | None, header_priority: int | None) -> int:
    """Return the priority (0..9) a message is forwarded with.

    Args:
        address_priority: the matching ``address`` entry's ``priority``;
            None (or negative, qdrouterd's "unset" -1) when not configured.
        header_priority: the message header's ``priority`` (AMQP 1.0
            section 3.2.1, a ubyte); None when the header or field is absent.

    Returns:
        ``address_priority`` when configured (it applies to every message of
        the address, as qdrouterd's code does, not only to messages without
        a header priority as its documentation says: docs/routing.md#priority);
        otherwise
        ``header_priority`` clamped to 0..9; otherwise 4.
    """
    if address_priority is not None and address_priority >= 0:
        return min(address_priority, MAX_PRIORITY)
    if header_priority is None:
        return DEFAULT_PRIORITY
    if header_priority > MAX_PRIORITY:
        return MAX_PRIORITY
    return max(header_priority, 0)
