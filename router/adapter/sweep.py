"""The once-a-second sweep: every connection's timers, and the links worth
a warning.

Owns ticking each transport (idle timeout and heartbeats, the initial
handshake timeout, a close the peer never answered) and reporting, through
``router.core.watch``, deliveries unsettled for too long and links blocked
without credit.  A part of the loop.
"""

from __future__ import annotations

import logging

from router.adapter.connections.transports import Transports
from router.adapter.endpoints.links import sample_credit
from router.core import InLink, OutLink
from router.core.watch import Watch

log = logging.getLogger(__name__)

_TICK_S = 1.0


class Sweep:
    """Once a second: every transport's timers ticked, and the deliveries
    and links ``watch`` finds too old logged and counted.

    Args:
        transports: the connections to tick.
        watch: the ages it looks for (default: 10 s for stuck deliveries and
            blocked links).
    """

    def __init__(self, transports: Transports, watch: Watch | None = None) -> None:
        self.transports = transports
        self.watch = watch or Watch()
        self._next_tick = 0.0

    def next_deadline(self) -> float | None:
        return self._next_tick

    def tick(self, now: float) -> None:
        self._next_tick = now + _TICK_S
        self.transports.tick_all(now)
        self._watch_links(now)

    def close(self) -> None:
        """Nothing to close: the connections are the transports'."""

    def _watch_links(self, now: float) -> None:
        """Ages of unsettled deliveries, links without credit."""
        links: list[InLink | OutLink] = []
        for core in sample_credit(conn.core for conn in self.transports.conns.values()):
            core.note_deliveries(now)
            links.extend(core.in_links.values())
            links.extend(core.out_links.values())
        found = self.watch.sweep(links, now)
        for link, count in found.stuck:
            log.warning("[%r][L%d] %d deliver%s unsettled for more than %g seconds "
                        "(%d on this link so far)", link.conn, link.link_id, count,
                        "y" if count == 1 else "ies", self.watch.stuck_s, link.stuck)
        for link in found.blocked:
            log.warning("[%r][L%d] Link blocked with zero credit for %g seconds", link.conn,
                        link.link_id, self.watch.blocked_s)


__all__ = ["Sweep"]
