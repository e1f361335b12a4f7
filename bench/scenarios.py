"""The benchmark scenarios.  Each run starts its own router(s) and load
generators and returns one flat record of measurements.

Throughput runs check correctness too: every message must arrive and, when
unsettled, be accepted; a run that loses anything raises instead of
reporting a rate.
"""

from __future__ import annotations

import re
import resource
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from bench.edges import edge_line, edges_scale
from bench.faults import cut_links, slow_clients
from bench.large import large_message
from bench.processes import (
    HOP,
    Flavour,
    RouterProcess,
    finish,
    free_port,
    listener,
    router_conf,
    self_signed,
    start,
)
from router.workers import worker_id

Record = dict[str, Any]


@attrs.frozen(kw_only=True)
class Scale:
    """How big each run is (``smoke`` for CI, ``full`` for figures)."""

    count: int = 200_000
    big_count: int = 20_000
    latency_seconds: float = 10.0
    idle_connections: int = 10_000
    addresses: int = 100_000
    # qdrouterd loads its configuration in time quadratic in the number of
    # sections (each new entity is checked against all before it): 10,000
    # addresses take it minutes, 100,000 hours.  Its side-by-side run uses this
    # many, beside a Hop run with as many.
    compare_addresses: int = 10_000
    mesh: int = 10
    # Edge routers started under one interior (bench.edges).
    edges: int = 100
    sim_routers: int = 100
    sim_grid: int = 6
    # Edge routers simulated under one interior (bench.sim.edges).
    sim_edges: int = 1000
    broker_count: int = 50_000
    # Receiving links on one connection, each from its own address (many-links),
    # and addresses each with one such consumer, 10,000 a connection
    # (many-consumer-addresses).
    links: int = 10_000
    consumer_addresses: int = 100_000
    # Connections opened and closed by the churn scenario.
    churn_connections: int = 10_000
    # Very large messages: their size and how many (bench.large).
    large_size: int = 100 * 2**20
    large_count: int = 3
    timeout: float = 300.0
    start_timeout: float = 900.0


SMOKE = Scale(count=2000, big_count=200, latency_seconds=1.0, idle_connections=50,
              addresses=200, compare_addresses=100, mesh=3, edges=3, sim_routers=10, sim_grid=3,
              sim_edges=50, broker_count=500, links=200, consumer_addresses=400,
              churn_connections=100, large_size=4 * 2**20,
              large_count=1, timeout=120.0, start_timeout=120.0)


@attrs.frozen(kw_only=True)
class Scenario:
    name: str
    kind: str  # "throughput", "latency" or "scale"
    run: Callable[[dict[str, Path], Scale], Record]
    description: str
    # Deterministic (a simulation): run in the first round only.
    once: bool = False
    # Too long for a default run: only when named in ``--only``.
    opt_in: bool = False


def _send_args(bins: dict[str, Path], url: str, address: str, count: int, size: int,
               presettled: bool, rate: int = 0) -> list[str]:
    args = [str(bins["hop-send"]), url, address, "--count", str(count), "--size", str(size)]
    if presettled:
        args.append("--presettled")
    if rate:
        args += ["--rate", str(rate)]
    return args


def _recv_args(bins: dict[str, Path], url: str, address: str, count: int,
               listen: bool = False, idle: float = 0.0) -> list[str]:
    args = [str(bins["hop-recv"]), url, address, "--count", str(count)]
    if idle:
        args += ["--idle", str(idle)]
    return [*args, "--listen"] if listen else args


def _check(sent: Record, received: list[Record], count: int, presettled: bool,
           lossy: bool = False) -> None:
    """Every message arrived (a ``lossy`` pre-settled run may miss some) and,
    when unsettled, was accepted."""
    for r in received:
        if r["received"] != count and not (lossy and presettled and r["received"] > 0):
            raise RuntimeError(f"receiver got {r['received']} of {count}")
    if not presettled and sent["accepted"] != count:
        raise RuntimeError(f"sender had {sent['accepted']} of {count} accepted: {sent}")


def _through_router(bins: dict[str, Path], scale: Scale, *, size: int, presettled: bool,
                    receivers: int = 1, extra: str = "", address: str = "bench",
                    count: int | None = None, flavour: Flavour = HOP,
                    tls: tuple[Path, Path] | None = None) -> Record:
    n = count if count is not None else (scale.count if size <= 1024 else scale.big_count)
    lossy = presettled and flavour.drops_presettled
    with RouterProcess(router_conf(extra=extra, flavour=flavour, tls=tls),
                       flavour=flavour) as router:
        url = f"amqps://{router.url}" if tls is not None else router.url
        recvs = [start(_recv_args(bins, url, address, n, idle=2.0 if lossy else 0.0))
                 for _ in range(receivers)]
        time.sleep(0.3)  # let the receivers attach, so the sender gets credit at once
        cpu0 = router.cpu()
        sender = start(_send_args(bins, url, address, n, size, presettled))
        sent = finish(sender, scale.timeout)
        received = [finish(r, scale.timeout) for r in recvs]
        cpu = router.cpu() - cpu0
    _check(sent, received, n, presettled, lossy)
    seconds = max(r["end_ns"] for r in received) - min([sent["start_ns"]])
    got = min(r["received"] for r in received)
    rate = got / (seconds / 1e9) if seconds > 0 else float("nan")
    return {"messages": n, "rate": rate, "sender_rate": sent["rate"], "dropped": n - got,
            "router_cpu_s_per_100k": cpu * 100_000 / n, "router_us_per_msg": cpu * 1e6 / n,
            "latency_us": received[0]["latency_us"]}


