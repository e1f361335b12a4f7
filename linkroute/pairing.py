"""The life of a link-routed pair of links, as a transition table
(docs/brokers.md#the-routed-pair).

A client's link (the *near* end) and the link the router attached toward
the container (the *far* end, on a container connection or on the way to
another router) are a pair.  ``TRANSITIONS`` says what each event does to
the pair and which actions the other end gets:

* ``attaching``: the far attach is out.  The far side's answer with a
  terminus answers the client's attach with it (``open``); an answer with a
  null terminus answers the client with a null terminus (``refused``) and the
  far side's detach follows; a detach or a lost connection on either side
  ends the pair, the client getting a null terminus and the error.
* ``open``: credit, transfers and dispositions pass through (the adapter's
  relay).  A detach on one side is passed to the other with its error and
  its ``closed`` flag (``near closing`` or ``far closing``); a lost
  connection gives the other side ``qd:routed-link-lost``, closed unless
  the lost side's terminus was resumable.
* ``near closing`` / ``far closing``: the side that detached waits for the
  other side's detach, which is its answer (so a client that only detaches
  learns whether the container closed the link); a side that closed is
  answered closed whatever the other side's flag (AMQP 1.0 section 2.6.6:
  a close is answered by a close); losing the other side's connection
  answers it with ``qd:routed-link-lost``.
* ``closed``: nothing more happens; a late event is a bug and raises.

While attaching or refused, the side that detached is answered by whoever
handles its detach, not by this table.  Outcomes for deliveries still unsettled when a pair ends are
the relay's (every one gets one).  It must not know what a link is.
"""

from __future__ import annotations

import enum
import logging
from typing import Generic, TypeVar

import attrs

from linkroute.spec import LinkRouteError

log = logging.getLogger(__name__)

E = TypeVar("E")

ROUTED_LINK_LOST = "qd:routed-link-lost"
ROUTED_LINK_LOST_DESCRIPTION = "Connectivity to the peer container was lost"


class PairState(enum.Enum):
    ATTACHING = "attaching"
    REFUSED = "refused"
    OPEN = "open"
    NEAR_CLOSING = "near closing"  # the client detached; the far side's answer is awaited
    FAR_CLOSING = "far closing"  # the far side detached; the client's answer is awaited
    CLOSED = "closed"


class PairEvent(enum.Enum):
    ANSWERED = "answered"  # the far side answered the attach with a terminus
    REFUSED = "refused"  # the far side answered with a null terminus
    NEAR_DETACHED = "near detached"  # the client detached its link
    FAR_DETACHED = "far detached"  # the far side detached its link
    NEAR_LOST = "near lost"  # the client's connection went away
    FAR_LOST = "far lost"  # the far side's connection went away


class Side(enum.Enum):
    NEAR = "near"
    FAR = "far"


class Answer(enum.Enum):
    """How the client's attach is answered."""

    TERMINUS = "terminus"  # with the far side's termini
    NULL = "null"  # with a null terminus: the attach is refused


@attrs.frozen(kw_only=True)
class Detach:
    """A detach passed on, or the router's own."""

    condition: str | None = None
    description: str | None = None
    closed: bool = True


@attrs.frozen(kw_only=True)
class AnswerNear:
    answer: Answer


@attrs.frozen(kw_only=True)
class DetachSide:
    side: Side
    detach: Detach


PairAction = AnswerNear | DetachSide

_S = PairState
_V = PairEvent
_TERMINUS = AnswerNear(answer=Answer.TERMINUS)
_NULL = AnswerNear(answer=Answer.NULL)
# What the other side gets; ``None`` stands for the event's own detach.
_NEAR = Side.NEAR
_FAR = Side.FAR

