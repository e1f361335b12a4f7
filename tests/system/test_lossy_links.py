"""Inter-router and edge connections over a link that loses packets and
delays them (bench/lossy.py: a network namespace and a veth pair, loss by
nftables, delay by a relay): an at-least-once flow loses nothing and every
delivery has one outcome (docs/reliability.md#lossy-and-slow-links)."""

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
