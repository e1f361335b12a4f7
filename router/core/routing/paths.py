"""Shortest paths, next hops and valid origins from a set of link states
(docs/networks.md#link-state-and-paths).

Owns ``compute_routes`` and the frozen ``Routes``/``Route`` records it returns.

Must not: keep state between calls, log, or know where the link states came
from; the node tracker decides when to recompute and what to do with the result.

The rules are qdrouterd's ``path.py``, so that a Hop router computes the same
next hops as its qdrouterd neighbours even where paths tie:

1. The graph has the directed edges each router reports. A router that is
   only somebody's peer (no link state of its own in the input) gets a
   placeholder: one edge of cost 1 back to a reporter, so that link-state
   requests can reach it. qdrouterd takes whichever reporter its dict yields
   first; here it is the smallest reporter id, so the result does not depend
   on dict order.
2. Dijkstra pops routers in (cost, router id) order, comparing ids as
   strings; a path replaces a known one only when strictly cheaper.
3. Next hop = the first router on the path; a neighbour is its own next hop.
   Radius = the largest hop count (0 when nothing is reachable).
4. Valid origins of destination D: every reachable router O other than the
   root whose own shortest-path tree reaches D through the root. The root
   itself is always a valid origin; it is not listed, as in qdrouterd's
   ``validOrigins``, but ``Routes.is_valid_origin`` says so.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from types import MappingProxyType

import attrs

__all__ = ["Route", "Routes", "compute_routes"]

Graph = Mapping[str, Mapping[str, int]]


@attrs.frozen(kw_only=True)
class Route:
    """How to reach one remote router.

    Attributes:
        next_hop: the neighbour to send through (the destination itself if it is a neighbour).
        cost: the sum of the link costs along the path.
        hops: the number of links on the path.
        valid_origins: routers (other than the root) whose shortest-path tree
            reaches this destination through the root.
    """

    next_hop: str
    cost: int
    hops: int
    valid_origins: frozenset[str] = frozenset()


def _freeze(routes: Mapping[str, Route]) -> Mapping[str, Route]:
    return MappingProxyType(dict(routes))


@attrs.frozen(kw_only=True)
class Routes:
    """The routes of one router (``root``) to every router it can reach.

    Attributes:
        root: the router the routes are computed for.
        radius: the largest hop count to a reachable router (loop guard,
            docs/networks.md#the-loop-guard).
        routes: reachable router id -> ``Route``; the root is not included.
    """

    root: str
    radius: int = 0
    routes: Mapping[str, Route] = attrs.field(factory=dict, converter=_freeze, hash=False)

    def next_hop(self, router_id: str) -> str | None:
        """The next hop toward ``router_id``, or None when it is unreachable."""
        route = self.routes.get(router_id)
        return None if route is None else route.next_hop

    def cost(self, router_id: str) -> int | None:
        """The path cost to ``router_id``, or None when it is unreachable."""
        route = self.routes.get(router_id)
        return None if route is None else route.cost

    def is_valid_origin(self, destination: str, origin: str) -> bool:
        """Whether a message that entered the network at ``origin`` may be
        forwarded from the root toward ``destination``
        (docs/networks.md#messages-across-routers)."""
        if origin == self.root:
            return True
        route = self.routes.get(destination)
        return route is not None and origin in route.valid_origins


def _graph(link_states: Graph) -> dict[str, Mapping[str, int]]:
    graph: dict[str, Mapping[str, int]] = dict(link_states)
    reporter: dict[str, str] = {}
    for router_id, peers in link_states.items():
        for peer in peers:
            if peer not in link_states and (peer not in reporter or router_id < reporter[peer]):
                reporter[peer] = router_id
    for peer, router_id in reporter.items():
        graph[peer] = {router_id: 1}
    return graph


def _tree(graph: Mapping[str, Mapping[str, int]], root: str) -> tuple[
    list[str], dict[str, str], dict[str, int], dict[str, int]
]:
    """Dijkstra from ``root``: (routers in the order resolved, prev, cost, hops).

    The root comes first in the order and has no ``prev`` entry.
    """
    cost = {root: 0}
    hops = {root: 0}
    prev: dict[str, str] = {}
    order: list[str] = []
    done: set[str] = set()
    heap = [(0, root)]
    while heap:
        u_cost, u = heapq.heappop(heap)
        if u in done or u_cost != cost[u]:
            continue  # a stale entry: u was re-queued at a lower cost
        done.add(u)
        order.append(u)
        for v, link_cost in graph.get(u, {}).items():
            if v in done:
                continue
            alt = u_cost + link_cost
            if v not in cost or alt < cost[v]:
                cost[v] = alt
                hops[v] = hops[u] + 1
                prev[v] = u
                heapq.heappush(heap, (alt, v))
    return order, prev, cost, hops


def _through(order: list[str], prev: Mapping[str, str], origin: str, root: str) -> list[str]:
    """Routers whose path from ``origin`` passes through ``root`` (root excluded)."""
    via: dict[str, bool] = {origin: False}
    result = []
    for router_id in order[1:]:
        parent = prev[router_id]
        via[router_id] = parent == root or via[parent]
        if via[router_id] and router_id != root:
            result.append(router_id)
    return result


def compute_routes(link_states: Graph, root: str) -> Routes:
    """Compute ``root``'s routes from every router's link state.

    Args:
        link_states: router id -> {peer id: cost of the link to that peer},
            as each router reports it (``root``'s own included).
        root: the router to compute routes for.

    Returns:
        The next hop, cost, hop count and valid origins of every router
        reachable from ``root``, and the radius.
    """
    graph = _graph(link_states)
    order, prev, cost, hops = _tree(graph, root)
    first_hop: dict[str, str] = {}
    for router_id in order[1:]:
        parent = prev[router_id]
        first_hop[router_id] = router_id if parent == root else first_hop[parent]

    origins: dict[str, set[str]] = {router_id: set() for router_id in first_hop}
    for origin in first_hop:
        o_order, o_prev, _, _ = _tree(graph, origin)
        for destination in _through(o_order, o_prev, origin, root):
            origins[destination].add(origin)

    routes = {
        router_id: Route(
            next_hop=first_hop[router_id],
            cost=cost[router_id],
            hops=hops[router_id],
            valid_origins=frozenset(origins[router_id]),
        )
        for router_id in order[1:]
    }
    return Routes(root=root, radius=max((r.hops for r in routes.values()), default=0),
                  routes=routes)
