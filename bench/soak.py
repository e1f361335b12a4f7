"""The soak: a network of routers under mixed traffic with faults, for as long
as asked (docs/reliability.md#the-soak).

``python -m bench.soak --minutes 30 --out DIR`` (``--qdrouterd PATH``: the
same network of qdrouterd instead; ``--tracemalloc FRAMES``: each hopd's
Python heap traced, and the sites that grew from the end of the warm-up to
the end in the report, docs/reliability.md#what-grows).  On hopd it also
asks each router for its C heap in use (``heapInUse``) every half-minute,
and fits that too.

Four interior routers in a full mesh (R0..R3), an edge router (E0) under R2,
and a RabbitMQ node as route container of R0.  Traffic, every message
numbered and every outcome counted (bench.soak_clients):

- bulk: the benchmark's C load generator (hop-send on R0 to hop-recv on
  R1, 100 B, unsettled) at half the rate it reached in a calibration run
  beside all the rest: most of the routers' load (the Python clients below
  cost far more CPU per message than the routers do);
- anycast (balanced): a producer on each interior and one on the edge
  (``--rate`` each), two consumers of each address on other routers;
- multicast: one producer on R0 to consumers on R0 and R1;
- request/response: requesters that connect, attach a dynamic reply-to,
  ask a batch of questions through the network and leave, again and again;
  two servers answer on anonymous senders;
- brokered: a waypoint queue (auto-links on R0) and a link-routed queue on
  RabbitMQ, each with a producer and a consumer on other routers.

Churn all the while: consumers detach and attach their links; an anycast
consumer is killed (SIGKILL) and another started in its place every
``kill-every`` seconds; management creates and deletes an address, an
auto-link and a link route on R0 every few seconds; R2 and R3 are restarted
in turn (SIGTERM and SIGKILL alternately); the broker is restarted once,
half-way.

At the end the producers stop and wait for their outcomes, the consumers
drain, and the checks: no message accepted and not received (lost), none
left without an outcome, every request answered, no delivery left unsettled
on any router's links, no traceback in any router's log, and the resident
memory of the routers never restarted (R0, R1) back within 10% of its level
after warm-up.  It writes ``soak.json`` (counts and the samples) and
``soak.png`` (memory, descriptors and CPU over time), and exits 1 when a
check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

from bench.build import build
from bench.fit import slope
from bench.heap import growth as heap_growth
from bench.heap import lines as heap_lines
from bench.processes import (
    HOP,
    Flavour,
    RouterProcess,
    cpu_seconds,
    finish,
    free_port,
    qdrouterd,
    raise_fd_limit,
    rss_bytes,
    start,
)
from router.heap import ENV_DIRECTORY, ENV_FRAMES
from router.heap import SUFFIX as HEAP_SUFFIX

ROOT = Path(__file__).resolve().parents[1]
ADDRESS = "org.apache.qpid.dispatch.router.config.address"
AUTOLINK = "org.apache.qpid.dispatch.router.config.autoLink"
LINKROUTE = "org.apache.qpid.dispatch.router.config.linkRoute"
LINK = "org.apache.qpid.dispatch.router.link"
CONNECTION = "org.apache.qpid.dispatch.connection"
MEMORY_MARGIN = 0.10
# The broker's restart waits this long for it to serve again: on two busy
# cores an Erlang VM's boot can take minutes.
BROKER_START_S = 300.0
# The clients run at a lower priority than the routers and the broker: they
# are the load, the routers what is measured.
CLIENT_NICE = 5
# hopd's C heap is asked for (over management) every this many samples.
HEAP_EVERY = 6
# The broker's queues are declared durable before the run and addressed so
# (RabbitMQ 3 declares transient ones for a plain name).
DURABLE = "/amq/queue/"
QUEUES = ("soak.queue", "soak.lr.q")


@attrs.frozen(kw_only=True)
class Plan:
    """When things happen, in seconds from the start of the traffic."""

    seconds: float
    calibrate_bulk: int
    warmup_s: float
    kill_every_s: float
    manage_every_s: float
    restarts: tuple[float, ...]
    broker_restart_s: float
    sample_every_s: float

    # Memory after warm-up: the median over this window, before any restart.
    window_s: float

    @classmethod
    def for_minutes(cls, minutes: float) -> Plan:
        seconds = minutes * 60.0
        long = minutes >= 10
        warmup = max(30.0, min(180.0, seconds * 0.1))
        window = 60.0 if long else 15.0
        every = 240.0 if long else 40.0
        restarts = tuple(_frange(warmup + window + 5.0, seconds - 20.0, every))
        return cls(seconds=seconds, calibrate_bulk=200_000 if long else 30_000, warmup_s=warmup,
                   window_s=window, kill_every_s=45.0 if long else 20.0, manage_every_s=5.0,
                   restarts=restarts, broker_restart_s=seconds / 2,
                   sample_every_s=5.0 if long else 1.0)


def _frange(start: float, stop: float, step: float) -> Iterator[float]:
    t = start
    while t < stop:
        yield t
        t += step


# -- the network ------------------------------------------------------------------------


@attrs.define
class Node:
    """One router of the soak: its conf (fixed ports, so that a restart comes
    back where its peers and clients look for it) and its processes."""

    name: str
    conf: str
    port: int
    flavour: Flavour
    process: RouterProcess | None = None
    logs: list[Path] = attrs.Factory(list)
    restarts: int = 0
    #: Environment of its processes (``--tracemalloc``: HOP_TRACEMALLOC).
    env: dict[str, str] = attrs.Factory(dict)

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.process = RouterProcess(self.conf, name=self.name, flavour=self.flavour,
                                     timeout=120.0, env=self.env)
        self.logs.append(self.process.log)

    def stop(self, kill: bool = False) -> None:
        if self.process is not None:
            if kill and self.process.proc.poll() is None:
                self.process.proc.kill()
                self.process.proc.wait()
            self.process.stop()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.proc.poll() is None


def _listener(port: int, role: str = "normal") -> str:
    text = (f"listener {{\n    host: 127.0.0.1\n    port: {port}\n"
            "    authenticatePeer: no\n    saslMechanisms: ANONYMOUS\n")
    return text + (f"    role: {role}\n" if role != "normal" else "") + "}\n"


def _connector(port: int, role: str, name: str = "") -> str:
    named = f"    name: {name}\n" if name else ""
    return (f"connector {{\n{named}    host: 127.0.0.1\n    port: {port}\n    role: {role}\n"
            "    saslMechanisms: ANONYMOUS\n}\n")


_COMMON = ("address {\n    prefix: soak.queue\n    waypoint: yes\n}\n"
           "address {\n    prefix: soak.mc\n    distribution: multicast\n}\n"
           "address {\n    prefix: soak.any\n    distribution: balanced\n}\n"
           "log {\n    module: DEFAULT\n    enable: info+\n}\n")


def network(flavour: Flavour, broker_port: int) -> list[Node]:
    """R0..R3 in a full mesh, E0 under R2; R0 holds the broker connection."""
    client = [free_port() for _ in range(5)]
    inter = [free_port() for _ in range(4)]
    edge_port = free_port()
    nodes = []
    for i in range(4):
        text = (f"router {{\n    mode: interior\n    id: R{i}\n}}\n" + _listener(client[i])
                + _listener(inter[i], "inter-router") + _COMMON)
        text += "".join(_connector(inter[j], "inter-router") for j in range(i))
        if i == 2:
            text += _listener(edge_port, "edge")
        if i:
            # The link route on every router its clients use: one that only
            # learned it from R0 would bind an attach by address while the
            # broker is away (docs/reliability.md#the-soak).
            text += "".join(f"linkRoute {{\n    prefix: soak.lr\n    direction: {d}\n}}\n"
                            for d in ("in", "out"))
        if i == 0:
            text += (_connector(broker_port, "route-container", "broker")
                     + "".join(f"autoLink {{\n    address: soak.queue\n    direction: {d}\n"
                               "    connection: broker\n"
                               f"    externalAddress: {DURABLE}soak.queue\n}}\n"
                               for d in ("out", "in"))
                     + "".join(f"linkRoute {{\n    prefix: soak.lr\n    direction: {d}\n"
                               "    connection: broker\n"
                               f"    addExternalPrefix: {DURABLE}\n}}\n" for d in ("in", "out")))
        nodes.append(Node(f"R{i}", text, client[i], flavour))
    edge = ("router {\n    mode: edge\n    id: E0\n}\n" + _listener(client[4])
            + _connector(edge_port, "edge") + _COMMON)
    nodes.append(Node("E0", edge, client[4], flavour))
    return nodes


def _management(node: Node, timeout: float = 10.0) -> Any:
    from router.tools.client import ManagementClient
    return ManagementClient(f"amqp://{node.url}", timeout_s=timeout)


def _wait(what: str, check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):
            if check():
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.5)


def _converged(nodes: list[Node]) -> bool:
    """Every interior's latest routes (in its log) name the three others, and
    R0's broker links are up.  (qdrouterd 1.20 does not answer a QUERY of
    router.node in time here, so the logs say it for both programs.)"""
    from bench.scenarios import _routes_known

    return all(node.process is not None and _routes_known(node.process, 3)
               for node in nodes[:4]) and _broker_links_up(nodes[0])


def _broker_links_up(node: Node) -> bool:
    with _management(node) as agent:
        autolinks = agent.query(AUTOLINK, ["address", "operStatus"])
        return sum(1 for r in autolinks if r["address"] == "soak.queue"
                   and r["operStatus"] == "active") == 2


# -- clients ------------------------------------------------------------------------------


@attrs.define
class Client:
    role: str
    address: str
    id: int
    proc: subprocess.Popen[str]
    record: Path | None
    kind: str  # anycast, multicast, request, serve
    summary: dict[str, Any] | None = None
    killed: bool = False


def _lower_priority() -> None:
    os.nice(CLIENT_NICE)


class Clients:
    def __init__(self, directory: Path, nodes: list[Node]) -> None:
        self.directory = directory
        self.nodes = nodes
        self.all: list[Client] = []
        self.next_id = 1

    def urls(self, *names: str) -> str:
        """The routers named first, the other interiors after them."""
        by = {n.name: n for n in self.nodes}
        rest = [n.name for n in self.nodes[:4] if n.name not in names]
        return ",".join(by[name].url for name in (*names, *rest))

    def start(self, role: str, address: str, kind: str, urls: str, *options: str,
              attach: str | None = None) -> Client:
        """A client of the flow ``address``; its links use ``attach`` where
        that is not the same address."""
        cid = self.next_id
        self.next_id += 1
        record = self.directory / f"{role}-{cid}.rec" if role == "recv" else None
        argv = [sys.executable, "-m", "bench.soak_clients", role, attach or address,
                "--id", str(cid), "--urls", urls, *options]
        if record is not None:
            argv += ["--record", str(record)]
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=(self.directory / f"{role}-{cid}.err").open("w"),
                                text=True, preexec_fn=_lower_priority)
        client = Client(role, address, cid, proc, record, kind)
        self.all.append(client)
        return client

    def stop(self, clients: list[Client], timeout: float) -> None:
        for c in clients:
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM)
        for c in clients:
            try:
                out, _ = c.proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                c.proc.kill()
                out, _ = c.proc.communicate()
            lines = [line for line in (out or "").splitlines() if line.startswith("{")]
            if lines:
                c.summary = json.loads(lines[-1])

    def kill(self, client: Client) -> None:
        client.proc.kill()
        client.proc.communicate()
        client.killed = True


def _counts(records: list[Path], producer: int, size: int,
            cache: dict[Path, Any]) -> Any:
    """How often each of a producer's ``size`` numbers was received, over
    these consumers' records (numpy: a long soak records millions)."""
    import numpy as np

    counts = np.zeros(size, dtype=np.int64)
    for path in records:
        if path not in cache:
            raw = path.read_bytes() if path.exists() else b""
            cache[path] = np.frombuffer(raw[:len(raw) - len(raw) % 8],
                                        dtype="<u4").reshape(-1, 2)
        pairs = cache[path]
        numbers = pairs[pairs[:, 0] == producer, 1]
        counts += np.bincount(numbers[numbers < size], minlength=size)[:size]
    return counts


