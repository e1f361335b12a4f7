"""Outcome rules: multicast folding and lost copies (docs/routing.md#multicast-outcomes,
docs/routing.md#when-a-link-or-connection-goes)."""

from __future__ import annotations

from functools import reduce

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.core import LostCopy, Outcome, fold_multicast, outcome_for_lost_copy
from router.core.settlement import ACCEPTED, MODIFIED, REJECTED, RELEASED

TERMINAL = [ACCEPTED, REJECTED, RELEASED, MODIFIED]


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([ACCEPTED], ACCEPTED),
        ([RELEASED, ACCEPTED], ACCEPTED),
        ([ACCEPTED, REJECTED], REJECTED),
        ([MODIFIED, RELEASED], MODIFIED),
        ([RELEASED, RELEASED], RELEASED),
        ([MODIFIED, ACCEPTED, RELEASED], ACCEPTED),
    ],
)
def test_fold_follows_rejected_accepted_modified_released(states: list[int], expected: int) -> None:
    result = None
    for state in states:
        result = fold_multicast(result, state)
    assert result == expected


def test_declared_or_unknown_state_counts_as_rejected() -> None:
    assert fold_multicast(ACCEPTED, 0x33) == REJECTED


@given(st.lists(st.sampled_from(TERMINAL), min_size=1, max_size=8))
def test_fold_ignores_report_order(states: list[int]) -> None:
    forward = reduce(fold_multicast, states, None)
    backward = reduce(fold_multicast, reversed(states), None)
    assert forward == backward
    rank = {RELEASED: 0, MODIFIED: 1, ACCEPTED: 2, REJECTED: 3}
    assert forward == max(states, key=rank.__getitem__)


def test_lost_copy_never_sent_is_released_and_sent_copy_modified() -> None:
    assert outcome_for_lost_copy(LostCopy.UNDELIVERED) is Outcome.RELEASED
    assert outcome_for_lost_copy(LostCopy.UNSETTLED) is Outcome.MODIFIED
