"""What an auto-link's link does over its life (docs/brokers.md#the-life-of-an-auto-link),
as a transition table.

Owns the states of one link of an auto-link on one connection (``inactive``,
``attaching``, ``active``, ``failed``), the events that move it between
them, and when a failed link is tried again.  Everything a link does when
its broker comes, refuses, detaches or goes away is in ``TRANSITIONS`` and
``AutoLink.fire``; an event a state does not expect is a bug and raises
``AutoLinkError``.

The life of an auto-link:

* ``inactive``: not attached.  When a connection serving the auto-link
  opens, the router attaches a link there (``CONNECTED``) and it is
  ``attaching``.
* ``attaching``: the attach was sent.  The peer's answer carrying the
  terminus address makes it ``active`` (``REPLIED``); an answer without one
  leaves it ``attaching``, the peer is expected to detach (``REPLIED_EMPTY``).
* ``active``: the link is bound to its address: an ``out`` link is a
  consumer of the address, an ``in`` link a producer into it.
* ``failed``: the peer detached the link (a refused attach, a deleted queue,
  an ended session).  ``last_error`` says why; the link is attached again
  on its connection after ``retry_delay_s`` (``CONNECTED``).
  The first retry after a failure comes after 2 s, further ones every 5 s,
  as qdrouterd does; Hop starts again at 2 s after every success, where
  qdrouterd uses 2 s only once in the life of the router
  (docs/compatibility.md#auto-link-retries).
* Losing the connection (``DISCONNECTED``) makes any state ``inactive``
  and cancels a pending retry; the link is gone with its connection, and the
  table attaches a new one when a serving connection opens (the re-attach
  after a broker comes back).

It must not know about connections, links or addresses beyond the opaque
values the caller hands it.
"""

from __future__ import annotations

import enum
import logging
from typing import Generic, TypeVar

import attrs

from autolink.spec import AutoLinkError, AutoLinkSpec

log = logging.getLogger(__name__)

P = TypeVar("P")

FIRST_RETRY_S = 2.0
RETRY_S = 5.0


class AutoLinkState(enum.Enum):
    """``operStatus`` of an auto-link (qdrouterd's names)."""

    INACTIVE = "inactive"
    ATTACHING = "attaching"
    ACTIVE = "active"
    FAILED = "failed"


class AutoLinkEvent(enum.Enum):
    """What can happen to an auto-link."""

    CONNECTED = "connected"  # the link was attached on a serving connection
    REPLIED = "replied"  # the peer answered the attach with the terminus address
    REPLIED_EMPTY = "replied empty"  # the peer answered without an address
    DETACHED = "detached"  # the peer detached (or refused) the link
    DISCONNECTED = "disconnected"  # the connection the link was on closed


_S = AutoLinkState
_E = AutoLinkEvent

TRANSITIONS: dict[tuple[AutoLinkState, AutoLinkEvent], AutoLinkState] = {
    (_S.INACTIVE, _E.CONNECTED): _S.ATTACHING,
    (_S.FAILED, _E.CONNECTED): _S.ATTACHING,
    (_S.ATTACHING, _E.REPLIED): _S.ACTIVE,
    (_S.ATTACHING, _E.REPLIED_EMPTY): _S.ATTACHING,
    (_S.ATTACHING, _E.DETACHED): _S.FAILED,
    (_S.ACTIVE, _E.DETACHED): _S.FAILED,
    (_S.ATTACHING, _E.DISCONNECTED): _S.INACTIVE,
    (_S.ACTIVE, _E.DISCONNECTED): _S.INACTIVE,
    (_S.FAILED, _E.DISCONNECTED): _S.INACTIVE,
}


@attrs.define(eq=False)
class AutoLink(Generic[P]):
    """One link of a configured auto-link, on one connection, and where it is in its life.

    ``peer`` is the connection the link is attaching, attached or failed on
    (``None`` while inactive); ``link_id`` the router's link while active;
    ``failures`` counts the failures since it was last active.
    """

    spec: AutoLinkSpec
    identity: str
    state: AutoLinkState = AutoLinkState.INACTIVE
    peer: P | None = None
    link_id: int | None = None
    last_error: str | None = None
    retry_at: float | None = None
    failures: int = 0

    @property
    def label(self) -> str:
        """How logs name it: its name, else its identity (as qdrouterd)."""
        return self.spec.name or self.identity

    @property
    def external_address(self) -> str:
        """The address the attach toward the container uses
        (docs/brokers.md#waypoints-and-auto-links)."""
        return self.spec.external_address or self.spec.address

    def fire(self, event: AutoLinkEvent) -> AutoLinkState:
        """Move to the state ``event`` leads to.

        Raises:
            AutoLinkError: ``event`` is not expected in the current state.
        """
        try:
            state = TRANSITIONS[self.state, event]
        except KeyError:
            raise AutoLinkError(
                f"auto-link {self.label!r}: event {event.value!r} "
                f"in state {self.state.value!r}") from None
        if state is not self.state:
            log.debug("auto-link %s: %s -> %s (%s)", self.label, self.state.value, state.value,
                      event.value)
        self.state = state
        return state

    def connected(self, peer: P) -> None:
        """The link is being attached on ``peer``."""
        self.fire(AutoLinkEvent.CONNECTED)
        self.peer = peer
        self.retry_at = None

    def replied(self, has_address: bool, link_id: int | None) -> bool:
        """The peer answered the attach; True when the link is now active."""
        if not has_address:
            self.fire(AutoLinkEvent.REPLIED_EMPTY)
            return False
        self.fire(AutoLinkEvent.REPLIED)
        self.link_id = link_id
        self.failures = 0
        self.last_error = None
        return True

    def detached(self, error: str, now: float) -> None:
        """The peer detached the link: failed, tried again after a delay."""
        self.fire(AutoLinkEvent.DETACHED)
        self.link_id = None
        self.last_error = error
        self.retry_at = now + self.retry_delay_s
        self.failures += 1

    def disconnected(self) -> None:
        """The connection went away: inactive until one serves it again."""
        self.fire(AutoLinkEvent.DISCONNECTED)
        self.peer = None
        self.link_id = None
        self.retry_at = None

    @property
    def retry_delay_s(self) -> float:
        """Delay before the next attempt after a failure."""
        return FIRST_RETRY_S if self.failures == 0 else RETRY_S


__all__ = ["FIRST_RETRY_S", "RETRY_S", "TRANSITIONS", "AutoLink", "AutoLinkEvent",
           "AutoLinkState"]
