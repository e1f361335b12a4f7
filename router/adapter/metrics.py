"""Prometheus metrics: what ``/metrics`` on an HTTP listener says.

Owns the exposition of the router's counters (written by
prometheus_client) from a read-only view of the router
(``router.adapter.ports.RouterView``).  Counters are read when
a scrape asks for them, from where the per-message path already keeps
them; nothing here runs per message.  The metric names of qdrouterd's
``/metrics`` are kept (``qdr_*``), so dashboards built for it work; Hop adds
per-address and per-link-kind series under ``hop_*`` and the process's
memory and CPU (``process_*``).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from router.adapter.ports import RouterView
from router.core import InLink, OutLink, Role
from router.management.sources import IN_PROCESS_CONNECTION, link_row

__all__ = ["CONTENT_TYPE", "Exposition", "RouterCollector"]

#: The content type of what ``Exposition`` returns.
CONTENT_TYPE = CONTENT_TYPE_LATEST

#: qdrouterd's router-wide series: name, kind, ``router`` entity attribute.
_ROUTER_SERIES = (
    ("qdr_connections_total", "gauge", "connectionCount"),
    ("qdr_links_total", "gauge", "linkCount"),
    ("qdr_addresses_total", "gauge", "addrCount"),
    ("qdr_routers_total", "gauge", "nodeCount"),
    ("qdr_link_routes_total", "gauge", "linkRouteCount"),
    ("qdr_auto_links_total", "gauge", "autoLinkCount"),
    ("qdr_presettled_deliveries_total", "counter", "presettledDeliveries"),
    ("qdr_dropped_presettled_deliveries_total", "counter", "droppedPresettledDeliveries"),
    ("qdr_accepted_deliveries_total", "counter", "acceptedDeliveries"),
    ("qdr_released_deliveries_total", "counter", "releasedDeliveries"),
    ("qdr_rejected_deliveries_total", "counter", "rejectedDeliveries"),
    ("qdr_modified_deliveries_total", "counter", "modifiedDeliveries"),
    ("qdr_deliveries_ingress_total", "counter", "deliveriesIngress"),
    ("qdr_deliveries_egress_total", "counter", "deliveriesEgress"),
    ("qdr_deliveries_transit_total", "counter", "deliveriesTransit"),
    ("qdr_deliveries_ingress_route_container_total", "counter",
     "deliveriesIngressRouteContainer"),
    ("qdr_deliveries_egress_route_container_total", "counter",
     "deliveriesEgressRouteContainer"),
    ("qdr_deliveries_delayed_1sec_total", "counter", "deliveriesDelayed1Sec"),
    ("qdr_deliveries_delayed_10sec_total", "counter", "deliveriesDelayed10Sec"),
    ("qdr_deliveries_stuck_total", "gauge", "deliveriesStuck"),
    ("qdr_links_blocked_total", "gauge", "linksBlocked"),
    ("qdr_deliveries_redirected_to_fallback_total", "counter",
     "deliveriesRedirectedToFallback"),
    ("hop_deliveries_streamed_total", "counter", "deliveriesStreamed"),
    ("hop_deliveries_streamed_aborted_total", "counter", "deliveriesStreamedAborted"),
    ("hop_streaming_pauses_total", "counter", "streamingPauses"),
)

_LINK_COUNTERS = (
    ("deliveries", "deliveryCount"),
    ("accepted", "acceptedCount"),
    ("rejected", "rejectedCount"),
    ("released", "releasedCount"),
    ("modified", "modifiedCount"),
    ("presettled", "presettledCount"),
)


class RouterCollector(Collector):
    """The router's counters as Prometheus metric families, read at scrape."""

    def __init__(self, view: RouterView) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        row = self._view.router_row()
        for name, kind, attribute in _ROUTER_SERIES:
            value = row.get(attribute)
            number = float(value) if isinstance(value, int | float) else 0.0
            if kind == "counter":
                yield CounterMetricFamily(name, f"router {attribute}", value=number)
            else:
                yield GaugeMetricFamily(name, f"router {attribute}", value=number)
        yield from self._connections()
        yield from self._links()
        yield from self._addresses()

    def _connections(self) -> Iterator[Metric]:
        by_role: dict[str, int] = {role.value: 0 for role in Role}
        for conn in self._view.connections():
            by_role[conn.role.value] += 1
        family = GaugeMetricFamily("hop_connections", "open connections by role",
                                   labels=["role"])
        for role, count in by_role.items():
            family.add_metric([role], count)
        yield family

    def _links(self) -> Iterator[Metric]:
        totals: dict[tuple[str, str], list[int]] = {}
        unsettled: dict[tuple[str, str], int] = {}
        open_links: dict[tuple[str, str], int] = {}
        for core in self._view.connections():
            links: list[InLink | OutLink] = [*core.in_links.values(),
                                             *core.out_links.values()]
            for link in links:
                r = link_row(link)
                key = (str(r["linkType"]), str(r["linkDir"]))
                sums = totals.setdefault(key, [0] * len(_LINK_COUNTERS))
                for i, (_, attribute) in enumerate(_LINK_COUNTERS):
                    value = r[attribute]
                    sums[i] += value if isinstance(value, int) else 0
                unsettled[key] = unsettled.get(key, 0) + len(link.unsettled)
                open_links[key] = open_links.get(key, 0) + 1
        for i, (what, _) in enumerate(_LINK_COUNTERS):
            family = CounterMetricFamily(
                f"hop_link_{what}", f"{what} on the open links, by link type and direction",
                labels=["type", "dir"])
            for (link_type, direction), sums in sorted(totals.items()):
                family.add_metric([link_type, direction], sums[i])
            yield family
        gauge = GaugeMetricFamily("hop_links", "open links by type and direction",
                                  labels=["type", "dir"])
        pending = GaugeMetricFamily("hop_link_unsettled", "unsettled deliveries on open links",
                                    labels=["type", "dir"])
        for key in sorted(open_links):
            gauge.add_metric(list(key), open_links[key])
            pending.add_metric(list(key), unsettled.get(key, 0))
        yield gauge
        yield pending

    def _addresses(self) -> Iterator[Metric]:
        ingress = CounterMetricFamily("hop_address_deliveries_ingress",
                                      "deliveries that entered the network here",
                                      labels=["address"])
        egress = CounterMetricFamily("hop_address_deliveries_egress",
                                     "deliveries sent to local consumers", labels=["address"])
        transit = CounterMetricFamily("hop_address_deliveries_transit",
                                      "deliveries sent on to other routers", labels=["address"])
        consumers = GaugeMetricFamily("hop_address_consumers", "local consumers",
                                      labels=["address"])
        for key, record in self._view.records().items():
            local = [link for link in record.consumers
                     if link.conn.conn_id != IN_PROCESS_CONNECTION]
            if not local and not record.senders and not record.transit \
                    and not record.retired_in and not record.retired_out:
                continue
            ingress.add_metric([key], sum(link.delivered for link in record.senders)
                               + record.retired_in)
            egress.add_metric([key], sum(link.delivered for link in record.consumers)
                              + record.retired_out)
            transit.add_metric([key], record.transit)
            consumers.add_metric([key], len(local))
        yield from (ingress, egress, transit, consumers)


class Exposition:
    """The text ``/metrics`` answers with: the router's series and the
    process's (``process_*``)."""

    def __init__(self, view: RouterView) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(RouterCollector(view))
        ProcessCollector(registry=self._registry)

    def __call__(self) -> bytes:
        return bytes(generate_latest(self._registry))
