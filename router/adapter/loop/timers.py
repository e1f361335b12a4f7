"""The routing core's timed work as a part of the loop.

Owns asking the core when it next has work (hello, link-state ages,
auto-link retries, an edge's heartbeats; ``Router.next_deadline``) and
ticking it then; what the tick returns is carried out by ``apply``.

Before each tick it tells the core which inter-router connections brought
frames since the last one (proton counts the frames each transport read),
so that a neighbour that is slow is not taken for gone
(docs/networks.md#timers). This is off the per-message path: one counter
read per neighbour per tick.
"""

from __future__ import annotations

from collections.abc import Callable

from router.adapter.pn import lib
from router.core import Effect, Router


class CoreTimers:
    """The core's timed work (hello, link-state ages, auto-link retries) as a
    part of the loop.

    Args:
        router: the routing core.
        apply: carries out what its ``tick`` returns.
    """

    def __init__(self, router: Router, apply: Callable[[list[Effect]], None]) -> None:
        self.router = router
        self.apply = apply
        #: Frames each inter-router connection had read at the last tick, by
        #: connection id.
        self._frames: dict[int, int] = {}

    def next_deadline(self) -> float | None:
        return self.router.next_deadline()

    def tick(self, now: float) -> None:
        self._listen(now)
        self.apply(self.router.tick(now))

    def _listen(self, now: float) -> None:
        connections = self.router.inter_router_connections()
        if not connections:
            self._frames.clear()
            return
        frames: dict[int, int] = {}
        for core in connections:
            conn = core.handle
            if conn is None or conn.closed:
                continue
            count = int(lib.pn_transport_get_frames_input(conn.tptr))
            frames[core.conn_id] = count
            if count != self._frames.get(core.conn_id, count):
                self.router.neighbor_heard(core, now)
        self._frames = frames

    def close(self) -> None:
        """Nothing to close."""


__all__ = ["CoreTimers"]
