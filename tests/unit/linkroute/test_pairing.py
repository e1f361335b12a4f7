"""The routed-link pair: answers, detaches passed on, lost connections."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from linkroute import (
    ROUTED_LINK_LOST,
    TRANSITIONS,
    Answer,
    AnswerNear,
    Detach,
    DetachSide,
    LinkRouteError,
    PairEvent,
    PairState,
    RoutedLink,
    Side,
)

E = PairEvent


def pair(*, near_resumable: bool = False) -> RoutedLink[str]:
    return RoutedLink(near="client-link", far="broker-link", near_resumable=near_resumable)


def test_the_far_answer_answers_the_client_and_opens_the_pair() -> None:
    p = pair()
    assert p.fire(E.ANSWERED) == [AnswerNear(answer=Answer.TERMINUS)]
    assert p.open


def test_a_refusal_answers_with_a_null_terminus_then_passes_the_detach_on() -> None:
    p = pair()
    assert p.fire(E.REFUSED) == [AnswerNear(answer=Answer.NULL)]
    refusal = Detach(condition="amqp:not-found", description="no queue")
    assert p.fire(E.FAR_DETACHED, refusal) == [DetachSide(side=Side.NEAR, detach=refusal)]
    assert p.state is PairState.CLOSED


def test_detaches_are_passed_on_with_their_error_and_closed_flag() -> None:
    p = pair()
    p.fire(E.ANSWERED)
    detach = Detach(condition="amqp:resource-deleted", description="gone", closed=False)
    assert p.fire(E.FAR_DETACHED, detach) == [DetachSide(side=Side.NEAR, detach=detach)]
    q = pair()
    q.fire(E.ANSWERED)
    assert q.fire(E.NEAR_DETACHED, Detach()) == [DetachSide(side=Side.FAR, detach=Detach())]


def test_the_side_that_detached_is_answered_by_the_other_sides_detach() -> None:
    p = pair()
    p.fire(E.ANSWERED)
    only_detached = Detach(closed=False)
    assert p.fire(E.NEAR_DETACHED, only_detached) == [
        DetachSide(side=Side.FAR, detach=only_detached)]
    assert (p.state, p.closing_side) == (PairState.NEAR_CLOSING, Side.NEAR)
    closed = Detach(closed=True)
    assert p.fire(E.FAR_DETACHED, closed) == [DetachSide(side=Side.NEAR, detach=closed)]
    assert (p.state, p.closing_side) == (PairState.CLOSED, None)
    q = pair()
    q.fire(E.ANSWERED)
    q.fire(E.FAR_DETACHED, only_detached)
    assert q.closing_side is Side.FAR
    assert q.fire(E.NEAR_DETACHED, only_detached) == [
        DetachSide(side=Side.FAR, detach=only_detached)]


def test_the_answering_side_lost_answers_with_routed_link_lost() -> None:
    p = pair()
    p.fire(E.ANSWERED)
    p.fire(E.NEAR_DETACHED, Detach())
    (action,) = p.fire(E.FAR_LOST)
    assert isinstance(action, DetachSide) and action.side is Side.NEAR
    assert action.detach.condition == ROUTED_LINK_LOST
    q = pair()
    q.fire(E.ANSWERED)
    q.fire(E.NEAR_DETACHED, Detach())
    assert q.fire(E.NEAR_LOST) == [] and q.state is PairState.CLOSED


def test_a_lost_connection_gives_the_other_side_routed_link_lost() -> None:
    p = pair()
    p.fire(E.ANSWERED)
    (action,) = p.fire(E.FAR_LOST)
    assert isinstance(action, DetachSide) and action.side is Side.NEAR
    assert action.detach.condition == ROUTED_LINK_LOST and action.detach.closed


def test_losing_a_resumable_side_detaches_the_other_without_closing() -> None:
    p = pair(near_resumable=True)
    p.fire(E.ANSWERED)
    (action,) = p.fire(E.NEAR_LOST)
    assert isinstance(action, DetachSide) and action.side is Side.FAR
    assert action.detach.condition == ROUTED_LINK_LOST and not action.detach.closed


def test_the_far_side_lost_before_answering_refuses_the_client() -> None:
    p = pair()
    null, detach = p.fire(E.FAR_LOST)
    assert null == AnswerNear(answer=Answer.NULL)
    assert isinstance(detach, DetachSide) and detach.side is Side.NEAR
    assert detach.detach.condition == ROUTED_LINK_LOST


def test_the_client_leaving_before_the_answer_detaches_the_far_link() -> None:
    p = pair()
    assert p.fire(E.NEAR_LOST)[0] == DetachSide(side=Side.FAR, detach=Detach(
        condition=ROUTED_LINK_LOST, description="Connectivity to the peer container was lost"))


@given(state=st.sampled_from(PairState), event=st.sampled_from(PairEvent))
def test_every_event_follows_the_table_or_raises(state: PairState, event: PairEvent) -> None:
    p = pair()
    p.state = state
    expected = TRANSITIONS.get((state, event))
    if expected is None:
        with pytest.raises(LinkRouteError, match="routed link: event"):
            p.fire(event)
        assert p.state is state
    else:
        p.fire(event, Detach())
        assert p.state is expected[0]


def test_every_pair_ends_closed_whatever_happens_first() -> None:
    for first in (E.NEAR_DETACHED, E.FAR_DETACHED, E.NEAR_LOST, E.FAR_LOST):
        for start in (PairState.ATTACHING, PairState.REFUSED, PairState.OPEN):
            p = pair()
            p.state = start
            p.fire(first, Detach())
            answer = {Side.NEAR: E.FAR_DETACHED, Side.FAR: E.NEAR_DETACHED}
            if p.closing_side is not None:
                p.fire(answer[p.closing_side], Detach())
            assert p.state is PairState.CLOSED


def test_a_side_that_closed_is_answered_closed_whatever_the_other_side_says() -> None:
    p = pair()
    p.fire(E.ANSWERED)
    p.fire(E.NEAR_DETACHED, Detach(closed=True))
    assert p.fire(E.FAR_DETACHED, Detach(condition="x", closed=False)) == [
        DetachSide(side=Side.NEAR, detach=Detach(condition="x", closed=True))]
