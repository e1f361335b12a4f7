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
import logging
import random
import time

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
