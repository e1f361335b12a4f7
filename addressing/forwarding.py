"""Per-message forwarding choices for anycast addresses (docs/routing.md#distributions).

Owns the pure decisions "which consumer gets this message" for the
``balanced`` and ``closest`` treatments, over objects that merely expose a
``load`` and a ``capacity`` (:class:`Consumer`).

Rules:

1. These functions run once per message: they allocate nothing, never
   raise for an empty list, and only reorder the list they are given (the
   round-robin state *is* the list order, as in qdrouterd).
2. They do not know what a consumer is (link, in-process subscriber,
   remote router), how its load is counted, or how a message is sent.
   Filtering (edge-echo suppression, valid origins) is the caller's job.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol, TypeVar, overload

log = logging.getLogger(__name__)


class Consumer(Protocol):
    """Anything balanced forwarding can choose between.

    Plain attributes or read-only properties both satisfy it.
    """

    @property
    def load(self) -> int:
        """Outstanding deliveries (local link: undelivered + unsettled)."""
        ...

    @property
    def capacity(self) -> int:
        """The candidate is eligible while ``load < capacity``."""
        ...


C = TypeVar("C", bound=Consumer)
R = TypeVar("R", bound=Consumer)
T = TypeVar("T")


@overload
def choose_balanced(consumers: list[C]) -> C | None: ...


@overload
def choose_balanced(consumers: list[C], remotes: Iterable[R]) -> C | R | None: ...


def choose_balanced(consumers: list[C], remotes: Iterable[R] = ()) -> C | R | None:
    """Pick the destination of one ``balanced`` message.

    Steps (docs/routing.md#distributions, qdrouterd ``qdr_forward_balanced_CT``):

    1. Scan ``consumers`` in list order, remembering the eligible one
       (``load < capacity``) with the smallest load and the ineligible one
       with the smallest load; only a strictly smaller load replaces, so
       ties keep the earlier one.  Stop at an eligible consumer with load 0.
    2. If the best eligible load is 0, move that consumer to the end of
       ``consumers`` (idle consumers are used in turn) and return it.
    3. Otherwise scan ``remotes`` the same way, against the local bests;
       locals win ties.
    4. Return the best eligible candidate, else the best ineligible one,
       else None (fanout 0).

    Args:
        consumers: local consumer links, in round-robin order; reordered in
            place by step 2.
        remotes: remote candidates, scanned only when no local consumer is
            idle.  Callers pass routers that have the address and whose
            valid origins include the message's origin, in ascending
            mask-bit order (a generator is fine, it is consumed at most
            once).  For router R over connection K, qdrouterd compares
            ``outstanding(address, K) + cost(R)`` and calls R eligible while
            ``outstanding < capacity(data link on K)``, so expose
            ``load = outstanding + cost`` and ``capacity = link capacity +
            cost``.

    Returns:
        The chosen consumer or remote candidate, or None.
    """
    best: C | R | None = None
    best_load = 0
    best_index = -1
    fallback: C | R | None = None
    fallback_load = 0
    for index in range(len(consumers)):
        consumer = consumers[index]
        load = consumer.load
        if load < consumer.capacity:
            if best is None or load < best_load:
                best = consumer
                best_load = load
                best_index = index
                if load == 0:
                    break
        elif fallback is None or load < fallback_load:
            fallback = consumer
            fallback_load = load
    if best is not None and best_load == 0:
        if best_index != len(consumers) - 1:
            consumers.append(consumers.pop(best_index))
        return best
    for remote in remotes:
        load = remote.load
        if load < remote.capacity:
            if best is None or load < best_load:
                best = remote
                best_load = load
        elif fallback is None or load < fallback_load:
            fallback = remote
            fallback_load = load
    return best if best is not None else fallback


def choose_closest(consumers: list[T]) -> T | None:
    """Pick the local destination of one ``closest`` message: round-robin.

    Returns the first consumer and moves it to the end of ``consumers``;
    None when the list is empty.  (Closest prefers in-process subscribers,
    then local links, then the cheapest remote routers; the caller applies
    that order and calls this on one list at a time.)
    """
    if not consumers:
        return None
    first = consumers[0]
    if len(consumers) > 1:
        consumers.append(consumers.pop(0))
    return first
