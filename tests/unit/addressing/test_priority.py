"""Effective priority (docs/routing.md#priority)."""

from __future__ import annotations

import pytest

from addressing import DEFAULT_PRIORITY, effective_priority


def test_default_is_four_without_address_or_header_priority() -> None:
    assert DEFAULT_PRIORITY == 4
    assert effective_priority(None, None) == 4


@pytest.mark.parametrize("header", [None, 0, 4, 9, 200])
def test_configured_address_priority_wins(header: int | None) -> None:
    assert effective_priority(7, header) == 7
    assert effective_priority(0, header) == 0


@pytest.mark.parametrize(("header", "expected"), [(0, 0), (3, 3), (9, 9), (10, 9), (255, 9)])
def test_header_priority_is_clamped(header: int, expected: int) -> None:
    assert effective_priority(None, header) == expected


def test_negative_address_priority_means_unset() -> None:
    assert effective_priority(-1, 2) == 2
    assert effective_priority(-1, None) == 4


def test_out_of_range_values_are_clamped() -> None:
    assert effective_priority(None, -3) == 0
    assert effective_priority(12, None) == 9
