"""Networks that mix real ``hopd`` routers with real qdrouterd 1.x routers.

Hop routers are started by ``tests.system.harness.start`` on the confs of
``tests.system.network.interior_conf`` (ephemeral ports, read back from the
log). qdrouterd does not report ``port: 0`` listeners reliably, so its ports
are picked here by binding to port 0 first; if another process takes one in
between, the router is started again on fresh ports.

Every router has a client listener (``ports[0]``), an inter-router listener
(``ports[1]``) and, when asked for, a client listener with
``stripAnnotations: no`` (``ports[2]``), so both kinds can stand in for each
other in a topology, and a ``role: edge`` listener (the last port). Edge
routers of either kind (docs/networks.md#edge-routers) hang off interiors of
either kind with ``add_edge``. Routes are read from Hop's ``routes:`` log
line and from qdrouterd's management agent
(``org.apache.qpid.dispatch.router.node``).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from proton import Message

from tests.system.clients import connect
from tests.system.harness import STARTUP_TIMEOUT_S, Hop, start
from tests.system.network import (
    LOG_INFO,
    UNSTRIPPED_LISTENER,
    UPLINK,
    edge_conf,
    expected_costs,
    interior_conf,
    latest_routes,
    link_key,
)
from tests.waiting import free_port, wait_for

CONVERGE_TIMEOUT_S = 40.0
LOG_TAIL_LINES = 120

LISTENER_FAILED = ("Address already in use", "Listener error", "Unable to listen")


def qdr_conf(router_id: str, ports: Sequence[int], connectors: Sequence[int],
             extra: str = "") -> str:
    """A qdrouterd interior conf: client listener on ``ports[0]``, inter-router
    listener on ``ports[1]``, an unstripped client listener on ``ports[2]`` if
    there are four ports, an edge listener on the last port, and an
    inter-router connector to each of ``connectors``."""
    parts = [
        f"router {{\n    mode: interior\n    id: {router_id}\n}}\n",
        f"listener {{\n    host: 127.0.0.1\n    port: {ports[0]}\n"
        "    saslMechanisms: ANONYMOUS\n    authenticatePeer: no\n}\n",
        f"listener {{\n    host: 127.0.0.1\n    port: {ports[1]}\n    role: inter-router\n"
        "    saslMechanisms: ANONYMOUS\n    authenticatePeer: no\n}\n",
    ]
    if len(ports) > 3:
        parts.append(UNSTRIPPED_LISTENER.replace("port: 0", f"port: {ports[2]}"))
    parts.append(f"listener {{\n    host: 127.0.0.1\n    port: {ports[-1]}\n    role: edge\n"
                 "    saslMechanisms: ANONYMOUS\n    authenticatePeer: no\n}\n")
    for port in connectors:
        parts.append(f"connector {{\n    host: 127.0.0.1\n    port: {port}\n"
                     "    role: inter-router\n}\n")
    parts.append(LOG_INFO)
    parts.append(extra)
    return "".join(parts)


def qdr_edge_conf(router_id: str, ports: Sequence[int], uplinks: Sequence[int],
                  extra: str = "") -> str:
    """A qdrouterd edge conf: a client listener on ``ports[0]`` and an edge
    connector to each of ``uplinks``."""
    parts = [
        f"router {{\n    mode: edge\n    id: {router_id}\n}}\n",
        f"listener {{\n    host: 127.0.0.1\n    port: {ports[0]}\n"
        "    saslMechanisms: ANONYMOUS\n    authenticatePeer: no\n}\n",
    ]
    for port in uplinks:
        parts.append(f"connector {{\n    host: 127.0.0.1\n    port: {port}\n    role: edge\n}}\n")
    parts.append(LOG_INFO)
    parts.append(extra)
    return "".join(parts)


class Qdr(Hop):
    """A running qdrouterd; the same interface as a running ``hopd``."""


def start_qdr(binary: str, directory: Path, router_id: str, connectors: Sequence[int],
              *, extra: str = "", unstripped: bool = False, attempts: int = 3,
              uplinks: Sequence[int] | None = None) -> Qdr:
    """Start qdrouterd on free ports; wait until it is operational and listens.
    With ``uplinks``, an edge router connecting to them, else an interior."""
    conf_path = directory / f"{router_id}.conf"
    log_path = directory / f"{router_id}.log"
    text = ""
    for _ in range(attempts):
        if uplinks is not None:
            ports = [free_port()]
            conf_path.write_text(qdr_edge_conf(router_id, ports, uplinks, extra))
        else:
            ports = [free_port() for _ in range(4 if unstripped else 3)]
            conf_path.write_text(qdr_conf(router_id, ports, connectors, extra))
        with log_path.open("wb") as log_file:
            proc = subprocess.Popen([binary, "-c", str(conf_path)], stdout=log_file,
                                    stderr=subprocess.STDOUT)
        qdr = Qdr(proc, conf_path, log_path, ports)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            text = qdr.log_text()
            if "Operational" in text and all(f"Listening on 127.0.0.1:{p}" in text
                                             for p in ports):
                return qdr
            if proc.poll() is not None or any(s in text for s in LISTENER_FAILED):
                break
            time.sleep(0.05)
        qdr.stop()
        if not any(s in text for s in LISTENER_FAILED):
            break  # not a port race: do not try again
    raise AssertionError(f"qdrouterd {router_id} did not start ({log_path}):\n{text}")


def management_query(url: str, entity_type: str) -> list[dict[str, Any]]:
    """Query a qdrouterd's management agent; one dict per entity."""
    conn = connect(url)
    try:
        replies = conn.create_receiver(None, dynamic=True, credit=1)
        sender = conn.create_sender("$management")
        sender.send(Message(
            reply_to=replies.link.remote_source.address,
            properties={"operation": "QUERY", "type": "org.amqp.management",
                        "entityType": entity_type, "name": "self"},
            body={"attributeNames": []}))
        reply = replies.receive(timeout=10)  # the agent's reply is pre-settled
    finally:
        conn.close()
    status = reply.properties.get("statusCode")
    assert status == 200, f"management query of {entity_type} failed: {reply.properties}"
    names = reply.body["attributeNames"]
    return [dict(zip(names, row, strict=True)) for row in reply.body["results"]]


