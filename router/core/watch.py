"""Delayed and stuck deliveries, and links starved of credit (docs/operations.md#counters).

Owns the ages behind ``deliveriesDelayed1Sec``, ``deliveriesDelayed10Sec``,
``deliveriesStuck`` and ``linksBlocked``.  Nothing here runs per message: a
sweep, once a second, notes the unsettled deliveries it has not seen before
with the time it first saw them, counts those that went since the last
sweep as delayed by their age, and flags those unsettled for longer than
the stuck threshold, once each; ``stuck_now`` counts the flagged ones until
they are settled, as qdrouterd's ``deliveriesStuck`` does.  Ages are therefore known to within one
sweep interval: a delivery counts as delayed when its estimated age
(the time between the sweep that first saw it and the last sweep that
still saw it, plus one interval) exceeds 1 s or 10 s.

Pure: the caller passes the links and the time, and logs what it returns.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from router.core.records import Fanout, InLink, OutLink, Transfer

__all__ = ["Findings", "Watch"]

DELAYED_S = 1.0
LONG_DELAYED_S = 10.0
STUCK_S = 10.0
BLOCKED_S = 10.0


@attrs.define
class Findings:
    """What one sweep found worth logging: links with deliveries newly flagged
    stuck (and how many), and links whose credit has newly been zero too long."""

    stuck: list[tuple[InLink | OutLink, int]] = attrs.field(factory=list)
    blocked: list[InLink | OutLink] = attrs.field(factory=list)


class Watch:
    """Sweeps links for delivery ages and zero credit.

    Args:
        stuck_s: age after which an unsettled delivery is flagged stuck.
        blocked_s: time with zero credit after which a link is blocked.
    """

    def __init__(self, *, stuck_s: float = STUCK_S, blocked_s: float = BLOCKED_S) -> None:
        self.stuck_s = stuck_s
        self.blocked_s = blocked_s
        self._last: float | None = None

    def sweep(self, links: Iterable[InLink | OutLink], now: float) -> Findings:
        """Look at every link once; returns what to log."""
        last = self._last
        interval = 0.0 if last is None else now - last
        self._last = now
        findings = Findings()
        for link in links:
            newly = self._ages(link, now, last, interval)
            if newly:
                findings.stuck.append((link, newly))
            if self._starved(link, now):
                findings.blocked.append(link)
        return findings

    def _ages(self, link: InLink | OutLink, now: float, last: float | None,
              interval: float) -> int:
        watched = link.watched
        unsettled = link.unsettled
        if not unsettled and not watched and not (isinstance(link, OutLink) and link.queue):
            return 0
        current: set[Transfer | Fanout] = set(unsettled.values())
        if isinstance(link, OutLink):
            current.update(t for _, t in link.queue if t is not None)
        for entry in watched.keys() - current:
            first, flagged = watched.pop(entry)
            if flagged:
                link.stuck_now -= 1
            if last is None:
                continue
            age = last - first + interval
            if age > LONG_DELAYED_S:
                link.delayed10 += 1
            elif age > DELAYED_S:
                link.delayed1 += 1
        newly = 0
        for entry in current:
            seen = watched.get(entry)
            if seen is None:
                watched[entry] = (now, False)
            elif not seen[1] and now - seen[0] >= self.stuck_s:
                watched[entry] = (seen[0], True)
                newly += 1
        link.stuck += newly
        link.stuck_now += newly
        return newly

    def _starved(self, link: InLink | OutLink, now: float) -> bool:
        """True when ``link`` has just been without credit for ``blocked_s``.

        A producer's link is without credit when the router gives it none; a
        consumer's when the consumer withholds it (see ``OutLink.withheld``)
        or copies wait for credit it has not sent.  A consumer whose last
        credit the router spent and that has nothing waiting is not blocked,
        as in qdrouterd, which starts the clock at attach and on a flow but
        not on a transfer.
        """
        if link.credit > 0 or (isinstance(link, OutLink) and not link.withheld
                               and not link.queue):
            link.starved_since = None
            link.starved = False
            return False
        if link.starved_since is None:
            link.starved_since = now
            return False
        if not link.starved and now - link.starved_since >= self.blocked_s:
            link.starved = True
            return True
        return False

    @staticmethod
    def zero_credit_seconds(link: InLink | OutLink, now: float) -> int:
        """How long ``link`` has had no credit (management ``zeroCreditSeconds``)."""
        if link.starved_since is None or link.credit > 0:
            return 0
        return int(now - link.starved_since)
