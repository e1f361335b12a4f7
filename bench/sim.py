"""Convergence of a simulated network of routers: Hop's real routing cores
(``RoutingProtocol``) and real control-message codec, wired in memory by
``tests.sim.network`` on a simulated clock.

All routers start at once (each at its own phase within the first second),
every link comes up, and every router advertises one mobile address; the
network has converged when every router's routes equal the shortest paths
over the real links and it knows every other router's address.  The
figures: simulated seconds until the last router's view last changed, the
control messages put on connections until then (by kind: a message crossing
three links counts three times), their encoded bytes, and the wall and CPU
seconds the simulation took (codec and cores of all routers, plus the
in-memory forwarding, on one core).
"""

from __future__ import annotations

import collections
import enum
import gc
import logging
import random
import sys
import time
import types
from collections.abc import Iterable

from router.core.routing import (
    MobileAddressesChanged,
    RouterAdded,
    RouterLost,
    RoutesChanged,
    SendControl,
)
from tests.sim.network import Link, Network, SimRouter

Edge = tuple[str, str, int]
KINDS = ("HELLO", "RA", "LSU", "LSR", "MAU", "MAR")
_CHANGES = (RoutesChanged, RouterAdded, RouterLost, MobileAddressesChanged)


def random_topology(n: int, degree: float = 3.0, seed: int = 11) -> list[Edge]:
    """A connected random graph of ``n`` routers with average degree ``degree``:
    a random tree (each router joins one already there) plus random extra
    links, every link of cost 1 (qdrouterd's default inter-router cost)."""
    rng = random.Random(seed)
    ids = [f"R{i:03d}" for i in range(n)]
    edges = {(ids[rng.randrange(i)], ids[i]) for i in range(1, n)}
    wanted = max(n - 1, min(round(n * degree / 2), n * (n - 1) // 2))
    while len(edges) < wanted:
        a, b = sorted(rng.sample(ids, 2))
        if (b, a) not in edges:
            edges.add((a, b))
    return [(a, b, 1) for a, b in sorted(edges)]


def grid_topology(rows: int, cols: int) -> list[Edge]:
    """Routers on a ``rows`` x ``cols`` grid, each linked to its neighbours, cost 1."""
    def name(r: int, c: int) -> str:
        return f"R{r:02d}{c:02d}"
    edges = [(name(r, c), name(r, c + 1), 1) for r in range(rows) for c in range(cols - 1)]
    return edges + [(name(r, c), name(r + 1, c), 1) for r in range(rows - 1) for c in range(cols)]


class _CountingNetwork(Network):
    """The simulated network, also counting encoded bytes (by time sent and kind)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed)
        self.bytes: collections.Counter[tuple[float, str]] = collections.Counter()

    def _send(self, router: SimRouter, link: Link, data: bytes, opcode: str) -> None:
        self.bytes[self.now, opcode] += len(data)
        super()._send(router, link, data, opcode)


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


def converge(edges: list[Edge], *, seed: int = 1, timeout_s: float = 600.0,
             step_s: float = 1.0) -> dict[str, float]:
    """Start the network of ``edges`` and run it until it has converged."""
    routing_log = logging.getLogger("router.core.routing")
    warnings = _Count()
    saved = routing_log.propagate
    routing_log.addHandler(warnings)
    routing_log.propagate = False  # hundreds of transient warnings while routers meet
    wall0, cpu0 = time.perf_counter(), time.process_time()
    check_cpu = 0.0
    try:
        net = _CountingNetwork(seed)
        ids = sorted({r for a, b, _ in edges for r in (a, b)})
        for router_id in ids:
            net.add_router(router_id)
        for a, b, cost in edges:
            net.connect(a, b, cost)
        for router_id in ids:
            net.add_address(router_id, f"M0svc.{router_id}")
        while True:
            started = time.process_time()
            done = net.converged()
            check_cpu += time.process_time() - started  # the check is not the protocol's
            if done:
                break
            if net.now >= timeout_s:
                raise RuntimeError(f"{len(ids)} routers not converged after {timeout_s:g} "
                                   f"simulated s: {net.mismatches()[:5]}")
            net.run(step_s)
    finally:
        routing_log.removeHandler(warnings)
        routing_log.propagate = saved
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0 - check_cpu
    routers = list(net.routers.values())
    last_change = max(t for r in routers for t, e in r.timeline if isinstance(e, _CHANGES))
    sent = collections.Counter(s.opcode for s in net.sent if s.time <= last_change)
    ra_floods = sum(1 for r in routers for t, e in r.timeline if t <= last_change
                    and isinstance(e, SendControl) and e.message.opcode.value == "RA")
    total = sum(sent.values())
    record: dict[str, float] = {
        "routers": len(ids), "links": len(edges),
        "average_degree": 2 * len(edges) / len(ids),
        "radius_max": max(r.routes.radius for r in routers if r.routes is not None),
        "convergence_sim_s": last_change, "wall_s": wall, "cpu_s": cpu,
        "control_messages": total,
        "control_bytes": sum(n for (t, _), n in net.bytes.items() if t <= last_change),
        "cpu_us_per_message": cpu * 1e6 / total if total else 0.0,
        "ra_copies_per_flood": sent["RA"] / ra_floods if ra_floods else 0.0,
        "dropped_loop_guard": net.dropped["loop guard"],
        "routing_warnings": warnings.count,
    }
    for kind in KINDS:
        record[f"msgs_{kind}"] = sent[kind]
    return record


# -- edge routers under one interior ----------------------------------------------------

_SHARED_KINDS = (types.ModuleType, type, types.FunctionType, types.MethodType,
                 types.BuiltinFunctionType, enum.Enum, logging.Logger)


def deep_size(root: object, *, stop: Iterable[object] = ()) -> int:
    """Bytes of the objects reachable from ``root`` (``sys.getsizeof`` each
    once), not following modules, classes, functions, enum members, loggers
    or the objects in ``stop``: what ``root`` holds of its own."""
    seen = {id(obj) for obj in stop}
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SHARED_KINDS):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def edges(n: int, *, churn: int = 2000, seed: int = 5) -> dict[str, float]:
    """``n`` edge routers under one interior, simulated (``tests.sim.edges``:
    the real edge and interior cores, their links carried in memory).

    Every edge has a consumer of an address of its own and a producer to
    ``shared``, which has no consumer yet.  The figures:

    - ``core_kb_per_edge``: what the interior's core holds per edge
      (connection, links, address records, tracking state), from
      ``deep_size`` with and without the edges;
    - ``reach_cpu_ms`` and ``reach_messages``: a new edge starts and a
      consumer of ``shared`` attaches on it; the CPU time (all cores, one
      process) and address-tracking messages until every edge's producer
      has credit;
    - ``updates_per_s``: consumers attaching and detaching on random edges
      for addresses with producers on 10 other edges: each change goes up to
      the interior and its answer down to those 10 edges.
    """
    from tests.sim.edges import EdgeNetwork

    rng = random.Random(seed)
    net = EdgeNetwork()
    empty = deep_size(net.interior, stop=[net])
    started = time.process_time()
    producers = []
    for i in range(n):
        edge_id = f"E{i:04d}"
        net.add_edge(edge_id)
        net.consumer(edge_id, f"svc.{edge_id}")
        producers.append(net.producer(edge_id, "shared"))
    build_cpu = time.process_time() - started
    assert all(p.blocked for p in producers)
    loaded = deep_size(net.interior, stop=[net])
    net.add_edge("Enew")
    before = net.carried["SendOnLink to edge"]
    started = time.process_time()
    net.consumer("Enew", "shared")
    reach_cpu = time.process_time() - started
    reached = sum(not p.blocked for p in producers)
    reach_messages = net.carried["SendOnLink to edge"] - before
    ids = list(net.edges)
    pairs = []
    for j in range(max(1, n // 10)):
        address = f"pair.{j}"
        for edge_id in rng.sample(ids, min(10, len(ids))):
            net.producer(edge_id, address)
        pairs.append(address)
    started = time.process_time()
    for _ in range(churn // 2):
        edge_id, address = rng.choice(ids), rng.choice(pairs)
        link = net.consumer(edge_id, address)
        net.detach(edge_id, link)
    churn_cpu = time.process_time() - started
    return {
        "edges": n, "core_kb_per_edge": (loaded - empty) / n / 1024,
        "build_cpu_s": build_cpu, "reach_cpu_ms": reach_cpu * 1000,
        "reach_messages": reach_messages, "reached": reached,
        "updates_per_s": churn / churn_cpu if churn_cpu else 0.0,
        "refused_attaches": len(net.refused),
    }