TRANSITIONS: dict[tuple[PairState, PairEvent],
                  tuple[PairState, tuple[AnswerNear | Side, ...]]] = {
    (_S.ATTACHING, _V.ANSWERED): (_S.OPEN, (_TERMINUS,)),
    (_S.ATTACHING, _V.REFUSED): (_S.REFUSED, (_NULL,)),
    (_S.ATTACHING, _V.FAR_DETACHED): (_S.CLOSED, (_NULL, _NEAR)),
    (_S.ATTACHING, _V.FAR_LOST): (_S.CLOSED, (_NULL, _NEAR)),
    (_S.ATTACHING, _V.NEAR_DETACHED): (_S.CLOSED, (_FAR,)),
    (_S.ATTACHING, _V.NEAR_LOST): (_S.CLOSED, (_FAR,)),
    (_S.REFUSED, _V.FAR_DETACHED): (_S.CLOSED, (_NEAR,)),
    (_S.REFUSED, _V.FAR_LOST): (_S.CLOSED, (_NEAR,)),
    (_S.REFUSED, _V.NEAR_DETACHED): (_S.CLOSED, (_FAR,)),
    (_S.REFUSED, _V.NEAR_LOST): (_S.CLOSED, (_FAR,)),
    (_S.OPEN, _V.FAR_DETACHED): (_S.FAR_CLOSING, (_NEAR,)),
    (_S.OPEN, _V.FAR_LOST): (_S.CLOSED, (_NEAR,)),
    (_S.OPEN, _V.NEAR_DETACHED): (_S.NEAR_CLOSING, (_FAR,)),
    (_S.OPEN, _V.NEAR_LOST): (_S.CLOSED, (_FAR,)),
    (_S.NEAR_CLOSING, _V.FAR_DETACHED): (_S.CLOSED, (_NEAR,)),
    (_S.NEAR_CLOSING, _V.FAR_LOST): (_S.CLOSED, (_NEAR,)),
    (_S.NEAR_CLOSING, _V.NEAR_LOST): (_S.CLOSED, ()),
    (_S.FAR_CLOSING, _V.NEAR_DETACHED): (_S.CLOSED, (_FAR,)),
    (_S.FAR_CLOSING, _V.NEAR_LOST): (_S.CLOSED, (_FAR,)),
    (_S.FAR_CLOSING, _V.FAR_LOST): (_S.CLOSED, ()),
}


@attrs.define(eq=False)
class RoutedLink(Generic[E]):
    """A client's link and the link the router attached for it.

    ``near_resumable``/``far_resumable``: that side's terminus outlives its
    connection, so losing the connection detaches the other side without
    closing it (docs/brokers.md#the-routed-pair).
    """

    near: E
    far: E
    state: PairState = PairState.ATTACHING
    near_resumable: bool = False
    far_resumable: bool = False
    #: The side that detached first closed its link (not only detached it).
    closing_closed: bool = False

    def fire(self, event: PairEvent, detach: Detach | None = None) -> list[PairAction]:
        """Apply ``event``; return what the ends get.

        Args:
            event: what happened.
            detach: for ``NEAR_DETACHED``/``FAR_DETACHED``, the detach as
                received, passed on to the other side.

        Raises:
            LinkRouteError: the event is not expected in the current state.
        """
        try:
            state, acts = TRANSITIONS[self.state, event]
        except KeyError:
            raise LinkRouteError(f"routed link: event {event.value!r} in state "
                                 f"{self.state.value!r}") from None
        log.debug("routed link %s -> %s (%s)", self.state.value, state.value, event.value)
        answering = self.state in (PairState.NEAR_CLOSING, PairState.FAR_CLOSING)
        self.state = state
        passed = self._detach_for(event, detach)
        if self.closing_side is not None:
            self.closing_closed = passed.closed
        elif answering and self.closing_closed and not passed.closed:
            passed = attrs.evolve(passed, closed=True)
        actions: list[PairAction] = []
        for act in acts:
            if isinstance(act, AnswerNear):
                actions.append(act)
            else:
                actions.append(DetachSide(side=act, detach=passed))
        return actions

    def _detach_for(self, event: PairEvent, detach: Detach | None) -> Detach:
        if event is PairEvent.NEAR_LOST:
            return _lost(closed=not self.near_resumable)
        if event is PairEvent.FAR_LOST:
            return _lost(closed=not self.far_resumable)
        if detach is not None:
            return detach
        return Detach()

    @property
    def open(self) -> bool:
        return self.state is PairState.OPEN

    @property
    def closing_side(self) -> Side | None:
        """The side that detached and waits for the other side's detach as its answer."""
        if self.state is PairState.NEAR_CLOSING:
            return Side.NEAR
        if self.state is PairState.FAR_CLOSING:
            return Side.FAR
        return None


def _lost(*, closed: bool) -> Detach:
    return Detach(condition=ROUTED_LINK_LOST, description=ROUTED_LINK_LOST_DESCRIPTION,
                  closed=closed)


__all__ = ["ROUTED_LINK_LOST", "ROUTED_LINK_LOST_DESCRIPTION", "TRANSITIONS", "Answer",
           "AnswerNear", "Detach", "DetachSide", "PairAction", "PairEvent", "PairState",
           "RoutedLink", "Side"]
