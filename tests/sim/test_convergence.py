"""Many routing cores wired in memory: convergence, loss, restart, quiet, addresses.

Time is simulated; timeouts are in simulated seconds (one protocol tick each).
"Converged" means every router's routes equal ``compute_routes`` over the
real links, costs and next hops agree with a brute-force Floyd-Warshall, and
every router knows the keys each reachable router advertises.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from router.core.routing import RouterAdded, RouterLost, SendControl
from tests.sim.network import Network
from tests.unit.routing.helpers import of


def floyd_warshall(states: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    dist = {a: {b: 0.0 if a == b else math.inf for b in states} for a in states}
    for a, peers in states.items():
        for b, cost in peers.items():
            dist[a][b] = min(dist[a][b], cost)
    for k in states:
        for a in states:
            for b in states:
                if dist[a][k] + dist[k][b] < dist[a][b]:
                    dist[a][b] = dist[a][k] + dist[k][b]
    return dist


def assert_converged(net: Network) -> None:
    assert net.mismatches() == []
    states = net.true_link_states()
    dist = floyd_warshall(states)
    for router in net.routers.values():
        assert router.routes is not None
        routes = router.routes.routes
        expected = {d: c for d, c in dist[router.id].items() if d != router.id and c < math.inf}
        assert {d: r.cost for d, r in routes.items()} == expected
        for dest, route in routes.items():
            assert route.next_hop in router.neighbors
            assert states[router.id][route.next_hop] + dist[route.next_hop][dest] == dist[
                router.id][dest]


def converge(net: Network, timeout_s: float = 60.0) -> float:
    took = net.run_until(net.converged, timeout_s)
    assert_converged(net)
    return took


def build(edges: list[tuple[str, str, int]], seed: int = 1, *,
          multicast_valid_origins: bool = True) -> Network:
    net = Network(seed=seed, multicast_valid_origins=multicast_valid_origins)
    for router in sorted({r for a, b, _ in edges for r in (a, b)}):
        net.add_router(router)
    for a, b, cost in edges:
        net.connect(a, b, cost)
    return net


def line(n: int) -> list[tuple[str, str, int]]:
    return [(f"R{i}", f"R{i + 1}", 1) for i in range(n - 1)]


def ring(n: int) -> list[tuple[str, str, int]]:
    return [(f"R{i}", f"R{(i + 1) % n}", 1 + i % 3) for i in range(n)]


def mesh(n: int) -> list[tuple[str, str, int]]:
    return [(f"R{i}", f"R{j}", 1 + (i + j) % 2) for i in range(n) for j in range(i + 1, n)]


def random_graph(n: int, extra: int, seed: int) -> list[tuple[str, str, int]]:
    """A random spanning tree plus ``extra`` links; costs 1..5."""
    rng = random.Random(seed)
    ids = [f"R{i:02d}" for i in range(n)]
    edges = {(ids[i], ids[rng.randrange(i)]) for i in range(1, n)}
    while len(edges) < n - 1 + extra:
        a, b = rng.sample(ids, 2)
        if (a, b) not in edges and (b, a) not in edges:
            edges.add((a, b))
    return [(a, b, rng.randint(1, 5)) for a, b in sorted(edges)]


@pytest.mark.parametrize(
    ("name", "edges", "timeout_s"),
    [
        ("line", line(6), 30),
        ("ring", ring(8), 30),
        ("mesh", mesh(5), 30),
        ("random20", random_graph(20, 4, seed=7), 60),
    ],
)
def test_topology_converges(name: str, edges: list[tuple[str, str, int]], timeout_s: float) -> None:
    net = build(edges)
    for router_id in list(net.routers)[::3]:
        net.add_address(router_id, f"M0{name}.{router_id}")
    converge(net, timeout_s)
    for router in net.routers.values():
        assert router.known == set(net.routers) - {router.id}


def test_link_loss_reroutes_and_link_return_restores() -> None:
    """
        R0 -1- R1 -2- R2 -3- R3        ring of six, costs 1,2,3,1,2,3
         |                   |
         3                   1
         |                   |
        R5 -2- R4 ---------- +
    """
    net = build(ring(6))
    converge(net)
    before = net.routers["R0"].routes
    assert before is not None and before.next_hop("R2") == "R1"
    net.disconnect("R1", "R2")
    took = converge(net, 30)
    after = net.routers["R0"].routes
    assert after is not None and after.next_hop("R2") == "R5" and after.cost("R2") == 9
    assert took <= 10
    net.connect("R1", "R2", 2)
    converge(net, 30)


def test_partition_drops_routes_at_once_and_forgets_the_other_side_later() -> None:
    net = build(line(4))
    net.add_address("R3", "M0far")
    converge(net)
    net.disconnect("R1", "R2")
    net.run(5)
    converge(net, 1)  # routes to the far side are gone ...
    r0 = net.routers["R0"]
    assert r0.routes is not None and r0.routes.next_hop("R3") is None
    assert "R3" in r0.remote_keys and "R3" in r0.known  # ... but not the routers, yet
    net.run(65)  # remote_ls_max_age_s, then three ticks to delete
    for near in ("R0", "R1"):
        router = net.routers[near]
        assert router.remote_keys == {}
        assert router.known == {"R0", "R1"} - {near}
        assert RouterLost(id="R3") in router.effects
    converge(net, 1)


def test_restart_with_a_new_instance_is_detected_and_relearnt() -> None:
    net = build(line(4))
    net.add_address("R2", "M0svc")
    converge(net)
    marks = {r.id: len(r.effects) for r in net.routers.values()}
    net.restart("R2", instance=5000)
    converge(net, 30)
    r0 = net.routers["R0"]
    assert {rec.id: rec.instance for rec in r0.protocol.node_table()}["R2"] == 5000
    assert r0.remote_keys == {"R2": {"M0svc": 2}}
    # R0 never lost R2 for good: no RouterLost/RouterAdded, only a restart
    assert of(r0.effects[marks["R0"]:], RouterAdded) == []


def test_router_changing_its_id_is_forgotten_under_the_old_one() -> None:
    net = build(ring(5))
    net.add_address("R3", "M0svc")
    converge(net)
    net.restart("R3", instance=6000, new_id="R3b")
    converge(net, 30)
    net.run(65)
    for router in net.routers.values():
        if router.id == "R3b":
            continue
        assert "R3" not in router.known
        assert router.remote_keys == {"R3b": {"M0svc": 2}}
        assert RouterLost(id="R3") in router.effects


def test_control_traffic_goes_quiet_after_convergence() -> None:
    net = build([*mesh(4), ("R3", "R4", 1), ("R4", "R5", 2)])
    net.add_address("R0", "M0x")
    converge(net)
    net.run(10)  # let flux mode end
    start = net.now
    net.run(60)
    counts = net.counts(start)
    assert set(counts) == {"HELLO", "RA"}
    links = sum(len(r.links) for r in net.routers.values()) // 2
    assert counts["HELLO"] == pytest.approx(2 * links * 60, abs=2 * links)
    # each router floods two stable RAs a minute; each flood is bounded by the loop guard
    per_flood = counts["RA"] / (2 * len(net.routers))
    assert 0 < per_flood <= 4 * links
    assert net.mismatches() == []


def test_flux_mode_speeds_up_ras_after_a_change_then_calms_down() -> None:
    net = build(ring(4))
    converge(net)
    net.run(40)
    r0 = net.routers["R0"]

    def ra_times(start: float, stop: float) -> list[float]:
        return [t for t, e in r0.timeline if start <= t < stop and isinstance(e, SendControl)
                and e.message.opcode.value == "RA"]

    assert len(ra_times(net.now - 30, net.now)) == 1  # stable: every 30 s
    change = net.now
    net.disconnect("R1", "R2")
    net.run(40)
    flux = ra_times(change, change + 13)
    assert len(flux) >= 2  # every 4 s while the change is at most 8 s old
    assert all(b - a <= 4.001 for a, b in itertools.pairwise(flux))
    assert len(ra_times(change + 13, change + 40)) <= 1


def test_addresses_propagate_are_withdrawn_and_die_with_their_router() -> None:
    net = build(line(4))
    net.add_address("R0", "M0a")
    net.add_address("R0", "M1b", hint=3)
    converge(net)
    assert net.routers["R3"].remote_keys == {"R0": {"M0a": 2, "M1b": 3}}
    net.remove_address("R0", "M0a")
    converge(net, 5)
    assert net.routers["R3"].remote_keys == {"R0": {"M1b": 3}}
    net.remove_router("R0")
    net.run(65)  # R0's link state expires, then it is deleted
    for router in net.routers.values():
        assert router.remote_keys == {}
        assert "R0" not in router.known
    converge(net, 1)


def test_duplicate_maus_from_qdrouterd_style_multicast_cost_at_most_one_mar_each() -> None:
    """qdrouterd multicasts MAUs without the valid-origin filter
    (docs/compatibility.md#multicast-across-routers):
    in a mesh, copies arrive twice; the second is out of sequence and earns one
    MAR, which the sender, being up to date with it, does not answer."""
    net = build(mesh(5), multicast_valid_origins=False)
    converge(net)
    start = net.now
    net.add_address("R0", "M0dup")
    converge(net, 5)
    counts = net.counts(start)
    assert counts["MAR"] <= 4  # one from each other router, one hop each
    assert "LSR" not in counts and "LSU" not in counts
    net.run(30)
    assert set(net.counts(net.now - 25)) <= {"HELLO", "RA"}


def test_address_change_reaches_every_router_within_two_ticks() -> None:
    net = build(random_graph(12, 3, seed=3))
    converge(net)
    net.run(2)  # a link-state change held for a tick may still be flooding
    net.add_address("R05", "M0new")
    took = converge(net, 10)
    assert took <= 2
    assert set(net.counts(net.now - took)) <= {"HELLO", "RA", "MAU"}


@pytest.mark.parametrize("edges", [line(5), ring(6), random_graph(12, 3, seed=5)],
                         ids=["line", "ring", "random12"])
def test_a_link_cut_reroutes_at_once_and_a_remade_one_restores_the_routes_at_once(
        edges: list[tuple[str, str, int]]) -> None:
    """Control messages here take no time, so every step that waits for the
    one-second tick shows as simulated time: a cut reroutes, and a remade
    link between routers that know each other restores the routes, in no
    time at all (a real network: a few round trips;
    docs/networks.md#link-state-and-paths)."""
    net = build(edges)
    net.add_address("R00" if "R00" in net.routers else "R0", "M0svc")
    converge(net)
    net.run(2)
    a, b, cost = edges[1]
    net.disconnect(a, b)
    assert net.converged(), net.mismatches()
    net.run(2)
    net.connect(a, b, cost)
    assert net.converged(), net.mismatches()
    assert_converged(net)


def test_a_new_router_gets_its_first_hello_on_the_tick() -> None:
    """As with qdrouterd, whose own system tests count on it: a router not
    known before is greeted by the next periodic HELLO, not at once."""
    net = build(line(3))
    converge(net)
    net.add_router("R9")
    net.connect("R2", "R9", 1)
    assert "R9" not in net.routers["R2"].neighbors
    assert converge(net, 10) > 0