def qdr_routes(qdr: Qdr) -> dict[str, tuple[str, int]]:
    """The routers a qdrouterd can reach as {router: (next hop, cost)}."""
    routes = {}
    for node in management_query(qdr.url, "org.apache.qpid.dispatch.router.node"):
        if node["nextHop"] == "(self)" or node["cost"] is None:
            continue
        routes[node["id"]] = (node["nextHop"] or node["id"], int(node["cost"]))
    return routes


def log_tail(router: Hop, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(router.log_text().splitlines()[-lines:])


class MixedNetwork:
    """Interior routers of both kinds, started one by one; each new router
    connects to ``peers`` that are already running."""

    def __init__(self, directory: Path, qdrouterd: str, *, extra: str = "") -> None:
        self.directory = directory
        self.qdrouterd = qdrouterd
        self.extra = extra
        self.routers: dict[str, Hop] = {}
        self.edges: set[str] = set()
        self.links: dict[frozenset[str], int] = {}

    def __getitem__(self, router_id: str) -> Hop:
        return self.routers[router_id]

    def kind(self, router_id: str) -> str:
        return "qdrouterd" if isinstance(self.routers[router_id], Qdr) else "hopd"

    def url(self, router_id: str) -> str:
        return self.routers[router_id].url

    def unstripped_url(self, router_id: str) -> str:
        ports = self.routers[router_id].ports
        assert len(ports) > 3, f"{router_id} has no stripAnnotations: no listener"
        return f"amqp://127.0.0.1:{ports[2]}"

    def _connect(self, router_id: str, peers: Sequence[str]) -> list[int]:
        for peer in peers:
            self.links[link_key(router_id, peer)] = 1
        return [self.routers[p].ports[1] for p in peers]

    def add_hop(self, router_id: str, peers: Sequence[str] = (), *,
                unstripped: bool = False, extra: str = "") -> Hop:
        """Start a hopd; ``extra`` is added to this router's conf only."""
        ports = self._connect(router_id, peers)
        conf = interior_conf(router_id, dict.fromkeys(ports, 1), unstripped=unstripped,
                             extra=self.extra + extra)
        hop = start(self.directory, conf, router_id, 4 if unstripped else 3)
        self.routers[router_id] = hop
        return hop

    def add_qdr(self, router_id: str, peers: Sequence[str] = (), *,
                unstripped: bool = False, extra: str = "") -> Qdr:
        """Start a qdrouterd; ``extra`` is added to this router's conf only."""
        ports = self._connect(router_id, peers)
        qdr = start_qdr(self.qdrouterd, self.directory, router_id, ports,
                        extra=self.extra + extra, unstripped=unstripped)
        self.routers[router_id] = qdr
        return qdr

    def add_edge(self, edge_id: str, interiors: Sequence[str], *, kind: str = "hopd",
                 extra: str = "") -> Hop:
        """Start an edge router of ``kind`` with an uplink to each of
        ``interiors``; wait until its uplink is active."""
        uplinks = [self.routers[i].ports[-1] for i in interiors]
        router: Hop
        if kind == "qdrouterd":
            router = start_qdr(self.qdrouterd, self.directory, edge_id, (), uplinks=uplinks,
                               extra=self.extra + extra)
        else:
            router = start(self.directory, edge_conf(edge_id, uplinks, extra=self.extra + extra),
                           edge_id, 1)
        self.routers[edge_id] = router
        self.edges.add(edge_id)
        wait_for(lambda: UPLINK.search(router.log_text()), STARTUP_TIMEOUT_S,
                 f"{edge_id}'s uplink:\n{log_tail(router)}", interval=0.05)
        return router

    def routes(self, router_id: str) -> dict[str, tuple[str, int]] | None:
        router = self.routers[router_id]
        if isinstance(router, Qdr):
            return qdr_routes(router)
        return latest_routes(router)

    def expected_costs(self, router_id: str) -> dict[str, int]:
        return expected_costs(self.links, router_id)

    def wait_converged(self, timeout: float = CONVERGE_TIMEOUT_S) -> None:
        """Wait until every router reaches every other at the shortest-path cost."""
        deadline = time.monotonic() + timeout
        while True:
            pending = []
            for router_id in self.routers:
                if router_id in self.edges:
                    continue
                routes = self.routes(router_id) or {}
                costs = {d: c for d, (_, c) in routes.items()}
                if costs != self.expected_costs(router_id):
                    pending.append(router_id)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"routes did not converge at {pending}:\n{self.describe()}")
            time.sleep(0.25)

    def describe(self) -> str:
        """Each router's expected and current routes, for failure messages."""
        lines = []
        for router_id, router in self.routers.items():
            try:
                routes: object = self.routes(router_id)
            except Exception as exc:  # a dead router must not hide the others
                routes = f"unavailable ({exc!r})"
            lines.append(f"{router_id} ({self.kind(router_id)}): expected "
                         f"{self.expected_costs(router_id)}, current {routes} "
                         f"(log {router.log_path})")
        return "\n".join(lines)

    def stop(self) -> list[str]:
        """SIGTERM every router; a failure line for each that did not exit 0."""
        failures = []
        for router_id, router in self.routers.items():
            status = router.stop()
            if status != 0:
                failures.append(f"{router_id} ({self.kind(router_id)}) exit status {status}, "
                                f"log {router.log_path}:\n{log_tail(router)}")
        return failures


MakeNetwork = Callable[..., MixedNetwork]
