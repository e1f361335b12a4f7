"""Per-message budgets: what the router does for each message, counted, and
checked against the figures kept in ``bench/budgets.json``.

Each scenario moves messages through in-process routers as
``bench.engine_cost`` does (clients over socket pairs, routers joined by
Unix sockets, all driven on the same thread with a clock that stands still,
so the run is the same every time) and counts, inside ``Engine.run_once``
only:

- ``proton_calls``: proton C calls (``bench.calls``: the router's modules
  and proton's Python API);
- ``crossings``: calls from Python into C in the compiled build (each
  accelerator function once);
- ``events``: collector events;
- ``allocations``: Python's allocations (``bench.allocations``: object and
  memory allocators, mallocs and callocs).

All per message, on the pure-Python modules (``bench.calls`` loads them
from source; the compiled build runs the same calls and fewer
allocations).  ``--check`` fails when a figure is above its budget by more
than ``TOLERANCE``, saying which and by how much; it fails too when one is
below by more than ``SLACK``, asking for the budget to be lowered
(``--write`` writes the figures measured), so that a budget follows each
improvement down.

    python -m bench.budgets [--check | --write] [--only NAME] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BUDGETS = Path(__file__).with_name("budgets.json")
#: A figure may exceed its budget by this fraction (the socket pairs' buffer
#: sizes, the kernel's, can move a few messages between wake-ups).
TOLERANCE = 0.01
#: A figure this far below its budget asks for the budget to be lowered.
SLACK = 0.03
#: Messages counted in each scenario, after a warm-up run of ``WARM_UP``.
MESSAGES = 5000
WARM_UP = 1000
FIGURES = ("proton_calls", "crossings", "events", "allocations")


def _multicast_table() -> Any:
    from addressing import AddressSpec, AddressTable, Distribution

    table = AddressTable()
    table.add(AddressSpec(prefix="multicast", distribution=Distribution.MULTICAST))
    return table


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    #: ``bench.engine_cost.measure``'s keyword arguments, made when run.
    arguments: Callable[[], dict[str, Any]]


SCENARIOS = (
    Scenario("one-router", "one producer, one consumer, 100 B unsettled, accepted",
             lambda: {"address": "cost"}),
    Scenario("multicast", "one producer, three consumers of a multicast address, "
             "100 B unsettled, each copy accepted",
             lambda: {"address": "multicast/cost", "receivers": 3,
                      "addresses": _multicast_table()}),
    Scenario("link-routed", "one producer whose link is routed to a broker on a "
             "route-container connection, 100 B unsettled, accepted by the broker",
             lambda: {"address": "lr", "link_routed": True}),
    Scenario("line-of-three", "three interior routers in a line, the producer on the "
             "first and the consumer on the last, 100 B unsettled, accepted (the three "
             "routers' counts together)",
             lambda: {"address": "cost", "line": True}),
)


def measure(scenario: Scenario, messages: int = MESSAGES) -> dict[str, float]:
    """The scenario's figures per message (``bench.calls.prefer_sources``
    must have been called before the router's modules were imported)."""
    from bench.allocations import counting
    from bench.calls import count
    from bench.engine_cost import measure as move

    move(WARM_UP, **scenario.arguments())
    with counting() as allocations:
        counts = count(messages, allocations=allocations, **scenario.arguments())
    m = counts.messages
    return {"proton_calls": round(counts.total() / m, 3),
            "crossings": round(counts.crossings() / m, 3),
            "events": round(counts.events.total() / m, 3),
            "allocations": round(allocations.allocations / m, 3)}


def problems(measured: dict[str, dict[str, float]],
             budgets: dict[str, dict[str, float]]) -> list[str]:
    """Each figure over its budget (beyond ``TOLERANCE``) or under it
    (beyond ``SLACK``), in words; a scenario or figure without a budget too."""
    out = []
    for name, figures in measured.items():
        budget = budgets.get(name)
        if budget is None:
            out.append(f"{name}: no budget in {BUDGETS.name} (python -m bench.budgets --write)")
            continue
        for figure in FIGURES:
            value, allowed = figures[figure], budget.get(figure)
            if allowed is None:
                out.append(f"{name}: no budget for {figure}")
            elif value > allowed * (1 + TOLERANCE):
                out.append(f"{name}: {figure} per message {value:g} is over its budget "
                           f"{allowed:g} (+{(value / allowed - 1) * 100:.1f}%)")
            elif value < allowed * (1 - SLACK):
                out.append(f"{name}: {figure} per message {value:g} is under its budget "
                           f"{allowed:g} ({(value / allowed - 1) * 100:.1f}%): lower the "
                           f"budget (python -m bench.budgets --write)")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.budgets", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", action="store_true",
                        help="fail when a figure is off its budget in bench/budgets.json")
    action.add_argument("--write", action="store_true",
                        help="write the figures measured as the budgets")
    parser.add_argument("--only", default="", help="the scenarios whose names hold this text")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)

    from bench.calls import compiled_hot_modules, prefer_sources

    prefer_sources()
    compiled = compiled_hot_modules()
    if compiled:
        print(f"bench.budgets: compiled modules loaded: {', '.join(compiled)}", file=sys.stderr)
        return 2
    chosen = [s for s in SCENARIOS if args.only in s.name]
    measured = {s.name: measure(s) for s in chosen}
    if args.json:
        print(json.dumps(measured, indent=1, sort_keys=True))
    else:
        for s in chosen:
            figures = ", ".join(f"{k} {v:g}" for k, v in measured[s.name].items())
            print(f"{s.name} ({s.description}): per message {figures}")
    if args.write:
        budgets = json.loads(BUDGETS.read_text()) if BUDGETS.exists() else {}
        budgets.update(measured)
        BUDGETS.write_text(json.dumps(budgets, indent=1, sort_keys=True) + "\n")
        print(f"bench.budgets: written to {BUDGETS}")
        return 0
    if args.check:
        found = problems(measured, json.loads(BUDGETS.read_text()))
        for line in found:
            print(f"bench.budgets: {line}", file=sys.stderr)
        if found:
            return 1
        print(f"bench.budgets: every figure within its budget ({len(chosen)} scenarios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
