"""The routing core's timed work as a part of the loop.

Owns asking the core when it next has work (hello, link-state ages,
auto-link retries, an edge's heartbeats; ``Router.next_deadline``) and
ticking it then; what the tick returns is carried out by ``apply``.
"""

from __future__ import annotations

from collections.abc import Callable

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

    def next_deadline(self) -> float | None:
        return self.router.next_deadline()

    def tick(self, now: float) -> None:
        self.apply(self.router.tick(now))

    def close(self) -> None:
        """Nothing to close."""


__all__ = ["CoreTimers"]
