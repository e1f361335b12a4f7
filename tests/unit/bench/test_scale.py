"""The scale scenarios' pieces that run without a router: the simulated
topologies and convergence record, the open-file limit, the scale plot and
the side-by-side lines."""

from __future__ import annotations

import collections
import resource
from pathlib import Path

import pytest

from bench import report, sim
from bench.processes import raise_fd_limit
from bench.scenarios import SCENARIOS, SMOKE, Scale


def _connected(edges: list[sim.Edge]) -> bool:
    peers: dict[str, set[str]] = collections.defaultdict(set)
    for a, b, _ in edges:
        peers[a].add(b)
        peers[b].add(a)
    seen, todo = set(), [next(iter(peers))]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(peers[node] - seen)
    return seen == set(peers)


def test_random_topology_is_connected_with_the_degree_asked_and_repeatable() -> None:
    edges = sim.random_topology(100)
    assert len({r for a, b, _ in edges for r in (a, b)}) == 100
    assert len(edges) == 150  # average degree 3
    assert len({frozenset((a, b)) for a, b, _ in edges}) == 150  # no link twice
    assert all(a != b and cost == 1 for a, b, cost in edges)
    assert _connected(edges)
    assert sim.random_topology(100) == edges


def test_grid_topology_links_each_router_to_its_neighbours() -> None:
    edges = sim.grid_topology(3, 4)
    assert len(edges) == 3 * 3 + 2 * 4
    assert ("R0000", "R0001", 1) in edges and ("R0000", "R0100", 1) in edges
    assert _connected(edges)


def test_a_small_network_converges_and_counts_its_control_messages() -> None:
    record = sim.converge(sim.random_topology(6))
    assert record["routers"] == 6
    assert 0 < record["convergence_sim_s"] < 30
    kinds = [record[f"msgs_{kind}"] for kind in sim.KINDS]
    assert sum(kinds) == record["control_messages"]
    assert record["msgs_HELLO"] > 0 and record["msgs_RA"] > 0 and record["msgs_MAU"] > 0
    assert record["control_bytes"] > record["control_messages"]


def test_full_scale_is_the_issue_s_and_smoke_stays_small() -> None:
    full = Scale()
    assert (full.idle_connections, full.addresses, full.sim_routers) == (10_000, 100_000, 100)
    assert SMOKE.idle_connections <= 100 and SMOKE.sim_routers <= 10
    assert {"idle-connections", "many-addresses", "sim-convergence-100"} <= {
        s.name for s in SCENARIOS}


def test_fd_limit_is_raised_as_far_as_allowed() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        got = raise_fd_limit(soft + 1 if hard == resource.RLIM_INFINITY else hard)
        assert got >= min(soft + 1, hard) and got == resource.getrlimit(
            resource.RLIMIT_NOFILE)[0]
        assert raise_fd_limit(16) == got  # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(
            resource.RLIMIT_NOFILE)[1]))


SUMMARY: dict[str, report.Record] = {
    "idle-connections": {"connections": 10_000.0, "rss_mb": 300.0, "kb_per_connection": 29.0},
    "qdrouterd:idle-connections": {"connections": 10_000.0, "rss_mb": 250.0,
                                   "kb_per_connection": 23.0},
    "many-addresses": {"addresses": 100_000.0, "startup_s": 7.0, "ready_s": 7.1,
                       "rss_mb": 150.0, "kb_per_address": 1.2},
    "sim-convergence-100": {"routers": 100.0, "links": 150.0, "convergence_sim_s": 18.0,
                            "wall_s": 200.0, "cpu_s": 190.0, "control_messages": 60.0,
                            **{f"msgs_{kind}": 10.0 for kind in report.CONTROL_KINDS}},
}


def test_scale_plot_is_written_when_scale_scenarios_ran(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "results-scale.png"
    assert report.plot_scale(path, SUMMARY)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not report.plot_scale(tmp_path / "none.png", {"router-100": {"rate": 1.0}})
    assert not (tmp_path / "none.png").exists()


def test_scale_figures_are_compared_side_by_side() -> None:
    lines = report.comparisons(SUMMARY)
    assert any(line.startswith("idle-connections: Hop's memory per idle connection 29.0 kB "
                               "against qdrouterd's 23.0 kB (1.26x)") for line in lines)
    text = report.table(SUMMARY, {})
    assert "100 routers, 150 links converge in 18.0 simulated s" in text


def test_the_results_figure_draws_a_panel_only_for_what_ran(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rate_only = {"router-100": {"rate": 150_000.0},
                 "qdrouterd:router-100": {"rate": 140_000.0}}
    path = tmp_path / "results.png"
    assert report.plot(path, rate_only) == ["Throughput"]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    latency = {"latency-1000": {"rate": 1000.0, "latency_us": {"p99": 900.0}}}
    assert report.plot(path, {**rate_only, **latency}) == [
        "Throughput", "Latency at a fixed rate"]
    assert report.plot(path, latency) == ["Latency at a fixed rate"]
    assert report.plot(tmp_path / "none.png", SUMMARY) == []
    assert not (tmp_path / "none.png").exists()