def churn(flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale], Record]:
    """Connection churn: clients that connect, attach a sender, send one
    unsettled message, wait for its outcome and close, 8 at a time, as fast
    as they can (``hop-churn``); one consumer takes every message.  The rate
    is connections per second."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        n = scale.churn_connections
        with RouterProcess(router_conf(flavour=flavour), flavour=flavour) as router:
            recv = start(_recv_args(bins, router.url, "churn", n))
            time.sleep(0.3)  # attached: the clients get credit at once
            cpu0 = router.cpu()
            done = finish(start([str(bins["hop-churn"]), router.url, "churn",
                                 "--connections", str(n), "--parallel", "8"]), scale.timeout)
            received = finish(recv, scale.timeout)
            cpu = router.cpu() - cpu0
        if received["received"] != n or done["accepted"] != n:
            raise RuntimeError(f"churn: {done['accepted']} accepted, {received['received']} "
                               f"received of {n}")
        return {"connections": n, "rate": done["rate"],
                "router_us_per_connection": cpu * 1e6 / n, "latency_us": done["latency_us"]}
    return run


def direct(presettled: bool) -> Callable[[dict[str, Path], Scale], Record]:
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        url = f"127.0.0.1:{free_port()}"
        recv = start(_recv_args(bins, url, "bench", scale.count, listen=True))
        assert recv.stdout is not None
        if recv.stdout.readline().strip() != "listening":
            raise RuntimeError("hop-recv did not listen")
        sent = finish(start(_send_args(bins, url, "bench", scale.count, 100, presettled)),
                      scale.timeout)
        received = finish(recv, scale.timeout)
        _check(sent, [received], scale.count, presettled)
        seconds = (received["end_ns"] - sent["start_ns"]) / 1e9
        return {"messages": scale.count, "rate": scale.count / seconds,
                "sender_rate": sent["rate"], "latency_us": received["latency_us"]}
    return run


def one_router(size: int, presettled: bool,
               flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale], Record]:
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        return _through_router(bins, scale, size=size, presettled=presettled, flavour=flavour)
    return run


def one_router_tls(size: int, flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale],
                                                                  Record]:
    """As ``one_router``, with both clients on TLS (a self-signed certificate)."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        with tempfile.TemporaryDirectory(prefix="hop-bench-tls-") as directory:
            return _through_router(bins, scale, size=size, presettled=False, flavour=flavour,
                                   tls=self_signed(Path(directory)))
    return run


def multicast(receivers: int,
              flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale], Record]:
    extra = "address {\n    prefix: mc\n    distribution: multicast\n}\n"

    def run(bins: dict[str, Path], scale: Scale) -> Record:
        return _through_router(bins, scale, size=100, presettled=False, receivers=receivers,
                               extra=extra, address="mc.bench", count=scale.count // 2,
                               flavour=flavour)
    return run


REDELIVERY = "address {\n    prefix: again\n    distribution: balanced\n    redeliveryLimit: 3\n}\n"


def released(every: int) -> Callable[[dict[str, Path], Scale], Record]:
    """Two consumers of a balanced address with ``redeliveryLimit: 3``; the
    first releases every ``every``th delivery it gets (0: none), which the
    router forwards to the other (docs/routing.md#re-forwarding-released-deliveries).
    Every message must end accepted.  The latency is the worse consumer's."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        n = scale.count
        with RouterProcess(router_conf(extra=REDELIVERY)) as router:
            recvs = []
            for i in range(2):
                args = _recv_args(bins, router.url, "again.bench", n, idle=2.0)
                if i == 0 and every:
                    args += ["--release-every", str(every)]
                recvs.append(start(args))
            time.sleep(0.3)
            cpu0 = router.cpu()
            sent = finish(start(_send_args(bins, router.url, "again.bench", n, 100, False)),
                          scale.timeout)
            received = [finish(r, scale.timeout + 2.0) for r in recvs]
            cpu = router.cpu() - cpu0
        accepted = sum(r["received"] for r in received)
        if accepted != n or sent["accepted"] != n:
            raise RuntimeError(f"{accepted} received and {sent['accepted']} accepted of {n}")
        seconds = max(r["end_ns"] for r in received) - sent["start_ns"]
        worse = max(received, key=lambda r: r["latency_us"]["p99"])
        return {"messages": n, "rate": n / (seconds / 1e9), "sender_rate": sent["rate"],
                "released": sum(r.get("released", 0) for r in received),
                "router_us_per_msg": cpu * 1e6 / n, "latency_us": worse["latency_us"]}
    return run


def latency(rate: int, flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale], Record]:
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        n = max(100, int(rate * scale.latency_seconds))
        with RouterProcess(router_conf(flavour=flavour), flavour=flavour) as router:
            recv = start(_recv_args(bins, router.url, "lat", n))
            time.sleep(0.3)
            cpu0 = router.cpu()
            sent = finish(start(_send_args(bins, router.url, "lat", n, 100, False, rate=rate)),
                          scale.timeout)
            received = finish(recv, scale.timeout)
            cpu = router.cpu() - cpu0
        _check(sent, [received], n, False)
        return {"messages": n, "rate": sent["rate"], "latency_us": received["latency_us"],
                "router_cpu_s_per_100k": cpu * 100_000 / n}
    return run


def idle_connections(flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale], Record]:
    """Resident memory of a router holding many open, idle AMQP connections
    (its listener asks no heartbeats of them: idleTimeoutSeconds 0)."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        from bench.idle import open_idle_connections, wait_ready

        n = scale.idle_connections
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if limit < n + 256:
            raise RuntimeError(f"open-file limit {limit} is too low for {n} connections")
        conf = router_conf(flavour=flavour, idle_timeout=0)
        with RouterProcess(conf, flavour=flavour) as router:
            wait_ready(router.ports[0])
            time.sleep(0.5)
            base, cpu0 = router.rss(), router.cpu()
            started = time.monotonic()
            with open_idle_connections(router.ports[0], n, timeout=scale.timeout):
                open_s = time.monotonic() - started
                cpu = router.cpu() - cpu0
                time.sleep(1.0)
                loaded = router.rss()
                if router.proc.poll() is not None:
                    raise RuntimeError(f"{flavour.name} exited holding the connections")
        return {"connections": n, "rss_mb": loaded / 2**20, "baseline_rss_mb": base / 2**20,
                "kb_per_connection": (loaded - base) / 1024 / n,
                "open_per_s": n / open_s, "router_cpu_ms_per_connection": cpu * 1e3 / n}
    return run