# -- the run ------------------------------------------------------------------------------


@attrs.define
class Samples:
    """Each router's (seconds, resident MB, open fds, CPU seconds), taken by a
    thread of its own so that restarts and the broker's do not leave gaps."""

    rows: dict[str, list[tuple[float, float, int, float]]] = attrs.Factory(dict)
    #: hopd only: each router's (seconds, MB the C allocator has handed out,
    #: MB it holds free), from the router entity (heapInUse, heapFree), every
    #: ``HEAP_EVERY`` samples.
    heap: dict[str, list[tuple[float, float, float]]] = attrs.Factory(dict)
    events: list[tuple[float, str]] = attrs.Factory(list)
    stopped: threading.Event = attrs.Factory(threading.Event)

    def every(self, seconds: float, started: float, nodes: list[Node]) -> threading.Thread:
        def loop() -> None:
            taken = 0
            while not self.stopped.wait(seconds):
                now = time.monotonic() - started
                self.take(now, nodes)
                taken += 1
                if taken % HEAP_EVERY == 0:
                    self.take_heap(now, nodes)
        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        return thread

    def take_heap(self, now: float, nodes: list[Node]) -> None:
        for node in nodes:
            if node.alive and node.flavour is HOP:
                with contextlib.suppress(Exception):  # a router restarting: no sample
                    with _management(node, timeout=5.0) as agent:
                        [row] = agent.query("router", ["heapInUse", "heapFree"])
                    if isinstance(row["heapInUse"], int):
                        self.heap.setdefault(node.name, []).append(
                            (now, row["heapInUse"] / 2**20, row["heapFree"] / 2**20))

    def take(self, now: float, nodes: list[Node]) -> None:
        for node in nodes:
            if node.alive and node.process is not None:
                pid = node.process.proc.pid
                with contextlib.suppress(OSError, RuntimeError):
                    self.rows.setdefault(node.name, []).append(
                        (now, rss_bytes(pid) / 2**20, len(os.listdir(f"/proc/{pid}/fd")),
                         cpu_seconds(pid)))


