"""Settlement rules: outcomes, their aggregation for multicast, and what a
producer is told when the consumer side of a delivery is lost.

Owns the rules of docs/routing.md#settlement-and-dispositions as pure
functions.  It must not touch deliveries, links or proton: the adapter
applies what these functions decide.
AMQP 1.0 part 3.4 defines the outcomes.
"""

from __future__ import annotations

import enum
from typing import assert_never

# AMQP 1.0 descriptor codes of the delivery states (part 3.4); proton uses
# the same numbers for its PN_RECEIVED ... PN_MODIFIED constants.
RECEIVED = 0x23
ACCEPTED = 0x24
REJECTED = 0x25
RELEASED = 0x26
MODIFIED = 0x27

TERMINAL_STATES = frozenset({ACCEPTED, REJECTED, RELEASED, MODIFIED})


class Outcome(enum.Enum):
    """The terminal outcomes a delivery can end with (AMQP 1.0 3.4)."""

    ACCEPTED = ACCEPTED
    REJECTED = REJECTED
    RELEASED = RELEASED
    MODIFIED = MODIFIED


# Multicast folding order (docs/routing.md#multicast-outcomes):
# rejected > accepted > modified > released.
_RANK = {RELEASED: 0, MODIFIED: 1, ACCEPTED: 2, REJECTED: 3}


def fold_multicast(current: int | None, state: int) -> int:
    """Fold one copy's terminal ``state`` into the running multicast result.

    ``current`` is ``None`` before the first copy reports.  Non-terminal or
    unknown states (e.g. transactional ``declared``) count as rejected, as
    qdrouterd counts a ``declared`` outcome from a receiver
    (docs/routing.md#multicast-outcomes).
    """
    rank = _RANK.get(state)
    if rank is None:
        state, rank = REJECTED, _RANK[REJECTED]
    if current is None or rank > _RANK[current]:
        return state
    return current


class LostCopy(enum.Enum):
    """Where an outgoing copy was when its consumer went away
    (docs/routing.md#when-a-link-or-connection-goes)."""

    UNDELIVERED = "undelivered"  # still queued in the router, never sent
    UNSETTLED = "unsettled"  # sent, no settlement from the consumer yet


def outcome_for_lost_copy(where: LostCopy) -> Outcome:
    """The outcome a producer gets for a copy whose consumer was lost.

    A copy that never left the router is RELEASED: the consumer cannot have
    seen it.  A copy that was sent may have been processed, so it comes back
    MODIFIED with ``delivery-failed`` set.
    """
    if where is LostCopy.UNDELIVERED:
        return Outcome.RELEASED
    if where is LostCopy.UNSETTLED:
        return Outcome.MODIFIED
    assert_never(where)
