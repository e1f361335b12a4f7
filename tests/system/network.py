"""Starting a network of interior ``hopd`` routers for system tests.

A topology is a mapping from router id to the ids of the routers it connects
to (they must come earlier in the mapping: the connector needs the peer's
inter-router port, which is only known once that router listens)::

    start_network(start_router, {"A": [], "B": ["A"], "C": ["B"]})

Every router gets, in this order, a client listener (``Hop.ports[0]``,
stripping annotations as by default), an inter-router listener
(``ports[1]``) and, when named in ``unstripped``, a client listener with
``stripAnnotations: no`` (``ports[2]``), then a ``role: edge`` listener
(last). The DEFAULT log is ``info+`` so that the ``ROUTER_CORE (info)
routes: ...`` lines appear.

Edge routers hang off interior routers (docs/networks.md#edge-routers)::

    start_network(start_router, {"I": []}, edges={"E1": ["I"], "E2": ["I"]})

An edge gets a client listener (``ports[0]``) and a ``role: edge``
connector to each interior named, in that order.
"""

from __future__ import annotations

import heapq
import re
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence

from tests.system.harness import STANDARD_LISTENER, Hop
from tests.waiting import wait_for

StartRouter = Callable[..., Hop]

ROUTES = re.compile(r"ROUTER_CORE \(info\) routes: (.*)$", re.MULTILINE)
ROUTE = re.compile(r"(\S+) via (\S+) cost (\d+)")
CONVERGE_TIMEOUT_S = 20.0

INTER_ROUTER_LISTENER = """\
listener {
    host: 127.0.0.1
    port: 0
    role: inter-router
}
"""

EDGE_LISTENER = """\
listener {
    host: 127.0.0.1
    port: 0
    role: edge
}
"""

UPLINK = re.compile(r"Edge connection \(id=\d+\) to interior established")

UNSTRIPPED_LISTENER = """\
listener {
    host: 127.0.0.1
    port: 0
    saslMechanisms: ANONYMOUS
    authenticatePeer: no
    stripAnnotations: no
}
"""

LOG_INFO = """\
log {
    module: DEFAULT
    enable: info+
}
"""


def interior_conf(router_id: str, connectors: Mapping[int, int], *, unstripped: bool = False,
                  extra: str = "") -> str:
    """An interior router conf; ``connectors`` maps a peer's inter-router port to a cost."""
    parts = [f"router {{\n    mode: interior\n    id: {router_id}\n}}\n", STANDARD_LISTENER,
             INTER_ROUTER_LISTENER]
    if unstripped:
        parts.append(UNSTRIPPED_LISTENER)
    parts.append(EDGE_LISTENER)
    for port, cost in connectors.items():
        parts.append(
            f"connector {{\n    host: 127.0.0.1\n    port: {port}\n    role: inter-router\n"
            f"    cost: {cost}\n}}\n")
    parts.append(LOG_INFO)
    parts.append(extra)
    return "".join(parts)


def edge_conf(edge_id: str, uplinks: Sequence[int], *, extra: str = "") -> str:
    """An edge router conf: a client listener and an edge connector to each
    of ``uplinks`` (interior routers' edge listener ports)."""
    parts = [f"router {{\n    mode: edge\n    id: {edge_id}\n}}\n", STANDARD_LISTENER]
    for port in uplinks:
        parts.append(f"connector {{\n    host: 127.0.0.1\n    port: {port}\n    role: edge\n}}\n")
    parts.append(LOG_INFO)
    parts.append(extra)
    return "".join(parts)


def link_key(a: str, b: str) -> frozenset[str]:
    return frozenset((a, b))


def latest_routes(hop: Hop) -> dict[str, tuple[str, int]] | None:
    """The router's most recent ``routes:`` line as {destination: (next hop, cost)}."""
    lines = ROUTES.findall(hop.log_text())
    if not lines:
        return None
    return {m.group(1): (m.group(2), int(m.group(3))) for m in ROUTE.finditer(lines[-1])}


def expected_costs(links: Mapping[frozenset[str], int], source: str) -> dict[str, int]:
    """Shortest path costs from ``source`` over undirected ``links`` (Dijkstra)."""
    best = {source: 0}
    heap = [(0, source)]
    while heap:
        cost, node = heapq.heappop(heap)
        if cost > best.get(node, cost):
            continue
        for pair, link_cost in links.items():
            if node in pair:
                (other,) = pair - {node}
                if cost + link_cost < best.get(other, cost + link_cost + 1):
                    best[other] = cost + link_cost
                    heapq.heappush(heap, (cost + link_cost, other))
    del best[source]
    return best


