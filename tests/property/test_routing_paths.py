"""Property tests for compute_routes: shortest paths agree with a brute-force Bellman-Ford.

(a) Costs equal Bellman-Ford distances; exactly the reachable routers have routes.
(b) Each next hop is a neighbour of the root on a shortest path; radius is the largest hop count.
(c) Results do not depend on the order of the link-state dicts.
(d) A valid origin has the root on one of its shortest paths; an origin all of
    whose shortest paths cross the root is valid.
"""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.routing import compute_routes

# Ids that sort differently as strings and as numbers ("R10" < "R9").
IDS = ["R1", "R2", "R9", "R10", "R11", "A", "B", "b"]

Graph = dict[str, dict[str, int]]


@st.composite
def graphs(draw: st.DrawFn, symmetric: bool | None = None) -> tuple[Graph, str]:
    ids = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=len(IDS), unique=True))
    both_ways = draw(st.booleans()) if symmetric is None else symmetric
    graph: Graph = {router: {} for router in ids}
    for a in ids:
        for b in ids:
            if (a < b or (not both_ways and a != b)) and draw(st.booleans()):
                cost = draw(st.integers(min_value=1, max_value=4))
                graph[a][b] = cost
                if both_ways:
                    graph[b][a] = cost
    return graph, draw(st.sampled_from(ids))


def bellman_ford(graph: Graph, source: str, without: str | None = None) -> dict[str, float]:
    dist = {router: math.inf for router in graph}
    dist[source] = 0
    for _ in range(len(graph)):
        for a, peers in graph.items():
            if a == without:
                continue
            for b, cost in peers.items():
                if b != without and dist[a] + cost < dist[b]:
                    dist[b] = dist[a] + cost
    return dist


def shuffled(graph: Graph, seed: int) -> Graph:
    rng = random.Random(seed)
    outer = list(graph.items())
    rng.shuffle(outer)
    result = {}
    for router, peers in outer:
        inner = list(peers.items())
        rng.shuffle(inner)
        result[router] = dict(inner)
    return result


@settings(max_examples=100, deadline=None)
@given(graphs())
def test_costs_and_reachability_match_bellman_ford(case: tuple[Graph, str]) -> None:
    graph, root = case
    routes = compute_routes(graph, root)
    dist = bellman_ford(graph, root)
    reachable = {r for r, d in dist.items() if d < math.inf and r != root}
    assert set(routes.routes) == reachable
    for dest, route in routes.routes.items():
        assert route.cost == dist[dest]


@settings(max_examples=100, deadline=None)
@given(graphs())
def test_next_hops_are_neighbours_on_a_shortest_path(case: tuple[Graph, str]) -> None:
    graph, root = case
    routes = compute_routes(graph, root)
    dist = bellman_ford(graph, root)
    for dest, route in routes.routes.items():
        assert route.next_hop in graph[root]
        from_hop = bellman_ford(graph, route.next_hop)
        assert graph[root][route.next_hop] + from_hop[dest] == dist[dest]
        assert 1 <= route.hops <= len(graph) - 1
    assert routes.radius == max((r.hops for r in routes.routes.values()), default=0)


@settings(max_examples=100, deadline=None)
@given(graphs(), st.integers(min_value=0, max_value=2**16))
def test_results_ignore_dict_order(case: tuple[Graph, str], seed: int) -> None:
    graph, root = case
    assert compute_routes(shuffled(graph, seed), root) == compute_routes(graph, root)


@settings(max_examples=80, deadline=None)
@given(graphs())
def test_valid_origins_are_those_whose_shortest_paths_cross_the_root(
    case: tuple[Graph, str],
) -> None:
    graph, root = case
    routes = compute_routes(graph, root)
    from_origin = {origin: bellman_ford(graph, origin) for origin in routes.routes}
    from_root = bellman_ford(graph, root)
    for dest, route in routes.routes.items():
        for origin in routes.routes:
            if origin == dest:
                assert origin not in route.valid_origins
                continue
            dist = from_origin[origin]
            on_a_shortest_path = dist[root] + from_root[dest] == dist[dest] < math.inf
            if origin in route.valid_origins:
                assert on_a_shortest_path
            elif on_a_shortest_path:
                # Not valid although the root is on a shortest path: only because
                # of a tie, i.e. a path of equal cost avoids the root.
                assert bellman_ford(graph, origin, without=root)[dest] == dist[dest]
        assert root not in route.valid_origins
