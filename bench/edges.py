"""Edge routers at scale (docs/networks.md#edge-routers): traffic edge -> interior
-> edge, and one interior serving many real edge processes.

``edge-100``: an interior and two edges; hop-send on one edge, hop-recv on
the other, 100 B unsettled.  The figures are the rate and the busiest
router's CPU per message.

``edges``: an interior, then ``Scale.edges`` edge routers started one by
one.  The figures: the interior's resident memory per edge (after minus
before, divided by the count), and how long an address on a newly started
edge takes to be reachable from every other edge: one producer per edge
waits for credit on an address nobody consumes yet, then a consumer attaches
on a new edge; the time is until the last producer got credit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from proton import Event
from proton.handlers import MessagingHandler
from proton.reactor import Container

from bench.processes import HOP, Flavour, RouterProcess, finish, listener, start

Record = dict[str, Any]
_UPLINK = "Edge connection (id="
_LOG = "log {\n    module: DEFAULT\n    enable: info+\n}\n"


def interior_conf(flavour: Flavour) -> str:
    """An interior router: clients on ``ports[0]``, edges on ``ports[1]``."""
    return ("router {\n    mode: interior\n    id: Interior\n}\n" + listener(flavour)
            + listener(flavour, "edge") + _LOG)


def edge_conf(name: str, uplink: int, flavour: Flavour) -> str:
    """An edge router: clients on ``ports[0]``, an uplink to ``uplink``."""
    return (f"router {{\n    mode: edge\n    id: {name}\n}}\n" + listener(flavour)
            + f"connector {{\n    host: 127.0.0.1\n    port: {uplink}\n    role: edge\n}}\n"
            + _LOG)


def _wait_uplink(edge: RouterProcess, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _UPLINK not in edge.log.read_text(errors="replace"):
        if time.monotonic() > deadline or edge.proc.poll() is not None:
            raise RuntimeError(f"{edge.dir}: no uplink")
        time.sleep(0.01)


def edge_line(flavour: Flavour = HOP) -> Callable[[dict[str, Path], Any], Record]:
    """hop-send on one edge to hop-recv on another, through the interior."""
    def run(bins: dict[str, Path], scale: Any) -> Record:
        n = scale.count
        with RouterProcess(interior_conf(flavour), name="interior", flavour=flavour) as top:
            edges = [RouterProcess(edge_conf(f"Edge{i}", top.ports[1], flavour),
                                   name=f"edge{i}", flavour=flavour) for i in (1, 2)]
            try:
                for edge in edges:
                    _wait_uplink(edge, scale.timeout)
                first, second = edges
                recv = start([str(bins["hop-recv"]), second.url, "edgeline", "--count", str(n)])
                time.sleep(1.0)  # the consumer is known at the interior and at the first edge
                routers = [first, top, second]
                cpu0 = [r.cpu() for r in routers]
                sent = finish(start([str(bins["hop-send"]), first.url, "edgeline", "--count",
                                     str(n), "--size", "100"]), scale.timeout)
                received = finish(recv, scale.timeout)
                cpu = [r.cpu() - c for r, c in zip(routers, cpu0, strict=True)]
            finally:
                for edge in edges:
                    edge.stop()
        if received["received"] != n or sent["accepted"] != n:
            raise RuntimeError(f"edge line lost messages: {sent} {received}")
        seconds = (received["end_ns"] - sent["start_ns"]) / 1e9
        return {"messages": n, "rate": n / seconds,
                "router_cpu_s_per_100k": max(cpu) * 100_000 / n,
                "router_us_per_msg": max(cpu) * 1e6 / n,
                "interior_us_per_msg": cpu[1] * 1e6 / n, "latency_us": received["latency_us"]}
    return run


class _Producers(MessagingHandler):  # type: ignore[misc]
    """One producer per URL on ``address``; records when each first has credit."""

    def __init__(self, urls: list[str], address: str) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.urls = urls
        self.address = address
        self.credited: dict[str, float] = {}
        self.attached = threading.Event()
        self.done = threading.Event()
        self._opened = 0
        self._conns: list[Any] = []

    def on_start(self, event: Event) -> None:
        for url in self.urls:
            conn = event.container.connect(url)
            self._conns.append(conn)
            event.container.create_sender(conn, self.address, name=url)

    def on_link_opened(self, event: Event) -> None:
        if event.link.is_sender:
            self._opened += 1
            if self._opened == len(self.urls):
                self.attached.set()

    def on_sendable(self, event: Event) -> None:
        name = event.link.name
        if name not in self.credited:
            self.credited[name] = time.monotonic()
            if len(self.credited) == len(self.urls):
                self.done.set()
                for conn in self._conns:
                    conn.close()


def edges_scale(flavour: Flavour = HOP) -> Callable[[dict[str, Path], Any], Record]:
    """Memory per edge at the interior, and reachability of a new edge's address."""
    def run(bins: dict[str, Path], scale: Any) -> Record:
        count = scale.edges
        with RouterProcess(interior_conf(flavour), name="interior", flavour=flavour) as top:
            time.sleep(0.5)
            rss0 = top.rss()
            edges: list[RouterProcess] = []
            try:
                started = time.monotonic()
                for i in range(count):
                    edge = RouterProcess(edge_conf(f"Edge{i}", top.ports[1], flavour),
                                         name=f"edge{i}", flavour=flavour,
                                         timeout=scale.start_timeout)
                    edges.append(edge)
                for edge in edges:
                    _wait_uplink(edge, scale.start_timeout)
                all_up_s = time.monotonic() - started
                time.sleep(2.0)
                rss1 = top.rss()
                producers = _Producers([f"amqp://{e.url}" for e in edges], "reach")
                container = Container(producers)
                thread = threading.Thread(target=container.run, daemon=True)
                thread.start()
                if not producers.attached.wait(scale.timeout):
                    raise RuntimeError("the producers did not attach")
                time.sleep(1.0)
                if producers.credited:
                    raise RuntimeError("producers got credit with no consumer anywhere")
                new_started = time.monotonic()
                new = RouterProcess(edge_conf("EdgeNew", top.ports[1], flavour),
                                    name="edgenew", flavour=flavour)
                edges.append(new)
                _wait_uplink(new, scale.timeout)
                new_up_s = time.monotonic() - new_started
                recv = start([str(bins["hop-recv"]), new.url, "reach", "--count", "1"])
                attached = time.monotonic()
                if not producers.done.wait(scale.timeout):
                    raise RuntimeError(f"only {len(producers.credited)} of {count} edges "
                                       "reached the new edge's address")
                reachable_s = max(producers.credited.values()) - attached
                first_s = min(producers.credited.values()) - attached
                container.stop()
                thread.join(10)
                recv.kill()
                recv.wait()
            finally:
                for edge in edges:
                    edge.stop()
        return {"edges": count, "interior_rss_mb_before": rss0 / 2**20,
                "interior_kb_per_edge": (rss1 - rss0) / count / 1024,
                "all_edges_up_s": all_up_s, "new_edge_up_s": new_up_s,
                "first_edge_reached_s": first_s, "every_edge_reached_s": reachable_s}
    return run


__all__ = ["edge_line", "edges_scale"]
