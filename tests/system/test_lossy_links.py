"""Inter-router and edge connections over a link that loses packets, delays
them and lets them overtake each other (bench/lossy.py: a network namespace
joined by a veth pair, loss by nftables, or by bench.wire, a netem-like
packet path through two TUN devices): an at-least-once flow loses nothing
and every delivery has one outcome (docs/reliability.md#lossy-and-slow-links)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.lossy import Impairment, Namespace, flow, unavailable
from bench.processes import HOP

WHY = unavailable()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"lossy links: {WHY}")
COUNT = 2000


@pytest.fixture(scope="module")
def ns() -> Iterator[Namespace]:
    with Namespace.made("t") as made:
        yield made


def _assert_each_accepted_once(row: dict[str, object]) -> None:
    assert row["sent"] == COUNT
    assert row["accepted"] == COUNT, row
    assert row["released"] == row["rejected"] == row["modified"] == 0, row
    assert row["received"] == COUNT, "nothing lost on the way"


def test_an_inter_router_link_losing_5_percent_loses_no_message(ns: Namespace) -> None:
    _assert_each_accepted_once(flow(ns, HOP, Impairment("loss 5%", loss=0.05), COUNT))


def test_an_edge_link_losing_5_percent_and_50_ms_late_loses_no_message(ns: Namespace) -> None:
    row = flow(ns, HOP, Impairment("loss 5%, 50 ms", loss=0.05, delay_ms=50.0), COUNT,
               edge=True)
    _assert_each_accepted_once(row)
    latency = row["latency_us"]
    assert isinstance(latency, dict) and latency["p50"] >= 50_000, "the delay was there"
    wire = row["wire"]
    assert isinstance(wire, dict) and wire["out"]["lost"] > 0 and wire["back"]["lost"] > 0


def test_an_inter_router_link_with_jitter_and_reordering_loses_no_message(
        ns: Namespace) -> None:
    how = Impairment("loss 5%, 20 +/- 10 ms, 10% reordered", loss=0.05, delay_ms=20.0,
                     jitter_ms=10.0, reorder=0.10)
    row = flow(ns, HOP, how, COUNT)
    _assert_each_accepted_once(row)
    wire = row["wire"]
    assert isinstance(wire, dict)
    for way in ("out", "back"):
        assert wire[way]["reordered"] > 0, f"packets overtook each other {way}"
        assert wire[way]["lost"] > 0, f"packets were dropped {way}"