# What each stalled consumer grants before it stalls.
STALLED_CREDIT = 10


def stalled_consumers(flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale], Record]:
    """Resident memory of a router holding many connections, each with a
    consumer that granted ``STALLED_CREDIT``, took its share of a producer's
    unsettled 100 B messages and stalled (it reads and settles nothing), so
    the router holds every one of those deliveries; meanwhile another
    producer and consumer still get their messages through (their rate)."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        from bench.idle import open_idle_connections, send_unsettled, wait_ready

        n = scale.idle_connections
        conf = router_conf(flavour=flavour, idle_timeout=0)
        with RouterProcess(conf, flavour=flavour) as router:
            port = router.ports[0]
            wait_ready(port)
            time.sleep(0.5)
            base = router.rss()
            with open_idle_connections(port, n, timeout=scale.timeout, consumer="stalled",
                                       credit=STALLED_CREDIT), \
                    send_unsettled(port, "stalled", n * STALLED_CREDIT,
                                   timeout=scale.timeout) as held:
                # The router may still be placing what it got (one consumer
                # at a time, each choice a scan of the busy ones: minutes at
                # full scale): the other flow is measured once it is done.
                placed_s = _cpu_idle(router, scale.timeout * 6)
                loaded = _settled_rss(router)
                m = scale.big_count
                recv = start(_recv_args(bins, router.url, "others", m))
                time.sleep(0.3)
                sent = finish(start(_send_args(bins, router.url, "others", m, 100, False)),
                              scale.timeout)
                received = finish(recv, scale.timeout)
                if router.proc.poll() is not None:
                    raise RuntimeError(f"{flavour.name} exited holding the consumers")
        _check(sent, [received], m, False)
        return {"connections": n, "held_deliveries": held, "placed_s": placed_s,
                "rss_mb": loaded / 2**20,
                "baseline_rss_mb": base / 2**20,
                "kb_per_stalled_connection": (loaded - base) / 1024 / n,
                "others_rate": m / ((received["end_ns"] - sent["start_ns"]) / 1e9)}
    return run


def _cpu_idle(router: RouterProcess, timeout: float) -> float:
    """Seconds until the router used less than 5% of a CPU over half a second."""
    started = time.monotonic()
    last = router.cpu()
    while time.monotonic() - started < timeout:
        time.sleep(0.5)
        now = router.cpu()
        if now - last < 0.025:
            return time.monotonic() - started
        last = now
    raise RuntimeError(f"the router was still busy after {timeout:.0f} s")


def _settled_rss(router: RouterProcess, timeout: float = 60.0) -> int:
    """The router's resident memory once it stopped growing (1% in a second)."""
    deadline = time.monotonic() + timeout
    last = router.rss()
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = router.rss()
        if now <= last * 1.01:
            return now
        last = now
    return last


def _addresses_conf(count: int) -> str:
    return "".join(f"address {{\n    prefix: svc{i}.region\n    distribution: "
                   f"{('balanced', 'closest', 'multicast')[i % 3]}\n}}\n"
                   for i in range(count))


def many_addresses(flavour: Flavour = HOP, *, compare: bool = False,
                   start_timeout: float = 0.0) -> Callable[[dict[str, Path], Scale], Record]:
    """Start-up time and memory with many configured addresses (``compare``:
    ``Scale.compare_addresses`` of them, else ``Scale.addresses``).

    ``startup_s``: from the process's start until it logs its listeners and
    "Operational"; ``ready_s``: until it answers a link's attach, which its
    routing core handles after whatever it queued at start-up.  The memory
    per address is over the same router started with none."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        from bench.idle import wait_ready

        n = scale.compare_addresses if compare else scale.addresses
        with RouterProcess(router_conf(flavour=flavour), flavour=flavour) as router:
            wait_ready(router.ports[0])
            time.sleep(0.5)
            base = router.rss()
        timeout = start_timeout or scale.start_timeout
        with RouterProcess(router_conf(flavour=flavour, extra=_addresses_conf(n)),
                           flavour=flavour, timeout=timeout) as router:
            wait_ready(router.ports[0], timeout)
            ready = time.perf_counter() - router.started
            cpu = router.cpu()
            time.sleep(0.5)
            rss = router.rss()
        return {"addresses": n, "startup_s": router.startup_s, "ready_s": ready,
                "startup_cpu_s": cpu, "rss_mb": rss / 2**20, "baseline_rss_mb": base / 2**20,
                "kb_per_address": (rss - base) / 1024 / n}
    return run


#: Receiving links each connection of many-consumer-addresses carries.
LINKS_PER_CONNECTION = 10_000


def many_links(flavour: Flavour = HOP, *, addresses: bool = False
               ) -> Callable[[dict[str, Path], Scale], Record]:
    """Resident memory of a router serving many receiving links, each from
    its own address (so each brings an address of its own): ``Scale.links``
    of them on one connection, or with ``addresses`` ``Scale.consumer_addresses``
    of them, ``LINKS_PER_CONNECTION`` a connection.  The memory per link is
    over the router before they attached; once they have all detached, what
    the router still holds is reported too."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        from bench.idle import attach_receivers, wait_ready

        n = scale.consumer_addresses if addresses else scale.links
        per = LINKS_PER_CONNECTION if addresses else n
        with RouterProcess(router_conf(flavour=flavour, idle_timeout=0),
                           flavour=flavour) as router:
            wait_ready(router.ports[0])
            time.sleep(0.5)
            base, cpu0 = router.rss(), router.cpu()
            started = time.monotonic()
            with attach_receivers(router.ports[0], n, per, "links",
                                  timeout=scale.timeout) as links:
                attach_s = time.monotonic() - started
                cpu = router.cpu() - cpu0
                loaded = _settled_rss(router)
                links.close()
                detached = _settled_rss(router)
            if router.proc.poll() is not None:
                raise RuntimeError(f"{flavour.name} exited holding the links")
        return {"links": n, "links_per_connection": per, "rss_mb": loaded / 2**20,
                "baseline_rss_mb": base / 2**20, "kb_per_link": (loaded - base) / 1024 / n,
                "attach_per_s": n / attach_s, "router_cpu_ms_per_link": cpu * 1e3 / n,
                "detached_rss_mb": detached / 2**20,
                "kb_per_link_after_detach": (detached - base) / 1024 / n}
    return run


