"""bench.calls counts the router's proton C calls and events per message.

The counting needs the pure-Python hot-path modules; ``python -m bench.calls``
loads them from source, so it runs in a subprocess (this process may hold
the compiled build).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
N = 200


@pytest.fixture(scope="module")
def counts() -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "bench.calls", str(N), "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_every_message_is_moved_and_counted(counts: dict[str, Any]) -> None:
    assert counts["messages"] == N
    assert counts["wakeups"] > 0
    assert counts["replaced"] > 0
    router = counts["calls"]["router"]
    per_message = sum(router.values()) / N
    assert 5 < per_message < 200


def test_one_receive_and_one_send_per_message(counts: dict[str, Any]) -> None:
    """The router reads each message once and sends it on once, nothing more
    (the set-up moves no message)."""
    router = counts["calls"]["router"]
    assert router["pn_link_recv"] == N
    assert router["pn_link_send"] == N
    assert router["pn_delivery"] == N


def test_only_the_router_side_is_counted(counts: dict[str, Any]) -> None:
    """The clients' own proton calls happen outside Engine.run_once: the
    client sends N messages and accepts N, which would show here."""
    api = counts["calls"].get("proton API", {})
    assert api.get("pn_link_send", 0) == 0
    assert api.get("pn_delivery_update", 0) == 0


def test_events_by_type_and_link_side(counts: dict[str, Any]) -> None:
    events = counts["events"]
    assert events["PN_DELIVERY"] == 2 * N  # the transfer in, the consumer's settlement
    assert sum(events.values()) == counts["popped"]
    deliveries = counts["deliveries"]
    assert deliveries["router receiving (producer -> router): transfer"] == N
    assert deliveries["router sending (router -> consumer): consumer settled"] == N
    assert sum(deliveries.values()) == events["PN_DELIVERY"]


def test_the_dispatch_loop_costs_are_attributed(counts: dict[str, Any]) -> None:
    """Each dispatched event costs a peek, a type and a pop in the
    accelerator's event function."""
    sites = {(layer, fn, site): n for layer, fn, site, n in counts["sites"]}
    popped = counts["popped"]
    assert sites["router", "pn_event_type", "_next_event"] == popped
    assert sites["router", "pn_collector_peek", "_next_event"] > popped
    assert sites["router", "pn_link_recv", "_recv_whole"] == N


def test_the_compiled_build_crosses_into_c_a_few_times_per_message(
        counts: dict[str, Any]) -> None:
    """The accelerator's functions make the calls of one step at once: per
    message, one event each for the transfer and the consumer's settlement,
    one read, one send, one outcome with its settlement; what is left is the
    deferred settlement of the consumer's delivery and what each wake-up
    does once."""
    accelerated = counts["accelerated"]
    assert accelerated["recv_whole"] == N
    assert accelerated["send_copy"] == N
    assert accelerated["update_settle"] == N
    assert 2 * N <= accelerated["next_event"] < 2.5 * N
    router_calls = sum(counts["calls"]["router"].values())
    assert counts["crossings"] < 8 * N < router_calls
