"""The HELLO protocol: who we hear, and telling neighbours (ROUTER_HELLO).

See docs/networks.md#control-messages and docs/networks.md#link-state-and-paths.

Owns the ``seen`` set (routers whose HELLO arrived within
``hello_max_age_s``), the HELLO period, and duplicate-router-id detection.

Must not: decide neighbour status, link state or routes; a HELLO that lists
our id is handed to the node tracker, which makes the sender a neighbour.
Must not read the clock: ``now`` is passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Final

import attrs

from router.core.routing.effects import DuplicateRouterId, Effect, SendHello
from router.core.routing.logs import RouterLogger
from router.core.routing.messages import Hello

__all__ = ["LATE_HELLO_FACTOR", "HelloProtocol", "hello_lost"]

log = logging.getLogger(__name__)

# Periodic timers compare elapsed time with this slack so that float
# arithmetic on ``now`` cannot skip a period.
TIME_SLACK_S: Final = 1e-6
# A neighbour whose HELLO is late while its connection still brings frames is
# slow, not gone (a router short of CPU, or its HELLO queued behind a
# backlog of transfers): it is kept until its HELLO is this many
# ``hello_max_age_s`` late (docs/networks.md#timers).
LATE_HELLO_FACTOR: Final = 4


def hello_lost(last_hello: float, heard: float, now: float, max_age_s: float) -> bool:
    """Whether a neighbour whose last HELLO came at ``last_hello`` is lost:
    its HELLO is older than ``max_age_s`` and either nothing came on its
    connection since ``heard`` within ``max_age_s`` or the HELLO is older
    than ``LATE_HELLO_FACTOR`` times it."""
    age = now - last_hello
    if age <= max_age_s:
        return False
    return now - heard > max_age_s or age > LATE_HELLO_FACTOR * max_age_s


@attrs.define
class HelloProtocol:
    """Sends HELLOs and records the ones received."""

    router_id: str
    instance: int
    hello_interval_s: float
    hello_max_age_s: float
    seen: dict[str, float] = attrs.field(factory=dict)
    #: When each router seen last brought frames of any kind on its
    #: connection (``heard``): a late HELLO is excused while it does.
    heard_at: dict[str, float] = attrs.field(factory=dict)
    last_hello: float | None = None
    duplicate_reported: bool = False
    log: RouterLogger = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.log = RouterLogger(log, self.router_id)

    def tick(self, now: float, link_ids: Iterable[int]) -> list[Effect]:
        """Forget stale HELLOs; every ``hello_interval_s`` send a HELLO on each control link."""
        for router_id, when in list(self.seen.items()):
            if hello_lost(when, self.heard_at.get(router_id, when), now, self.hello_max_age_s):
                del self.seen[router_id]
                self.heard_at.pop(router_id, None)
                self.log.debug("HELLO peer expired: %s", router_id)
        if self.last_hello is not None and now - self.last_hello < (
            self.hello_interval_s - TIME_SLACK_S
        ):
            return []
        self.last_hello = now
        message = self._message()
        effects: list[Effect] = [SendHello(link_id=link, message=message) for link in link_ids]
        if effects:
            self.log.debug("SENT %r", message)
        return effects

    def excuse(self, held_s: float) -> None:
        """The router could not listen for ``held_s``: age the HELLOs seen without it."""
        for router_id, when in self.seen.items():
            self.seen[router_id] = when + held_s
        for router_id, when in self.heard_at.items():
            self.heard_at[router_id] = when + held_s

    def heard(self, router_id: str, now: float) -> None:
        """Frames of any kind came from ``router_id``'s connection by ``now``."""
        if router_id in self.seen:
            self.heard_at[router_id] = now

    def greet(self, link_id: int) -> SendHello:
        """A HELLO on one control link now, outside the period (an answer, or
        a known router's connection coming back)."""
        message = self._message()
        self.log.debug("SENT %r on link %d", message, link_id)
        return SendHello(link_id=link_id, message=message)

    def _message(self) -> Hello:
        return Hello(id=self.router_id, instance=self.instance, seen=tuple(self.seen))

    def hello_received(self, msg: Hello, link_id: int, now: float) -> tuple[bool, list[Effect]]:
        """Record a HELLO.

        Returns:
            Whether it lists our id (the link is bidirectional), and effects
            (``DuplicateRouterId`` the first time a HELLO carries our own id
            with another instance). A HELLO from a router not heard before, or
            one that does not list us yet, is answered at once on its link, so
            that both ends become neighbours within a round trip instead of
            within two HELLO periods (docs/networks.md#link-state-and-paths).
        """
        self.log.debug("RCVD %r on link %d", msg, link_id)
        if msg.id == self.router_id:
            if msg.instance != self.instance and not self.duplicate_reported:
                self.duplicate_reported = True
                self.log.critical("Detected Neighbor Router with a Duplicate ID - %s", msg.id)
                return False, [DuplicateRouterId(id=msg.id, instance=msg.instance, link_id=link_id)]
            return False, []
        new = msg.id not in self.seen
        self.seen[msg.id] = now
        listed = self.router_id in msg.seen
        return listed, [self.greet(link_id)] if new or not listed else []