def run(args: argparse.Namespace) -> int:
    from tests.system.rabbitmq import RabbitMQ  # the tests' broker, started the same way

    flavour = qdrouterd(args.qdrouterd) if args.qdrouterd else HOP
    plan = Plan.for_minutes(args.minutes)
    raise_fd_limit(65536)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hop-soak-"))
    broker = RabbitMQ("soak")
    nodes: list[Node] = []
    clients = Clients(work, nodes)
    samples = Samples()
    failures: list[str] = []
    report: dict[str, Any] = {"flavour": flavour.name, "minutes": args.minutes,
                              "plan": attrs.asdict(plan)}
    try:
        broker.start()
        for queue in QUEUES:
            broker.declare_durable_queue(queue)
        nodes.extend(network(flavour, broker.port))
        if args.tracemalloc:
            for node in nodes:
                node.env = {ENV_DIRECTORY: str(work / "heap" / node.name),
                            ENV_FRAMES: str(args.tracemalloc)}
        for node in nodes:
            node.start()
        _wait("the network converged and the broker's links attached",
              lambda: _converged(nodes), 120.0)
        report.update(_traffic(args, plan, nodes, clients, broker, samples, failures))
    finally:
        for c in clients.all:
            if c.proc.poll() is None:
                c.proc.kill()
        for node in nodes:
            node.stop()
        broker.stop()
        broker.remove()
    tracebacks = {n.name: sum(p.read_text(errors="replace").count("Traceback") for p in n.logs)
                  for n in nodes}
    report["tracebacks"] = tracebacks
    for name, count in tracebacks.items():
        if count:
            failures.append(f"{name}: {count} tracebacks in its log")
    report["clients"] = [{"role": c.role, "address": c.address, "id": c.id, "killed": c.killed,
                          **{k: v for k, v in (c.summary or {}).items()
                             if not isinstance(v, list)}} for c in clients.all]
    report["samples"] = {k: v for k, v in samples.rows.items()}
    report["heap_samples"] = {k: v for k, v in samples.heap.items()}
    report["events"] = samples.events
    report["failures"] = failures
    (out / "soak.json").write_text(json.dumps(report, indent=1))
    _plot(out / "soak.png", samples, plan, flavour.name, args.minutes)
    print(_text(report))
    if failures:
        print(f"\nwrote {out / 'soak.json'}, {out / 'soak.png'}; clients' files in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
        print(f"\nwrote {out / 'soak.json'}, {out / 'soak.png'}")
    return 1 if failures else 0


def _traffic(args: argparse.Namespace, plan: Plan, nodes: list[Node], clients: Clients,
             broker: Any, samples: Samples, failures: list[str]) -> dict[str, Any]:
    any_addresses = [f"soak.any.{i}" for i in range(4)] + ["soak.any.e"]
    producers_at = ["R0", "R1", "R2", "R3", "E0"]
    consumers_at = [("R1", "R2"), ("R2", "R3"), ("R3", "R0"), ("E0", "R1"), ("R1", "R0")]
    anycast: list[Client] = []
    for address, (a, b) in zip(any_addresses, consumers_at, strict=True):
        for where in (a, b):
            anycast.append(clients.start("recv", address, "anycast", clients.urls(where),
                                         "--relink", "30"))
    [clients.start("recv", "soak.mc.0", "multicast", clients.urls(where))
              for where in ("R0", "R1")]
    [clients.start("serve", "soak.svc", "serve", clients.urls(where))
               for where in ("R1", "R3")]
    clients.start("recv", "soak.queue", "anycast", clients.urls("R2"))
    if args.qdrouterd:
        # qdrouterd 1.20 (on Debian's proton-C 0.37) aborts at the first
        # receiving link it routes to RabbitMQ (docs/reliability.md#the-soak):
        # its link-routed queue is read from the broker itself.
        clients.start("recv", "soak.lr.q", "anycast", f"127.0.0.1:{broker.port}",
                      attach=f"{DURABLE}soak.lr.q")
    else:
        clients.start("recv", "soak.lr.q", "anycast", clients.urls("R1"))
    time.sleep(3.0)  # the consumers' addresses reach every router


    rate = args.rate
    producers = [clients.start("send", address, "anycast", clients.urls(where),
                               "--rate", f"{rate:.0f}")
                 for address, where in zip(any_addresses, producers_at, strict=True)]
    producers.append(clients.start("send", "soak.mc.0", "multicast", clients.urls("R0"),
                                   "--rate", "50"))
    producers.append(clients.start("send", "soak.queue", "anycast", clients.urls("R1"),
                                   "--rate", "50"))
    producers.append(clients.start("send", "soak.lr.q", "anycast", clients.urls("R3", "R1"),
                                   "--rate", "50"))
    requesters = [clients.start("request", "soak.svc", "request",
                                clients.urls(*order), "--batch", "20")
                  for order in (("R0", "R2", "E0"), ("R3", "R1"))]

    # The bulk flow's calibration, with all the rest running (unless its
    # rate is given: two soaks side by side would calibrate against each other).
    bins = build()
    r0, r1 = nodes[0].url, nodes[1].url
    bulk_capacity: float | None = None
    if args.bulk_rate:
        bulk_rate = float(args.bulk_rate)
    else:
        n = plan.calibrate_bulk
        recv = start([str(bins["hop-recv"]), r1, "soak.bulk", "--count", str(n),
                      "--timeout", "300"])
        time.sleep(1.0)
        sent = finish(start([str(bins["hop-send"]), r0, "soak.bulk", "--count", str(n),
                             "--timeout", "300"]), 330)
        finish(recv, 330)
        bulk_capacity = float(sent["rate"])
        bulk_rate = bulk_capacity / 2
    bulk_n = int(bulk_rate * plan.seconds)
    limit = str(plan.seconds + 600)
    bulk_recv = start([str(bins["hop-recv"]), r1, "soak.bulk", "--count", str(bulk_n),
                       "--timeout", limit, "--idle", str(args.grace)])
    time.sleep(0.5)
    bulk_send = start([str(bins["hop-send"]), r0, "soak.bulk", "--count", str(bulk_n),
                       "--rate", f"{bulk_rate:.0f}", "--timeout", limit])
    started = time.monotonic()
    restarts = list(plan.restarts)
    broker_restarted = False
    broker_back_s: float | None = None
    next_kill = plan.kill_every_s
    next_manage = plan.manage_every_s
    samples.take(0.0, nodes)
    samples.take_heap(0.0, nodes)
    sampler = samples.every(plan.sample_every_s, started, nodes)
    managed: list[tuple[str, str]] = []
    manage_ok = manage_failed = 0
    mgmt_round = 0
    restart_turn = 0
    kills = 0
    heaps: dict[str, int] = {}  # the pid of each router snapshotted after warm-up
    while True:
        now = time.monotonic() - started
        if now >= plan.seconds:
            break
        if args.tracemalloc and not heaps and now >= plan.warmup_s + plan.window_s:
            heaps = _snapshot_heaps(nodes, samples, now)
        for node in nodes:
            if node.process is not None and not node.alive:
                failures.append(f"{node.name} exited by itself at {now:.0f} s")
                samples.events.append((now, f"{node.name} exited"))
                node.start()
        if restarts and now >= restarts[0]:
            restarts.pop(0)
            node = nodes[2 + restart_turn % 2]
            kill = restart_turn % 2 == 1
            restart_turn += 1
            samples.events.append((now, f"{node.name} {'killed' if kill else 'stopped'}"))
            node.stop(kill=kill)
            time.sleep(1.0)
            node.start()
            node.restarts += 1
        if not broker_restarted and now >= plan.broker_restart_s:
            broker_restarted = True
            samples.events.append((now, "broker restarted"))
            broker_back_s = _restart_broker(broker, failures)
        if now >= next_kill:
            next_kill += plan.kill_every_s
            alive = [c for c in anycast if not c.killed and c.proc.poll() is None]
            victim = alive[kills % len(alive)]
            kills += 1
            clients.kill(victim)
            where = ("R0", "R1", "R2", "R3", "E0")[kills % 5]
            anycast.append(clients.start("recv", victim.address, "anycast",
                                         clients.urls(where), "--relink", "30"))
        if now >= next_manage:
            next_manage += plan.manage_every_s
            mgmt_round += 1
            try:
                _manage(nodes[0], mgmt_round, managed)
                manage_ok += 1
            except Exception as exc:  # counted and shown: a failure of the check
                manage_failed += 1
                if manage_failed <= 5:
                    failures.append(f"management round {mgmt_round}: {exc}")
        time.sleep(0.2)

    samples.events.append((time.monotonic() - started, "producers stop"))
    clients.stop(producers + requesters, timeout=args.grace + 60)
    bulk = _bulk(bulk_send, bulk_recv, bulk_n, args.grace + 120, failures)
    # The consumers drain what is still on its way (a broker queue, credit).
    drained = time.monotonic() + args.grace
    while time.monotonic() < drained:
        lost = _losses(clients)[0]
        if not lost:
            break
        time.sleep(2.0)
    clients.stop([c for c in clients.all if c.proc.poll() is None], timeout=30)
    time.sleep(5.0)  # the routers see the clients go
    samples.stopped.set()
    sampler.join()
    end = time.monotonic() - started
    samples.take(end, nodes)
    samples.take_heap(end, nodes)
    samples.events.append((end, "clients gone"))

    result: dict[str, Any] = {"rate_per_anycast_producer": rate,
                              "bulk_capacity_msg_s": bulk_capacity, "bulk_rate": bulk_rate,
                              "bulk": bulk,
                              "management_ok": manage_ok, "management_failed": manage_failed,
                              "router_restarts": sum(n.restarts for n in nodes),
                              "consumers_killed": kills, "broker_restarts": 1,
                              "broker_back_s": broker_back_s}
    lost, by_flow = _losses(clients)
    result["flows"] = by_flow
    result["lost"] = lost
    totals = _totals(clients)
    result["totals"] = totals
    if lost:
        failures.append(f"{lost} messages accepted and never received")
    if totals["no_outcome"]:
        failures.append(f"{totals['no_outcome']} deliveries without an outcome")
    if totals["unanswered"]:
        failures.append(f"{totals['unanswered']} requests never answered")
    if manage_failed:
        failures.append(f"{manage_failed} management rounds failed")
    result["routers_after"] = _routers_after(nodes, failures)
    result["memory"] = _memory(samples, plan, nodes, failures)
    if heaps:
        result["heap"] = _heap_growth(nodes, heaps, _snapshot_heaps(nodes, samples, end),
                                      failures)
    return result


def _snapshot_heaps(nodes: list[Node], samples: Samples, now: float) -> dict[str, int]:
    """SIGUSR2 to each router that traces its heap; the pid of each asked."""
    asked = {}
    for node in nodes:
        if node.env and node.alive and node.process is not None:
            node.process.proc.send_signal(signal.SIGUSR2)
            asked[node.name] = node.process.proc.pid
    samples.events.append((now, "heap snapshots"))
    return asked


def _heap_growth(nodes: list[Node], warm: dict[str, int], last: dict[str, int],
                 failures: list[str]) -> dict[str, Any]:
    """Each router's top growing allocation sites from its snapshot after
    warm-up to its last (routers restarted between them have none)."""
    out: dict[str, Any] = {}
    for node in nodes:
        pid = warm.get(node.name)
        if pid is None or last.get(node.name) != pid:
            continue
        folder = Path(node.env[ENV_DIRECTORY])
        names = [folder / f"hopd-{pid}-{k}{HEAP_SUFFIX}" for k in (1, 2)]
        deadline = time.monotonic() + 60.0
        while not all(p.exists() for p in names) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not all(p.exists() for p in names):
            failures.append(f"{node.name}: its heap snapshots were not written")
            continue
        out[node.name] = heap_growth(names[0], names[1], top=10)
    return out


def _seconds(value: float | None) -> str:
    return "never" if value is None else f"{value:.0f} s"


def _restart_broker(broker: Any, failures: list[str]) -> float | None:
    """Restart the broker; how long until it served AMQP again (None: it did
    not, a failure of the run, reported with the broker's log, not raised:
    the rest of the soak goes on and counts what that cost)."""
    began = time.monotonic()
    try:
        broker.restart(BROKER_START_S)
    except (AssertionError, subprocess.SubprocessError, OSError) as error:
        failures.append(f"the broker did not come back: {error}")
        return None
    return time.monotonic() - began


def _bulk(send: subprocess.Popen[str], recv: subprocess.Popen[str], count: int,
          timeout: float, failures: list[str]) -> dict[str, Any]:
    """The C flow's counts: every delivery has an outcome, every accepted
    message arrived."""
    try:
        sent = finish(send, timeout)
        received = finish(recv, timeout)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        send.kill()
        recv.kill()
        failures.append(f"bulk flow: {exc}")
        return {}
    outcomes = sum(int(sent[k]) for k in ("accepted", "released", "rejected", "modified"))
    if outcomes != count:
        failures.append(f"bulk flow: {count - outcomes} of {count} without an outcome")
    if int(received["received"]) < int(sent["accepted"]):
        failures.append(f"bulk flow: {sent['accepted']} accepted, {received['received']} "
                        "received")
    return {"count": count, "accepted": sent["accepted"], "released": sent["released"],
            "modified": sent["modified"], "rejected": sent["rejected"],
            "received": received["received"], "latency_us": received.get("latency_us")}


def _manage(node: Node, k: int, managed: list[tuple[str, str]]) -> None:
    """Create an address, an auto-link and a link route; delete the previous ones."""
    created = [(ADDRESS, f"soak-mgmt-address-{k}",
                {"prefix": f"soak.mgmt.{k}", "distribution": "closest"}),
               (AUTOLINK, f"soak-mgmt-autolink-{k}",
                {"address": f"soak.mgmtq.{k}", "direction": "in", "connection": "broker"}),
               (LINKROUTE, f"soak-mgmt-linkroute-{k}",
                {"prefix": f"soak.mgmtlr.{k}", "direction": "in", "connection": "broker"})]
    with _management(node) as agent:
        for entity, name, attributes in created:
            agent.call("CREATE", attributes, type=entity, name=name)
        for entity, name in managed:
            agent.call("DELETE", type=entity, name=name)
    managed[:] = [(entity, name) for entity, name, _ in created]


def _losses(clients: Clients) -> tuple[int, dict[str, Any]]:
    """Messages accepted by a producer and received by none of the consumers
    that count for it: any consumer of its address (anycast), every consumer
    of its address (multicast; they all live the whole run)."""
    import numpy as np

    lost = 0
    flows: dict[str, Any] = {}
    cache: dict[Path, Any] = {}
    for producer in clients.all:
        s = producer.summary
        if producer.role != "send" or s is None:
            continue
        records = [c.record for c in clients.all
                   if c.role == "recv" and c.address == producer.address and c.record]
        groups = [[r] for r in records] if producer.kind == "multicast" else [records]
        accepted = np.ones(s["generated"], dtype=bool)
        for n in (*s["no_outcome"], *s["not_resent"], *s["rejected_numbers"]):
            accepted[n] = False
        flow = flows.setdefault(producer.address, {"accepted": 0, "lost": 0, "duplicates": 0})
        flow["accepted"] += int(accepted.sum())
        for group in groups:
            counts = _counts(group, producer.id, s["generated"], cache)
            missing = int(np.count_nonzero(accepted & (counts == 0)))
            flow["lost"] += missing
            flow["duplicates"] += int(np.maximum(counts - 1, 0).sum())
            lost += missing
    return lost, flows


def _totals(clients: Clients) -> dict[str, int]:
    totals: dict[str, int] = {"no_outcome": 0, "not_resent": 0, "unanswered": 0}
    for c in clients.all:
        s = c.summary or {}
        for key, value in s.items():
            if isinstance(value, int) and key != "id":
                name = f"{c.role}.{key}"
                totals[name] = totals.get(name, 0) + value
        totals["no_outcome"] += len(s.get("no_outcome", ()))
        totals["not_resent"] += len(s.get("not_resent", ()))
        totals["unanswered"] += len(s.get("unanswered", ()))
    return totals


def _routers_after(nodes: list[Node], failures: list[str]) -> dict[str, Any]:
    """Each router's links and connections once every client left."""
    after: dict[str, Any] = {}
    for node in nodes:
        try:
            with _management(node) as agent:
                links = agent.query(LINK, ["linkType", "unsettledCount", "undeliveredCount"])
                conns = agent.query(CONNECTION, ["role"])
        except Exception as exc:  # a router that cannot answer fails the check
            failures.append(f"{node.name} did not answer management at the end: {exc}")
            continue
        unsettled = sum(int(r.get("unsettledCount") or 0) for r in links)
        undelivered = sum(int(r.get("undeliveredCount") or 0) for r in links)
        normal = sum(1 for r in conns if r.get("role") == "normal")
        after[node.name] = {"links": len(links), "unsettled": unsettled,
                            "undelivered": undelivered, "client_connections": normal}
        if unsettled or undelivered:
            failures.append(f"{node.name}: {unsettled} unsettled and {undelivered} "
                            "undelivered deliveries left on its links")
    return after


def _memory(samples: Samples, plan: Plan, nodes: list[Node],
            failures: list[str]) -> dict[str, Any]:
    memory: dict[str, Any] = {}
    for node in nodes:
        rows = samples.rows.get(node.name, [])
        window = [r for r in rows if plan.warmup_s <= r[0] <= plan.warmup_s + plan.window_s]
        if not rows or not window:
            continue
        warm = statistics.median(r[1] for r in window)
        final = rows[-1]
        memory[node.name] = {"warm_mb": warm, "final_mb": final[1],
                             "max_mb": max(r[1] for r in rows),
                             "fds_warm": window[0][2], "fds_final": final[2],
                             "cpu_s": sum(_cpu_spans(rows)), "restarted": node.restarts > 0}
        if node.restarts == 0:
            # How fast it grew after the warm-up (bench.fit), for the report.
            memory[node.name]["slope"] = slope(
                [(r[0], r[1]) for r in rows if r[0] >= plan.warmup_s]).as_dict()
            heap = [h for h in samples.heap.get(node.name, []) if h[0] >= plan.warmup_s]
            if len(heap) >= 3:
                memory[node.name]["heap"] = {
                    "warm_mb": heap[0][1], "final_mb": heap[-1][1], "free_final_mb": heap[-1][2],
                    "slope": slope([(h[0], h[1]) for h in heap]).as_dict()}
        if node.restarts == 0 and final[1] > warm * (1 + MEMORY_MARGIN):
            failures.append(f"{node.name}: resident memory {final[1]:.1f} MB at the end, "
                            f"{warm:.1f} MB after warm-up")
    return memory


def _cpu_spans(rows: list[tuple[float, float, int, float]]) -> Iterator[float]:
    """CPU seconds used, over restarts (a counter that falls started again)."""
    for before, after in itertools.pairwise(rows):
        yield after[3] - before[3] if after[3] >= before[3] else after[3]


def _text(report: dict[str, Any]) -> str:
    lines = [f"soak on {report['flavour']}, {report['minutes']:g} minutes of traffic"]
    if "totals" in report:
        lines.append(f"anycast producers at {report['rate_per_anycast_producer']:.0f} msg/s "
                     "each")
        t = report["totals"]
        b = report["bulk"]
        if b:
            capacity = report["bulk_capacity_msg_s"]
            calibrated = (f"calibration {capacity:.0f} msg/s, run at" if capacity
                          else "rate given:")
            lines.append(f"bulk: {calibrated} "
                         f"{report['bulk_rate']:.0f}: {b['count']} sent, {b['accepted']} "
                         f"accepted, {b['released']} released, {b['modified']} modified, "
                         f"{b['received']} received")
        lines.append(f"sent {t.get('send.sent', 0)} (re-sent {t.get('send.resent', 0)}), "
                     f"accepted {t.get('send.accepted', 0)}, released "
                     f"{t.get('send.released', 0)}, modified {t.get('send.modified', 0)}, "
                     f"rejected {t.get('send.rejected', 0)}, lost {report['lost']}, "
                     f"without an outcome {t['no_outcome']}")
        lines.append(f"requests {t.get('request.requests', 0)}, answered "
                     f"{t.get('request.answered', 0)}, unanswered {t['unanswered']}, "
                     f"cycles {t.get('request.cycles', 0)}")
        for address, flow in sorted(report["flows"].items()):
            lines.append(f"  {address}: accepted {flow['accepted']}, lost {flow['lost']}, "
                         f"duplicates {flow['duplicates']}")
        lines.append(f"faults: {report['router_restarts']} router restarts, "
                     f"{report['broker_restarts']} broker restart "
                     f"({_seconds(report.get('broker_back_s'))} to serve again), "
                     f"{report['consumers_killed']} consumers killed, management rounds "
                     f"{report['management_ok']} ok / {report['management_failed']} failed")
        for name, m in sorted(report["memory"].items()):
            lines.append(f"  {name}: RSS {m['warm_mb']:.1f} MB after warm-up, "
                         f"{m['final_mb']:.1f} MB at the end (max {m['max_mb']:.1f}), "
                         f"fds {m['fds_warm']} -> {m['fds_final']}, CPU {m['cpu_s']:.0f} s"
                         + (" (restarted)" if m["restarted"] else ""))
            if "slope" in m:
                s = m["slope"]
                lines.append(f"    after warm-up {s['mb_per_hour']:+.2f} +/- "
                             f"{s['stderr_mb_per_hour']:.2f} MB/h (halves "
                             f"{s['first_half_mb_per_hour']:+.2f}, "
                             f"{s['second_half_mb_per_hour']:+.2f})"
                             + (", flat" if s["flat"] else ""))
            if "heap" in m:
                h, s = m["heap"], m["heap"]["slope"]
                lines.append(f"    C heap in use {h['warm_mb']:.1f} MB after warm-up, "
                             f"{h['final_mb']:.1f} MB at the end ({h['free_final_mb']:.1f} "
                             f"free): {s['mb_per_hour']:+.2f} +/- "
                             f"{s['stderr_mb_per_hour']:.2f} MB/h")
        for name, sites in sorted(report.get("heap", {}).items()):
            lines.append(f"  {name}: heap growth after warm-up, top sites:")
            lines += [f"    {line}" for line in heap_lines(sites)]
        for name, a in sorted(report["routers_after"].items()):
            lines.append(f"  {name} after: {a['links']} links, {a['unsettled']} unsettled, "
                         f"{a['client_connections']} client connections")
    lines.append("checks: " + ("all passed" if not report["failures"]
                               else "FAILED\n  " + "\n  ".join(report["failures"])))
    return "\n".join(lines)


def _plot(path: Path, samples: Samples, plan: Plan, flavour: str, minutes: float) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (mem, fds, cpu) = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    for name, rows in sorted(samples.rows.items()):
        t = [r[0] / 60 for r in rows]
        line, = mem.plot(t, [r[1] for r in rows], label=name, lw=1)
        heap = samples.heap.get(name, [])
        if heap:
            mem.plot([h[0] / 60 for h in heap], [h[1] for h in heap], lw=0.8, ls="--",
                     color=line.get_color(), label=f"{name} C heap")
        fds.plot(t, [r[2] for r in rows], label=name, lw=1)
        spans = list(_cpu_spans(rows))
        dts = [b[0] - a[0] for a, b in itertools.pairwise(rows)]
        cpu.plot(t[1:], [100 * s / d if d else 0 for s, d in zip(spans, dts, strict=True)],
                 label=name, lw=0.8)
    for when, what in samples.events:
        for ax in (mem, fds, cpu):
            ax.axvline(when / 60, color="grey", lw=0.5, ls=":")
        mem.annotate(what, (when / 60, 1.0), xycoords=("data", "axes fraction"),
                     rotation=90, fontsize=6, va="top", ha="right", color="grey")
    mem.axvspan(plan.warmup_s / 60, (plan.warmup_s + plan.window_s) / 60, color="green",
                alpha=0.08)
    mem.set_ylabel("resident MB" + (" (dashed: C heap)" if samples.heap else ""))
    fds.set_ylabel("open fds")
    cpu.set_ylabel("CPU %")
    cpu.set_xlabel("minutes")
    mem.legend(fontsize=7, ncol=5, loc="lower right")
    mem.set_title(f"soak on {flavour}, {minutes:g} minutes (python -m bench.soak)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--rate", type=float, default=100.0,
                        help="messages per second of each Python anycast producer")
    parser.add_argument("--grace", type=float, default=60.0,
                        help="seconds for outcomes and consumers to drain at the end")
    parser.add_argument("--qdrouterd", default="", metavar="PATH",
                        help="run the soak on this qdrouterd instead of hopd")
    parser.add_argument("--bulk-rate", type=float, default=0.0, metavar="MSG_S",
                        help="run the bulk flow at this rate instead of half of what a "
                             "calibration run reaches (for soaks run side by side)")
    parser.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES",
                        help="hopd only: trace each router's Python allocations (FRAMES "
                             "frames each), snapshot them after warm-up and at the end, "
                             "and report the top growing sites (slows the routers)")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
