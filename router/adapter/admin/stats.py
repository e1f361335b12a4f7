"""Router-wide statistics, read from the parts that keep them.

Owns the ``router`` entity's row (its conf settings, identity, uptime,
memory, and the counts summed over the open links, the links gone, the
address records and the per-message parts' own counters), and the
read-only view of the router ``/metrics`` and management are given
(``router.adapter.admin.ports.RouterView``).  It reads when asked; nothing here
runs per message.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable

import conf
import router
from router.adapter.connections.ports import ConnectionControl
from router.adapter.endpoints.links import Links, sample_credit
from router.adapter.loop.trim import c_heap
from router.adapter.pending import Counters
from router.core import AddressRecord, Role, Router, tally
from router.core.tcp import TcpServices
from router.management.sources import (
    IN_PROCESS_CONNECTION,
    address_statistics,
    bridge_statistics,
    link_statistics,
    network_nodes,
)
from router.management.statistics import (
    AddressStatistics,
    LinkStatistics,
    RouterStatistics,
    as_row,
)


def _active(record: AddressRecord) -> bool:
    """Whether an address has producers or consumers here, or has seen traffic
    (the management agent's own addresses have none of these)."""
    local = any(link.conn.conn_id != IN_PROCESS_CONNECTION for link in record.consumers)
    return bool(local or record.senders or record.transit or record.retired_in
                or record.retired_out)


def _memory_bytes() -> tuple[int | None, int | None]:
    """The process's virtual and resident sizes, in bytes (None: unknown)."""
    try:
        with open(f"/proc/{os.getpid()}/statm") as statm:
            size, resident = statm.read().split()[:2]
        page = os.sysconf("SC_PAGE_SIZE")
        return int(size) * page, int(resident) * page
    except (OSError, ValueError):
        return None, None


class RouterStats:
    """The router's state as the ``router`` entity and ``/metrics`` read it.

    Args:
        core: the routing core.
        router_id: this router's id.
        section: the router's conf section.
        connections: the open connections.
        links: the link table (with the counts of the links gone).
        counters: the per-message parts' router-wide counts.
        clock: monotonic clock (seconds), for links' time without credit.
        workers: how many workers the router runs on (docs/scaling.md#workers).
        siblings: the other workers' node ids.
    """

    def __init__(self, *, core: Router, router_id: str, section: conf.RouterSection,
                 connections: ConnectionControl, links: Links, counters: Counters,
                 clock: Callable[[], float], workers: int = 1,
                 siblings: frozenset[str] = frozenset(),
                 tcp: TcpServices | None = None) -> None:
        self._workers = workers
        self._tcp = tcp
        self.siblings = siblings
        self._core = core
        self._router_id = router_id
        self._section = section
        self._connections = connections
        self._links = links
        self._counters = counters
        self._clock = clock
        self._started = time.monotonic()

    def connection_roles(self) -> Iterable[Role]:
        return [conn.core.role for conn in self._connections.listed()]

    def links(self) -> Iterable[LinkStatistics]:
        now = self._clock()
        found: list[LinkStatistics] = []
        for conn in self._connections.listed():
            found.extend(link_statistics(il, now) for il in conn.core.in_links.values())
            found.extend(link_statistics(ol, now) for ol in conn.core.out_links.values())
        return found

    def addresses(self) -> Iterable[AddressStatistics]:
        known = network_nodes(self._core) if self.siblings else frozenset()
        return [address_statistics(record, self.siblings, known)
                for record in self._core.records.values()
                if _active(record)]

    def tcp_bridges(self) -> Iterable[dict[str, object]]:
        if self._tcp is None:
            return []
        rows: list[dict[str, object]] = []
        for bridge in self._tcp.bridges():
            row: dict[str, object] = {"kind": bridge.kind.value, "name": bridge.name,
                                      "address": bridge.address}
            row.update(as_row(bridge_statistics(bridge)))
            rows.append(row)
        return rows

    def router_row(self) -> dict[str, object]:
        """The ``router`` entity's attributes."""
        row: dict[str, object] = conf.section_attributes(self._section)
        row.update(identity=f"router/{self._router_id}", name=f"router/{self._router_id}",
                   id=self._router_id)
        row.update(as_row(self.statistics()))
        return row

    def statistics(self) -> RouterStatistics:
        """The router-wide counts: the endpoint links now open (producers'
        outcomes on incoming links) plus those gone, the address records'
        and the per-message parts' own."""
        core = self._core
        conns = sample_credit(conn.core for conn in self._connections.listed())
        totals = dict(self._links.retired)
        for conn in conns:
            for end in conn.routed.values():
                tally(totals, end)
            for il in conn.in_links.values():
                tally(totals, il)
            for ol in conn.out_links.values():
                tally(totals, ol)
        c = self._counters
        # Blocked until credit comes, not until the next sweep notices it.
        blocked = sum(1 for conn in conns
                      for links in (conn.in_links, conn.out_links) for link in links.values()
                      if link.starved and link.credit <= 0)
        uplink = core.uplink
        virtual, resident = _memory_bytes()
        heap = c_heap()
        return RouterStatistics(
            version=router.__version__,
            hostName=socket.gethostname(),
            addrCount=len(core.records),
            linkCount=sum(len(conn.in_links) + len(conn.out_links) + len(conn.routed)
                          for conn in conns),
            nodeCount=0 if core.network is None
            else len(core.network.protocol.node_table()) - 1,
            linkRouteCount=len(core.link_routing.table),
            autoLinkCount=len(core.auto_links),
            connectionCount=len(conns),
            blockedLinkCount=blocked,
            linksBlocked=blocked,
            presettledDeliveries=totals["presettled"],
            droppedPresettledDeliveries=c.dropped_presettled,
            acceptedDeliveries=totals["accepted"],
            rejectedDeliveries=totals["rejected"],
            releasedDeliveries=totals["released"],
            modifiedDeliveries=totals["modified"],
            deliveriesDelayed1Sec=totals["delayed1"],
            deliveriesDelayed10Sec=totals["delayed10"],
            deliveriesStuck=sum(link.stuck_now for conn in conns
                                for links in (conn.in_links, conn.out_links)
                                for link in links.values()),
            deliveriesIngress=totals["ingress"],
            deliveriesEgress=totals["egress"],
            deliveriesTransit=sum(r.transit for r in core.records.values()) + totals["transit"],
            deliveriesIngressRouteContainer=totals["ingress_rc"],
            deliveriesEgressRouteContainer=totals["egress_rc"],
            deliveriesRedirectedToFallback=c.redirected,
            deliveriesRedelivered=c.redelivered,
            deliveriesStreamed=c.streamed,
            deliveriesStreamedAborted=c.streams_aborted,
            streamingPauses=c.stream_pauses,
            edgeCount=0 if core.edges is None else len(core.edges.peers),
            uplinkActive=int(uplink is not None and uplink.active is not None),
            uplinkActivations=0 if uplink is None else uplink.activations,
            edgeAddressUpdates=0 if uplink is None else uplink.tracking_updates,
            edgeLookups=(uplink.lookups_sent if uplink is not None
                         else core.edges.lookups if core.edges is not None else 0),
            uptimeSeconds=int(time.monotonic() - self._started),
            memoryUsage=virtual,
            residentMemory=resident,
            heapInUse=None if heap is None else heap[0],
            heapFree=None if heap is None else heap[1],
            workerThreads=self._workers,
        )


__all__ = ["RouterStats"]