SCENARIOS = [
    Scenario(name="direct-100", kind="throughput", run=direct(False),
             description="no router: hop-send to hop-recv, 100 B, unsettled (the ceiling)"),
    Scenario(name="direct-100-presettled", kind="throughput", run=direct(True),
             description="no router, 100 B, pre-settled"),
    Scenario(name="router-100", kind="throughput", run=one_router(100, False),
             description="one router, 100 B, unsettled, every message accepted end to end"),
    Scenario(name="router-100-presettled", kind="throughput", run=one_router(100, True),
             description="one router, 100 B, pre-settled"),
    Scenario(name="churn", kind="throughput", run=churn(),
             description="one router, connection churn: connect, attach, send one message, "
                         "get its outcome, close (8 clients at once; rate = connections/s)"),
    Scenario(name="router-100-tls", kind="throughput", run=one_router_tls(100),
             description="one router, 100 B, unsettled, both clients over TLS"),
    Scenario(name="router-64k-tls", kind="throughput", run=one_router_tls(65536),
             description="one router, 64 KiB, unsettled, both clients over TLS"),
    Scenario(name="router-1k", kind="throughput", run=one_router(1024, False),
             description="one router, 1 KiB, unsettled"),
    Scenario(name="router-64k", kind="throughput", run=one_router(65536, False),
             description="one router, 64 KiB, unsettled"),
    Scenario(name="multicast-4", kind="throughput", run=multicast(4),
             description="one router, multicast to 4 receivers, 100 B, unsettled"),
    Scenario(name="released-0", kind="throughput", run=released(0),
             description="one router, 2 consumers of an address with redeliveryLimit, "
                         "none releasing, 100 B, unsettled (beside released-10)"),
    Scenario(name="released-10", kind="throughput", run=released(10),
             description="as released-0, one consumer releasing 10% of what it gets: "
                         "the router forwards those to the other"),
    Scenario(name="edge-100", kind="throughput", run=edge_line(),
             description="an edge, the interior and another edge, 100 B, unsettled"),
    Scenario(name="latency-1000", kind="latency", run=latency(1000),
             description="one router, 1,000 msg/s, 100 B"),
    Scenario(name="latency-5000", kind="latency", run=latency(5000),
             description="one router, 5,000 msg/s, 100 B"),
    Scenario(name="idle-connections", kind="scale", run=idle_connections(),
             description="resident memory with idle AMQP connections"),
    Scenario(name="stalled-consumers", kind="scale", run=stalled_consumers(),
             description="resident memory with a stalled consumer on every connection"),
    Scenario(name="edges", kind="scale", run=edges_scale(),
             description="one interior serving many edge routers: memory per edge, "
                         "time until a new edge's address is reachable from every edge"),
    Scenario(name="many-addresses", kind="scale", run=many_addresses(),
             description="start-up time and memory with configured addresses"),
    Scenario(name="many-addresses-10k", kind="scale", run=many_addresses(compare=True),
             description="start-up time and memory with as many configured addresses as "
                         "qdrouterd's run (10,000 at full scale)"),
    Scenario(name="many-links", kind="scale", run=many_links(),
             description="resident memory with receiving links on one connection, each "
                         "from its own address (10,000 at full scale)"),
    Scenario(name="many-consumer-addresses", kind="scale", run=many_links(addresses=True),
             description="resident memory with addresses each with one consumer, 10,000 "
                         "a connection (100,000 at full scale)"),
]


# -- networks of routers --------------------------------------------------------

_ROUTES = "routes: "
_QDR_COSTS = re.compile(r"Computed costs: \{([^}]*)\}")


def _interior(router_id: str, connect_to: list[int], extra: str = "",
              flavour: Flavour = HOP) -> str:
    text = (f"router {{\n    mode: interior\n    id: {router_id}\n}}\n"
            + listener(flavour) + listener(flavour, "inter-router")
            + "log {\n    module: DEFAULT\n    enable: info+\n}\n")
    for port in connect_to:
        text += (f"connector {{\n    host: 127.0.0.1\n    port: {port}\n"
                 "    role: inter-router\n}\n")
    return text + extra


def _routes_known(router: RouterProcess, count: int) -> bool:
    """Whether the router's latest route line names ``count`` other routers
    (hopd's ``routes:`` line; qdrouterd's ``Computed costs:`` line)."""
    text = router.log.read_text(errors="replace")
    at = text.rfind(_ROUTES)
    if at >= 0:
        line = text[at + len(_ROUTES):].split("\n", 1)[0]
        return line != "none" and line.count(" via ") == count
    costs = _QDR_COSTS.findall(text)
    return bool(costs) and costs[-1].count(":") == count


