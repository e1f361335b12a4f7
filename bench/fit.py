"""A straight line through memory samples: how fast a router's memory grows.

``slope(points)`` fits ``y = a + b x`` by least squares to ``(seconds, MB)``
points and gives ``b`` per hour with its standard error and the slopes of
the first and second halves on their own, so a report can say whether the
growth is within the noise of zero (``Slope.flat``) and whether it is slowing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs


@attrs.frozen
class Slope:
    """Megabytes per hour, from ``n`` samples over ``span_s`` seconds."""

    mb_per_hour: float
    stderr_mb_per_hour: float
    first_half_mb_per_hour: float
    second_half_mb_per_hour: float
    n: int
    span_s: float

    @property
    def flat(self) -> bool:
        """Within two standard errors of zero, or below 0.1 MB an hour."""
        return abs(self.mb_per_hour) <= max(2 * self.stderr_mb_per_hour, 0.1)

    def as_dict(self) -> dict[str, float | int | bool]:
        return {"mb_per_hour": round(self.mb_per_hour, 3),
                "stderr_mb_per_hour": round(self.stderr_mb_per_hour, 3),
                "first_half_mb_per_hour": round(self.first_half_mb_per_hour, 3),
                "second_half_mb_per_hour": round(self.second_half_mb_per_hour, 3),
                "samples": self.n, "span_s": round(self.span_s, 1), "flat": self.flat}


def _line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The least-squares slope (per second) and its standard error."""
    n = len(points)
    if n < 3:
        return 0.0, 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0, 0.0
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    a = my - b * mx
    residual = sum((y - a - b * x) ** 2 for x, y in points)
    return b, math.sqrt(residual / (n - 2) / sxx)


def slope(points: Sequence[tuple[float, float]]) -> Slope:
    """Fit ``points`` (seconds, MB); at least three are needed for a slope."""
    points = sorted(points)
    b, err = _line(points)
    half = len(points) // 2
    first, _ = _line(points[:half])
    second, _ = _line(points[half:])
    span = points[-1][0] - points[0][0] if points else 0.0
    return Slope(b * 3600, err * 3600, first * 3600, second * 3600, len(points), span)


__all__ = ["Slope", "slope"]
