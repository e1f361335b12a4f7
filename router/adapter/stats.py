"""Router-wide statistics, read from the parts that keep them.

Owns the ``router`` entity's row (its conf settings, identity, uptime,
memory, and the counts summed over the open links, the links gone, the
address records and the per-message parts' own counters), and the
read-only view of the router ``/metrics`` and management are given
(``router.adapter.ports.RouterView``).  It reads when asked; nothing here
runs per message.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Mapping

import conf
import router
from router.adapter.links import Links
from router.adapter.pending import Counters
from router.adapter.ports import ConnectionControl
from router.core import AddressRecord, Connection, Role, Router, tally


def _memory_bytes() -> int | None:
    try:
        with open(f"/proc/{os.getpid()}/statm") as statm:
            return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


class RouterStats:
    """The router's state as the ``router`` entity and ``/metrics`` read it.

    Args:
        core: the routing core.
        router_id: this router's id.
        section: the router's conf section.
        connections: the open connections.
        links: the link table (with the counts of the links gone).
        counters: the per-message parts' router-wide counts.
    """

    def __init__(self, *, core: Router, router_id: str, section: conf.RouterSection,
                 connections: ConnectionControl, links: Links, counters: Counters) -> None:
        self._core = core
        self._router_id = router_id
        self._section = section
        self._connections = connections
        self._links = links
        self._counters = counters
        self._started = time.monotonic()

    def connections(self) -> Iterable[Connection]:
        return [conn.core for conn in self._connections.conns.values()]

    def records(self) -> Mapping[str, AddressRecord]:
        return self._core.records

    def router_row(self) -> dict[str, object]:
        """The ``router`` entity's attributes."""
        core = self._core
        conns = [conn.core for conn in self._connections.conns.values()]
        row: dict[str, object] = conf.section_attributes(self._section)
        row.update(
            identity=f"router/{self._router_id}",
            name=f"router/{self._router_id}",
            id=self._router_id,
            version=router.__version__,
            hostName=socket.gethostname(),
            uptimeSeconds=int(time.monotonic() - self._started),
            memoryUsage=_memory_bytes(),
            workerThreads=1,
        )
        row.update(self.counts())
        row["linkRouteCount"] = len(core.link_routing.table)
        row["autoLinkCount"] = len(core.auto_links)
        row["addrCount"] = len(core.records)
        row["connectionCount"] = len(conns)
        row["linkCount"] = sum(len(c.in_links) + len(c.out_links) + len(c.routed) for c in conns)
        row["nodeCount"] = 0 if core.network is None \
            else len(core.network.protocol.node_table()) - 1
        row["linksBlocked"] = row["blockedLinkCount"] = sum(
            1 for c in conns for out in c.out_links.values() if out.starved)
        return row

    def counts(self) -> dict[str, int]:
        """Router-wide delivery counters: the endpoint links now open (producers'
        outcomes on incoming links) plus those gone, and the forwarder's own."""
        totals = dict(self._links.retired)
        for conn in self._connections.conns.values():
            core = conn.core
            if core.role is Role.INTER_ROUTER:
                continue
            for il in core.in_links.values():
                tally(totals, il)
            for ol in core.out_links.values():
                tally(totals, ol)
        c = self._counters
        return {
            "acceptedDeliveries": totals["accepted"],
            "rejectedDeliveries": totals["rejected"],
            "releasedDeliveries": totals["released"],
            "modifiedDeliveries": totals["modified"],
            "presettledDeliveries": totals["presettled"],
            "droppedPresettledDeliveries": c.dropped_presettled,
            "deliveriesIngress": totals["ingress"],
            "deliveriesEgress": totals["egress"],
            "deliveriesTransit": sum(r.transit for r in self._core.records.values()),
            "deliveriesIngressRouteContainer": totals["ingress_rc"],
            "deliveriesEgressRouteContainer": totals["egress_rc"],
            "deliveriesRedirectedToFallback": c.redirected,
            "deliveriesDelayed1Sec": totals["delayed1"],
            "deliveriesDelayed10Sec": totals["delayed10"],
            "deliveriesStuck": totals["stuck"],
            "deliveriesStreamed": c.streamed,
            "deliveriesStreamedAborted": c.streams_aborted,
            "streamingPauses": c.stream_pauses,
        }


__all__ = ["RouterStats"]