class Network:
    """A set of interior routers started from a topology description."""

    def __init__(self, start: StartRouter, *, extra: str = "",
                 unstripped: Iterable[str] = (), extras: Mapping[str, str] | None = None
                 ) -> None:
        self.start = start
        self.extra = extra
        self.extras = dict(extras or {})
        self.unstripped = set(unstripped)
        self.routers: dict[str, Hop] = {}
        self.edges: dict[str, list[str]] = {}
        self.links: dict[frozenset[str], int] = {}
        self.killed: set[str] = set()

    def __getitem__(self, router_id: str) -> Hop:
        return self.routers[router_id]

    def url(self, router_id: str) -> str:
        return self.routers[router_id].url

    def unstripped_url(self, router_id: str) -> str:
        assert router_id in self.unstripped, f"{router_id} has no stripAnnotations: no listener"
        return f"amqp://127.0.0.1:{self.routers[router_id].ports[2]}"

    def add_router(self, router_id: str, peers: Sequence[str] = (),
                   costs: Mapping[str, int] | None = None,
                   start: StartRouter | None = None) -> Hop:
        """Start ``router_id`` with connectors to ``peers`` (already running)."""
        costs = costs or {}
        connectors = {self.routers[p].ports[1]: costs.get(p, 1) for p in peers}
        unstripped = router_id in self.unstripped
        conf = interior_conf(router_id, connectors, unstripped=unstripped,
                             extra=self.extra + self.extras.get(router_id, ""))
        hop = (start or self.start)(conf, name=router_id, listeners=4 if unstripped else 3)
        self.routers[router_id] = hop
        for peer in peers:
            self.links[link_key(router_id, peer)] = costs.get(peer, 1)
        return hop

    def edge_port(self, router_id: str) -> int:
        """The ``role: edge`` listener port of interior ``router_id``."""
        return self.routers[router_id].ports[-1]

    def add_edge(self, edge_id: str, interiors: Sequence[str], *, extra: str = "",
                 start: StartRouter | None = None, wait: bool = True) -> Hop:
        """Start edge router ``edge_id`` with an uplink connector to each of
        ``interiors`` (running); wait until its uplink is active."""
        conf = edge_conf(edge_id, [self.edge_port(i) for i in interiors],
                         extra=self.extra + self.extras.get(edge_id, "") + extra)
        hop = (start or self.start)(conf, name=edge_id, listeners=1)
        self.routers[edge_id] = hop
        self.edges[edge_id] = list(interiors)
        if wait:
            self.wait_uplink(edge_id)
        return hop

    def wait_uplink(self, edge_id: str, count: int = 1,
                    timeout: float = CONVERGE_TIMEOUT_S) -> None:
        """Wait until edge ``edge_id`` has activated an uplink ``count`` times."""
        hop = self.routers[edge_id]
        wait_for(lambda: len(UPLINK.findall(hop.log_text())) >= count, timeout,
                 f"{edge_id}'s uplink (activation {count})")

    def kill(self, router_id: str) -> None:
        """SIGKILL a router (no clean shutdown) and forget its links."""
        hop = self.routers[router_id]
        hop.proc.send_signal(signal.SIGKILL)
        hop.proc.wait(10)
        self.killed.add(router_id)
        self.links = {k: c for k, c in self.links.items() if router_id not in k}

    def live(self) -> list[str]:
        """The interior routers still running."""
        return [r for r in self.routers if r not in self.killed and r not in self.edges]

    def expected_routes(self, router_id: str) -> dict[str, int]:
        return expected_costs(self.links, router_id)

    def wait_converged(self, timeout: float = CONVERGE_TIMEOUT_S) -> None:
        """Wait until every live router's latest routes reach every other router
        it is connected to, at the shortest-path cost."""
        def converged() -> bool:
            for router_id in self.live():
                routes = latest_routes(self.routers[router_id])
                if routes is None:
                    return False
                costs = {d: c for d, (_, c) in routes.items()}
                if costs != self.expected_routes(router_id):
                    return False
            return True

        try:
            wait_for(converged, timeout, "routes to converge")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe()}") from None

    def wait_route(self, router_id: str, destination: str, via: str, cost: int,
                   timeout: float = CONVERGE_TIMEOUT_S) -> None:
        def present() -> bool:
            routes = latest_routes(self.routers[router_id]) or {}
            return routes.get(destination) == (via, cost)

        try:
            wait_for(present, timeout, f"{router_id}: {destination} via {via} cost {cost}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe()}") from None

    def describe(self) -> str:
        """Each router's expected and latest routes, for failure messages."""
        lines = []
        for router_id in self.live():
            lines.append(f"{router_id}: expected {self.expected_routes(router_id)}, "
                         f"latest {latest_routes(self.routers[router_id])} "
                         f"(log {self.routers[router_id].log_path})")
        return "\n".join(lines)


def start_network(start: StartRouter, topology: Mapping[str, Sequence[str]], *,
                  costs: Mapping[tuple[str, str], int] | None = None, extra: str = "",
                  unstripped: Iterable[str] = (),
                  starters: Mapping[str, StartRouter] | None = None,
                  extras: Mapping[str, str] | None = None,
                  converge: bool = True,
                  edges: Mapping[str, Sequence[str]] | None = None) -> Network:
    """Start the routers of ``topology`` in order and wait for their routes.

    ``costs`` maps (router, peer) to the cost of the connector from router to
    peer (default 1); ``extra`` is appended to every conf and ``extras[id]``
    to one router's; ``starters``
    overrides ``start`` for particular routers (e.g. one the test will kill).
    """
    costs = costs or {}
    starters = starters or {}
    network = Network(start, extra=extra, unstripped=unstripped, extras=extras)
    for router_id, peers in topology.items():
        network.add_router(router_id, peers,
                           costs={p: costs.get((router_id, p), 1) for p in peers},
                           start=starters.get(router_id))
    if converge:
        network.wait_converged()
    for edge_id, interiors in (edges or {}).items():
        network.add_edge(edge_id, interiors, start=starters.get(edge_id))
    return network
