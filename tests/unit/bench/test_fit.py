"""bench.fit: the slope of memory samples, per hour, with its spread."""

from __future__ import annotations

import random

import pytest

from bench.fit import slope


def test_a_steady_rise_is_measured_per_hour_and_is_not_flat() -> None:
    rng = random.Random(7)
    # 2 MB an hour, sampled each second for half an hour, with 0.05 MB of noise.
    points = [(t, 40.0 + 2.0 * t / 3600 + rng.gauss(0, 0.05)) for t in range(1800)]
    fit = slope(points)
    assert fit.mb_per_hour == pytest.approx(2.0, abs=0.1)
    assert 0 < fit.stderr_mb_per_hour < 0.1
    assert not fit.flat
    assert fit.first_half_mb_per_hour == pytest.approx(2.0, abs=0.5)
    assert fit.n == 1800 and fit.span_s == 1799


def test_noise_around_a_level_is_flat() -> None:
    rng = random.Random(11)
    points = [(t, 45.0 + rng.gauss(0, 0.2)) for t in range(0, 3600, 5)]
    fit = slope(points)
    assert fit.flat
    assert abs(fit.mb_per_hour) < 0.2


def test_growth_that_levels_off_shows_in_the_halves() -> None:
    # Rising in the first half hour, level in the second.
    points = [(t, 40.0 + min(t, 1800) / 1800) for t in range(0, 3600, 10)]
    fit = slope(points)
    assert fit.first_half_mb_per_hour == pytest.approx(2.0, rel=0.01)
    assert fit.second_half_mb_per_hour == pytest.approx(0.0, abs=1e-9)


def test_too_few_points_give_no_slope() -> None:
    assert slope([(0.0, 1.0), (1.0, 2.0)]).mb_per_hour == 0.0
    assert slope([]).n == 0
