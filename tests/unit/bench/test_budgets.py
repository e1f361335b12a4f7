"""bench.budgets: the per-message figures checked against their budgets, and
bench.allocations, which counts Python's allocations for them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.allocations import counting
from bench.budgets import FIGURES, problems

ROOT = Path(__file__).resolve().parents[3]
BUDGET = {"one-router": {"proton_calls": 27.0, "crossings": 6.0, "events": 2.0,
                         "allocations": 70.0}}


def test_figures_within_their_budgets_are_no_problem() -> None:
    measured = {"one-router": {"proton_calls": 27.2, "crossings": 6.0, "events": 1.98,
                               "allocations": 70.5}}
    assert problems(measured, BUDGET) == []


def test_a_figure_over_its_budget_is_named_with_how_much() -> None:
    measured = {"one-router": {**BUDGET["one-router"], "proton_calls": 28.0}}
    found = problems(measured, BUDGET)
    assert found == ["one-router: proton_calls per message 28 is over its budget 27 (+3.7%)"]


def test_a_figure_well_under_its_budget_asks_for_a_lower_budget() -> None:
    measured = {"one-router": {**BUDGET["one-router"], "allocations": 60.0}}
    [found] = problems(measured, BUDGET)
    assert "allocations per message 60 is under its budget 70" in found
    assert "lower the budget" in found


def test_a_scenario_or_figure_without_a_budget_is_a_problem() -> None:
    figures = dict.fromkeys(FIGURES, 1.0)
    assert problems({"new": figures}, BUDGET)[0].startswith("new: no budget")
    partial = {"one-router": {k: v for k, v in BUDGET["one-router"].items() if k != "events"}}
    assert problems({"one-router": BUDGET["one-router"]}, partial) == \
        ["one-router: no budget for events"]


def test_allocations_are_counted_only_while_on() -> None:
    with counting() as counter:
        kept: list[list[int]] = [[] for _ in range(10)]  # before the count starts
        counter.on()
        made = [[i] for i in range(1000)]
        counter.off()
        during = counter.allocations
        more = [[i] for i in range(1000)]
        assert counter.allocations == during, "nothing is counted while off"
    assert during >= 1000, "each new list is at least one allocation"
    assert len(kept) + len(made) + len(more) == 2010
    with counting() as again:
        assert again.allocations == 0, "each count starts from nothing"


def test_every_scenario_is_within_its_budgets() -> None:
    """The check itself (in a subprocess: it loads the router's pure-Python
    modules, where this process may hold the compiled build); its message
    names each figure off its budget."""
    done = subprocess.run([sys.executable, "-m", "bench.budgets", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "within its budget" in done.stdout