def _wait_converged(routers: list[RouterProcess], timeout: float) -> float:
    started = time.monotonic()
    deadline = started + timeout
    while not all(_routes_known(r, len(routers) - 1) for r in routers):
        if time.monotonic() > deadline:
            raise RuntimeError("routers did not converge")
        time.sleep(0.05)
    return time.monotonic() - started


class _Network:
    """Routers started one by one, each connecting to the ones listed."""

    def __init__(self, links: list[list[int]], flavour: Flavour = HOP) -> None:
        self.routers: list[RouterProcess] = []
        try:
            for i, peers in enumerate(links):
                ports = [self.routers[p].ports[1] for p in peers]
                conf = _interior(f"R{i}", ports, flavour=flavour)
                self.routers.append(RouterProcess(conf, name=f"R{i}", flavour=flavour))
        except Exception:
            self.stop()
            raise

    def stop(self) -> None:
        for router in self.routers:
            router.stop()

    def __enter__(self) -> _Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def line3(presettled: bool = False,
          flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale], Record]:
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        n = scale.count
        with _Network([[], [0], [1]], flavour) as net:
            _wait_converged(net.routers, scale.timeout)
            first, _middle, last = net.routers
            recv = start(_recv_args(bins, f"127.0.0.1:{last.ports[0]}", "line", n))
            time.sleep(2.5)  # the consumer's address reaches the first router
            cpu0 = [r.cpu() for r in net.routers]
            sent = finish(start(_send_args(bins, f"127.0.0.1:{first.ports[0]}", "line", n, 100,
                                           presettled)), scale.timeout)
            received = finish(recv, scale.timeout)
            cpu = [r.cpu() - c for r, c in zip(net.routers, cpu0, strict=True)]
        _check(sent, [received], n, presettled)
        seconds = (received["end_ns"] - sent["start_ns"]) / 1e9
        return {"messages": n, "rate": n / seconds,
                "router_cpu_s_per_100k": max(cpu) * 100_000 / n,
                "router_us_per_msg": max(cpu) * 1e6 / n, "latency_us": received["latency_us"]}
    return run


