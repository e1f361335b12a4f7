"""The auto-link state machine: its transitions, its retry delays, its refusals."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from addressing import Direction
from autolink import (
    FIRST_RETRY_S,
    RETRY_S,
    TRANSITIONS,
    AutoLink,
    AutoLinkError,
    AutoLinkEvent,
    AutoLinkSpec,
    AutoLinkState,
)

S = AutoLinkState


def autolink(**kw: object) -> AutoLink[str]:
    spec = AutoLinkSpec(address="q", direction=Direction.OUT, connection="broker", **kw)  # type: ignore[arg-type]
    return AutoLink(spec=spec, identity="1")


def test_attach_then_reply_with_address_makes_it_active() -> None:
    al = autolink()
    al.connected("C1")
    assert (al.state, al.peer) == (S.ATTACHING, "C1")
    assert al.replied(True, link_id=7)
    assert (al.state, al.link_id) == (S.ACTIVE, 7)


def test_reply_without_address_leaves_it_attaching() -> None:
    al = autolink()
    al.connected("C1")
    assert not al.replied(False, link_id=7)
    assert al.state is S.ATTACHING
    assert al.link_id is None


def test_refused_attach_fails_with_the_error_and_a_first_retry_after_2s() -> None:
    al = autolink()
    al.connected("C1")
    al.detached("amqp:not-found: no queue", now=100.0)
    assert al.state is S.FAILED
    assert al.last_error == "amqp:not-found: no queue"
    assert al.retry_at == 100.0 + FIRST_RETRY_S
    assert al.peer == "C1", "a failed link keeps the connection it failed on"


def test_consecutive_failures_retry_every_5s_and_success_resets() -> None:
    al = autolink()
    al.connected("C1")
    al.detached("first", now=0.0)
    al.connected("C1")
    al.detached("second", now=10.0)
    assert al.retry_at == 10.0 + RETRY_S
    al.connected("C1")
    assert al.replied(True, link_id=1)
    assert al.last_error is None
    al.detached("after success", now=50.0)
    assert al.retry_at == 50.0 + FIRST_RETRY_S


def test_losing_the_connection_makes_any_state_inactive_and_cancels_the_retry() -> None:
    for setup in ("attaching", "active", "failed"):
        al = autolink()
        al.connected("C1")
        if setup == "active":
            al.replied(True, link_id=1)
        elif setup == "failed":
            al.detached("x", now=0.0)
        al.disconnected()
        assert (al.state, al.peer, al.link_id, al.retry_at) == (S.INACTIVE, None, None, None)


def test_labels_and_external_address() -> None:
    assert autolink().label == "1"
    assert autolink(name="orders-out").label == "orders-out"
    assert autolink().external_address == "q"
    assert autolink(external_address="broker.q").external_address == "broker.q"


@given(state=st.sampled_from(AutoLinkState), event=st.sampled_from(AutoLinkEvent))
def test_every_event_either_follows_the_table_or_raises(state: AutoLinkState,
                                                        event: AutoLinkEvent) -> None:
    al = autolink()
    al.state = state
    expected = TRANSITIONS.get((state, event))
    if expected is None:
        with pytest.raises(AutoLinkError, match=f"event {event.value!r} in state"):
            al.fire(event)
        assert al.state is state, "a refused event changes nothing"
    else:
        assert al.fire(event) is expected


def test_inactive_link_cannot_be_detached_or_replied_to() -> None:
    al = autolink()
    with pytest.raises(AutoLinkError):
        al.detached("x", now=0.0)
    with pytest.raises(AutoLinkError):
        al.replied(True, link_id=1)