def flows(routers: int, cross: bool = False,
          flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale], Record]:
    """Two independent flows (a sender and a receiver each, their own
    address, 100 B unsettled) at once, through one router or through two
    routers joined as a local network (docs/scaling.md): each flow's clients
    on one router, or with ``cross`` each flow's sender on one router and its
    receiver on the other.  The rate is both flows' messages over the time
    from the first send to the last arrival; CPU per message is all routers'
    CPU over all messages."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        n = scale.count
        links: list[list[int]] = [[]] if routers == 1 else [[], [0]]
        with _Network(links, flavour) as net:
            if routers > 1:
                _wait_converged(net.routers, scale.timeout)
            ports = [r.ports[0] for r in net.routers]
            recvs = [start(_recv_args(bins, f"127.0.0.1:{ports[i % routers]}", f"flow{i}", n))
                     for i in range(2)]
            time.sleep(2.5 if cross else 0.5)  # addresses known where the senders are
            cpu0 = [r.cpu() for r in net.routers]
            senders = [start(_send_args(bins, f"127.0.0.1:{ports[(i + cross) % routers]}",
                                        f"flow{i}", n, 100, False)) for i in range(2)]
            sent = [finish(p, scale.timeout) for p in senders]
            received = [finish(p, scale.timeout) for p in recvs]
            cpu = [r.cpu() - c for r, c in zip(net.routers, cpu0, strict=True)]
        for one_sent, one_received in zip(sent, received, strict=True):
            _check(one_sent, [one_received], n, False)
        seconds = (max(r["end_ns"] for r in received) - min(s["start_ns"] for s in sent)) / 1e9
        return {"messages": 2 * n, "rate": 2 * n / seconds,
                "router_cpu_s_per_100k": sum(cpu) * 100_000 / (2 * n),
                "router_us_per_msg": sum(cpu) * 1e6 / (2 * n),
                "busiest_router_cpu_share": max(cpu) / seconds,
                "latency_us": received[0]["latency_us"]}
    return run


SCENARIOS += [
    Scenario(name="flows2-1router", kind="throughput", run=flows(1),
             description="two flows of 100 B at once through one router (docs/scaling.md)"),
    Scenario(name="flows2-2routers", kind="throughput", run=flows(2),
             description="two flows, two routers as one local network, each flow on one"),
    Scenario(name="flows2-2routers-cross", kind="throughput", run=flows(2, cross=True),
             description="two flows, two routers, each flow's sender on one and receiver on "
                         "the other"),
]


def _placed(argv: list[str], node: str | None, settle_s: float = 1.0) -> Any:
    """Start a load generator; with ``node``, again until the router node
    that accepts its connection is ``node`` (it exits 3 on another): the
    placement of a flow's clients on one worker that a router could make
    (docs/scaling.md#placing-clients).  A receiver still running after
    ``settle_s`` stayed."""
    if node is None:
        return start(argv)
    for _ in range(200):
        proc = start([*argv, "--node", node])
        try:
            proc.wait(settle_s)
        except subprocess.TimeoutExpired:  # it stayed
            return proc
        if proc.returncode != 3:
            return proc  # finished (a sender) or failed: ``finish`` says which
    raise RuntimeError(f"no connection landed on {node}")


#: How long after the first sender of ``worker_flows`` is started they all
#: begin sending: time to place each of them on its worker.
SENDERS_START_NS = 2_000_000_000


def worker_flows(workers: int, placed: bool, flavour: Flavour = HOP,
                 count: int = 2) -> Callable[[dict[str, Path], Scale], Record]:
    """``count`` independent flows (a sender and a receiver each, their own
    address, 100 B unsettled) at once through one router on ``workers``
    workers (``hopd --workers``, qdrouterd's ``workerThreads``), all clients
    on the one listener (docs/scaling.md#workers).  With ``placed`` (Hop),
    each flow's clients are on one worker, flow i on worker i mod N;
    without, where the kernel and the workers put them, and the share of
    messages whose sender and receiver were on different workers is
    reported.  CPU per message is the router's processes' CPU over all
    messages."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        n = scale.count
        conf = (f"router {{\n    mode: standalone\n    id: W\n    workerThreads: {workers}\n}}\n"
                + listener(flavour) + "log {\n    module: DEFAULT\n    enable: notice+\n}\n")
        nodes = [worker_id("W", i % workers) if placed else None for i in range(count)]
        # The same conf file for both programs: its workerThreads is run.
        with RouterProcess(conf, name=f"workers{workers}", flavour=flavour,
                           ready=f"Operational, {workers} Threads") as proc:
            url = proc.url
            recvs = [_placed(_recv_args(bins, url, f"flow{i}", n), nodes[i])
                     for i in range(count)]
            time.sleep(2.5)  # every address known to every worker
            cpu0 = proc.cpu()
            # Placed one after another (a sender in the wrong place is
            # started again), the senders all begin at one time.
            start_at = ["--start-at", str(time.monotonic_ns() + SENDERS_START_NS)]
            senders = [_placed([*_send_args(bins, url, f"flow{i}", n, 100, False), *start_at],
                               nodes[i], settle_s=0.05) for i in range(count)]
            sent = [finish(p, scale.timeout) for p in senders]
            received = [finish(p, scale.timeout) for p in recvs]
            cpu = proc.cpu() - cpu0
        for one_sent, one_received in zip(sent, received, strict=True):
            _check(one_sent, [one_received], n, False)
        seconds = (max(r["end_ns"] for r in received) - min(s["start_ns"] for s in sent)) / 1e9
        crossed = sum(1 for s, r in zip(sent, received, strict=True) if s["node"] != r["node"])
        record: Record = {"messages": count * n, "rate": count * n / seconds,
                          "router_cpu_s_per_100k": cpu * 100_000 / (count * n),
                          "router_us_per_msg": cpu * 1e6 / (count * n),
                          "latency_us": received[0]["latency_us"]}
        if flavour is HOP:
            record["crossed_share"] = crossed / count
        return record
    return run


SCENARIOS += [
    Scenario(name="workers1-flows2", kind="throughput", run=worker_flows(1, False),
             description="two flows of 100 B at once, one router, one worker (docs/scaling.md)"),
    Scenario(name="workers2-flows2", kind="throughput", run=worker_flows(2, False),
             description="two flows, one router on two workers, clients where they land"),
    Scenario(name="workers2-flows2-placed", kind="throughput", run=worker_flows(2, True),
             description="two flows, one router on two workers, each flow's clients on one "
                         "worker"),
    Scenario(name="workers4-flows4", kind="throughput", run=worker_flows(4, False, count=4),
             description="four flows, one router on four workers, clients where they land"),
    Scenario(name="workers4-flows4-placed", kind="throughput",
             run=worker_flows(4, True, count=4),
             description="four flows, one router on four workers, each flow's clients on "
                         "one worker"),
]


def line3_latency(rate: int,
                  flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale], Record]:
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        n = max(100, int(rate * scale.latency_seconds))
        with _Network([[], [0], [1]], flavour) as net:
            _wait_converged(net.routers, scale.timeout)
            recv = start(_recv_args(bins, f"127.0.0.1:{net.routers[2].ports[0]}", "lat3", n))
            time.sleep(2.5)
            sent = finish(start(_send_args(bins, f"127.0.0.1:{net.routers[0].ports[0]}", "lat3",
                                           n, 100, False, rate=rate)), scale.timeout)
            received = finish(recv, scale.timeout)
        _check(sent, [received], n, False)
        return {"messages": n, "rate": sent["rate"], "latency_us": received["latency_us"]}
    return run


def mesh_convergence(flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale], Record]:
    """Time for a full mesh of routers to know every route, from the last start."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        size = scale.mesh
        with _Network([list(range(i)) for i in range(size)], flavour) as net:
            seconds = _wait_converged(net.routers, scale.timeout)
            rss = max(r.rss() for r in net.routers)
        return {"routers": size, "convergence_s": seconds, "rss_mb": rss / 2**20}
    return run


def sim_convergence(topology: str) -> Callable[[dict[str, Path], Scale], Record]:
    """A simulated network converging (``bench.sim``): ``random`` (average
    degree 3, fixed seed) of ``Scale.sim_routers`` routers, or a ``grid`` of
    ``Scale.sim_grid`` routers a side."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        from bench import sim

        edges = (sim.random_topology(scale.sim_routers) if topology == "random"
                 else sim.grid_topology(scale.sim_grid, scale.sim_grid))
        return {**sim.converge(edges), "topology": topology}
    return run


SCENARIOS += [
    Scenario(name="line3-100", kind="throughput", run=line3(),
             description="3-router line A-B-C, 100 B, unsettled (CPU: busiest router)"),
    Scenario(name="latency-1000-line3", kind="latency", run=line3_latency(1000),
             description="3-router line, 1,000 msg/s, 100 B"),
    Scenario(name="latency-5000-line3", kind="latency", run=line3_latency(5000),
             description="3-router line, 5,000 msg/s, 100 B"),
    Scenario(name="mesh-convergence", kind="scale", run=mesh_convergence(),
             description="link-state convergence of a full mesh of routers"),
    Scenario(name="sim-convergence-100", kind="scale", run=sim_convergence("random"),
             once=True,
             description="simulated network (real routing cores and codec, in memory) of "
                         "100 routers, random links of average degree 3, converging"),
    Scenario(name="sim-convergence-grid", kind="scale", run=sim_convergence("grid"),
             once=True,
             description="simulated square grid of routers (6x6 at full scale) converging"),
]


def sim_edges() -> Callable[[dict[str, Path], Scale], Record]:
    """``Scale.sim_edges`` edge routers under one interior, simulated with
    the real cores (``bench.sim.edges``)."""
    def run(paths: dict[str, Path], scale: Scale) -> Record:
        from bench import sim
        return sim.edges(scale.sim_edges)
    return run


SCENARIOS += [
    Scenario(name="sim-edges", kind="scale", run=sim_edges(), once=True,
             description="simulated edge routers (real edge and interior cores, links in "
                         "memory) under one interior: 1,000 at full scale"),
]


SCENARIOS += [
    Scenario(name="cut-links", kind="scale", run=cut_links(), once=True,
             description="an inter-router link and an edge uplink cut (sockets shut, or "
                         "silent until the idle timeout) under an at-least-once flow, then "
                         "healed: seconds until traffic again, 0 lost"),
    Scenario(name="slow-clients", kind="scale", run=slow_clients(), once=True,
             description="connections stopped mid-handshake (AMQP, SASL, HTTP) held at "
                         "once: memory per connection, seconds until closed"),
]


SCENARIOS += [
    Scenario(name="router-100m", kind="scale", run=large_message(),
             description="one router, 100 MiB messages, unsettled: router memory and MiB/s"),
]


def compared(flavour: Flavour) -> list[Scenario]:
    """The same runs on another router program, named ``<flavour>:<scenario>``,
    to be run side by side with Hop's in the same rounds."""
    return [
        Scenario(name=f"{flavour.name}:router-100m", kind="scale",
                 run=large_message(flavour),
                 description=f"{flavour.name}, one router, 100 MiB messages, unsettled"),
        Scenario(name=f"{flavour.name}:router-100", kind="throughput",
                 run=one_router(100, False, flavour),
                 description=f"{flavour.name}, one router, 100 B, unsettled"),
        Scenario(name=f"{flavour.name}:flows2-1router", kind="throughput",
                 run=flows(1, flavour=flavour),
                 description=f"{flavour.name}, two flows at once through one router"),
        *(Scenario(name=f"{flavour.name}:workers{n}-flows{flows}", kind="throughput",
                   run=worker_flows(n, False, flavour, count=flows),
                   description=f"{flavour.name}, {flows} flows at once, workerThreads: {n}")
          for n, flows in ((1, 2), (2, 2), (4, 4))),
        Scenario(name=f"{flavour.name}:churn", kind="throughput", run=churn(flavour),
                 description=f"{flavour.name}, one router, connection churn "
                             "(rate = connections/s)"),
        Scenario(name=f"{flavour.name}:router-100-tls", kind="throughput",
                 run=one_router_tls(100, flavour),
                 description=f"{flavour.name}, one router, 100 B, unsettled, over TLS"),
        Scenario(name=f"{flavour.name}:router-100-presettled", kind="throughput",
                 run=one_router(100, True, flavour),
                 description=f"{flavour.name}, one router, 100 B, pre-settled"),
        Scenario(name=f"{flavour.name}:router-1k", kind="throughput",
                 run=one_router(1024, False, flavour),
                 description=f"{flavour.name}, one router, 1 KiB, unsettled"),
        Scenario(name=f"{flavour.name}:router-64k", kind="throughput",
                 run=one_router(65536, False, flavour),
                 description=f"{flavour.name}, one router, 64 KiB, unsettled"),
        Scenario(name=f"{flavour.name}:multicast-4", kind="throughput",
                 run=multicast(4, flavour),
                 description=f"{flavour.name}, one router, multicast to 4 receivers, 100 B"),
        Scenario(name=f"{flavour.name}:latency-5000", kind="latency",
                 run=latency(5000, flavour),
                 description=f"{flavour.name}, one router, 5,000 msg/s, 100 B"),
        Scenario(name=f"{flavour.name}:latency-5000-line3", kind="latency",
                 run=line3_latency(5000, flavour),
                 description=f"{flavour.name}, 3-router line, 5,000 msg/s, 100 B"),
        Scenario(name=f"{flavour.name}:edge-100", kind="throughput",
                 run=edge_line(flavour),
                 description=f"{flavour.name}, an edge, the interior and another edge, 100 B"),
        Scenario(name=f"{flavour.name}:edges", kind="scale", run=edges_scale(flavour),
                 description=f"{flavour.name}, one interior serving many edge routers"),
        Scenario(name=f"{flavour.name}:line3-100", kind="throughput",
                 run=line3(False, flavour),
                 description=f"{flavour.name}, 3-router line, 100 B, unsettled"),
        Scenario(name=f"{flavour.name}:latency-1000", kind="latency",
                 run=latency(1000, flavour),
                 description=f"{flavour.name}, one router, 1,000 msg/s, 100 B"),
        Scenario(name=f"{flavour.name}:latency-1000-line3", kind="latency",
                 run=line3_latency(1000, flavour),
                 description=f"{flavour.name}, 3-router line, 1,000 msg/s, 100 B"),
        Scenario(name=f"{flavour.name}:linkroute-100", kind="throughput",
                 run=link_routed(flavour),
                 description=f"{flavour.name}, a link-routed sender to a container, 100 B"),
        Scenario(name=f"{flavour.name}:idle-connections", kind="scale",
                 run=idle_connections(flavour),
                 description=f"{flavour.name}, resident memory with idle AMQP connections"),
        Scenario(name=f"{flavour.name}:stalled-consumers", kind="scale",
                 run=stalled_consumers(flavour),
                 description=f"{flavour.name}, resident memory with stalled consumers"),
        Scenario(name=f"{flavour.name}:many-links", kind="scale", run=many_links(flavour),
                 description=f"{flavour.name}, resident memory with receiving links on one "
                             "connection"),
        Scenario(name=f"{flavour.name}:many-consumer-addresses", kind="scale",
                 run=many_links(flavour, addresses=True),
                 description=f"{flavour.name}, resident memory with addresses each with one "
                             "consumer"),
        Scenario(name=f"{flavour.name}:many-addresses-10k", kind="scale",
                 run=many_addresses(flavour, compare=True),
                 description=f"{flavour.name}, start-up time and memory with configured "
                             "addresses (10,000 at full scale)"),
        Scenario(name=f"{flavour.name}:many-addresses", kind="scale",
                 run=many_addresses(flavour, start_timeout=12 * 3600.0), opt_in=True,
                 description=f"{flavour.name}, start-up time and memory with configured "
                             "addresses (100,000 at full scale: hours; only when named)"),
        Scenario(name=f"{flavour.name}:cut-links", kind="scale", run=cut_links(flavour),
                 once=True, description=f"{flavour.name}, links cut under a flow, healed"),
        Scenario(name=f"{flavour.name}:slow-clients", kind="scale",
                 run=slow_clients(flavour, http=False), once=True,
                 description=f"{flavour.name}, connections stopped mid-handshake (AMQP "
                             "only: the qdrouterd measured has no HTTP)"),
        Scenario(name=f"{flavour.name}:mesh-convergence", kind="scale",
                 run=mesh_convergence(flavour),
                 description=f"{flavour.name}, link-state convergence of a full mesh"),
    ]


# -- routers in front of containers and brokers ---------------------------------------


def _wait_log(router: RouterProcess, pattern: str, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while router.log.read_text(errors="replace").count(pattern) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{pattern!r} not logged {count}x:\n"
                               f"{router.log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)


_INFO_LOG = "log {\n    module: ROUTER_CORE\n    enable: info+\n}\n"


def link_routed(flavour: Flavour = HOP) -> Callable[[dict[str, Path], Scale], Record]:
    """A sender's link tunnelled by a link route to a container: the router
    relays transfers and dispositions without parsing (hop-recv listens as
    the container and the router connects to it)."""
    def run(bins: dict[str, Path], scale: Scale) -> Record:
        return _link_routed(bins, scale, flavour)
    return run


def _link_routed(bins: dict[str, Path], scale: Scale, flavour: Flavour) -> Record:
    n = scale.count
    port = free_port()
    recv = start(_recv_args(bins, f"127.0.0.1:{port}", "lr.bench", n, listen=True))
    assert recv.stdout is not None
    if recv.stdout.readline().strip() != "listening":
        raise RuntimeError("hop-recv did not listen")
    extra = (f"connector {{\n    name: sink\n    host: 127.0.0.1\n    port: {port}\n"
             "    role: route-container\n    saslMechanisms: ANONYMOUS\n}\n"
             "linkRoute {\n    prefix: lr\n    direction: in\n    connection: sink\n}\n"
             + _INFO_LOG)
    with RouterProcess(router_conf(extra=extra, flavour=flavour), flavour=flavour) as router:
        _wait_log(router, "Link Route Activated", 1, scale.timeout)
        cpu0 = router.cpu()
        sent = finish(start(_send_args(bins, router.url, "lr.bench", n, 100, False)),
                      scale.timeout)
        received = finish(recv, scale.timeout)
        cpu = router.cpu() - cpu0
    _check(sent, [received], n, False)
    seconds = (received["end_ns"] - sent["start_ns"]) / 1e9
    return {"messages": n, "rate": n / seconds, "router_cpu_s_per_100k": cpu * 100_000 / n,
            "router_us_per_msg": cpu * 1e6 / n, "latency_us": received["latency_us"]}


def waypoint_round_trip(bins: dict[str, Path], scale: Scale) -> Record:
    """Producer -> router -> RabbitMQ queue (out auto-link) -> router (in
    auto-link) -> consumer: each message crosses the router twice and waits
    on the broker in between.  The rate is mostly the broker's; the router's
    CPU per message is its own."""
    from tests.system.rabbitmq import RabbitMQ  # the tests' broker fixture, started here too

    n = scale.broker_count
    broker = RabbitMQ("bench")
    try:
        broker.start()
        extra = (f"connector {{\n    name: broker\n    host: 127.0.0.1\n    port: {broker.port}\n"
                 "    role: route-container\n}\n"
                 "address {\n    prefix: wp\n    waypoint: yes\n}\n"
                 + "".join(f"autoLink {{\n    address: wp.bench\n    direction: {d}\n"
                           "    connection: broker\n}\n" for d in ("out", "in"))
                 + _INFO_LOG)
        with RouterProcess(router_conf(extra=extra)) as router:
            _wait_log(router, "Auto link attached", 2, scale.timeout)
            recv = start(_recv_args(bins, router.url, "wp.bench", n))
            time.sleep(0.3)
            cpu0 = router.cpu()
            sent = finish(start(_send_args(bins, router.url, "wp.bench", n, 100, False)),
                          scale.timeout)
            received = finish(recv, scale.timeout)
            cpu = router.cpu() - cpu0
    finally:
        broker.stop()
        broker.remove()
    _check(sent, [received], n, False)
    seconds = (received["end_ns"] - sent["start_ns"]) / 1e9
    return {"messages": n, "rate": n / seconds, "router_cpu_s_per_100k": cpu * 100_000 / n,
            "router_us_per_msg": cpu * 1e6 / n, "latency_us": received["latency_us"]}


SCENARIOS += [
    Scenario(name="linkroute-100", kind="throughput", run=link_routed(),
             description="one router, a link-routed sender to a container, 100 B, unsettled"),
    Scenario(name="waypoint-100", kind="throughput", run=waypoint_round_trip,
             description="one router, waypoint round trip through RabbitMQ, 100 B, unsettled"),
]
