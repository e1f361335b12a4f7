"""Prometheus metrics: what ``/metrics`` on an HTTP listener says.

Owns turning the router's statistics (a read-only view of the router,
``router.adapter.admin.ports.RouterView``) into Prometheus families, as
``router.management.statistics`` declares them: each attribute with a
series gives one family of that name and kind, a labelled one summed over
the rows that share its labels.  Counters are read when a scrape asks for
them, from where the per-message path already keeps them; nothing here
runs per message.  The metric names of qdrouterd's ``/metrics`` are kept
(``qdr_*``), so dashboards built for it work; Hop adds per-address and
per-link-kind series under ``hop_*`` and the process's memory and CPU
(``process_*``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from router.adapter.admin.ports import RouterView
from router.core import Role
from router.management.statistics import (
    AddressStatistics,
    LinkStatistics,
    RouterStatistics,
    TcpBridgeStatistics,
    as_row,
    declared,
)
from router.management.statistics import Metric as Series

__all__ = ["CONTENT_TYPE", "Exposition", "RouterCollector"]

#: The content type of what ``Exposition`` returns.
CONTENT_TYPE = CONTENT_TYPE_LATEST


def _family(series: Series, help_text: str, labels: list[str] | None = None,
            value: float | None = None) -> CounterMetricFamily | GaugeMetricFamily:
    if series.kind == "counter":
        return CounterMetricFamily(series.name, help_text, value=value, labels=labels)
    return GaugeMetricFamily(series.name, help_text, value=value, labels=labels)


def _labelled(record: type, rows: Iterable[dict[str, object]]) -> Iterator[Metric]:
    """The labelled series ``record`` declares, each summed over ``rows`` by
    the values of its labels."""
    rows = list(rows)
    for name, stat in declared(record):
        series = stat.metric
        if series is None or not series.labels:
            continue
        sums: dict[tuple[str, ...], int] = {}
        for row in rows:
            key = tuple(str(row[attribute]) for _, attribute in series.labels)
            value = row[name]
            sums[key] = sums.get(key, 0) + (value if isinstance(value, int) else 0)
        family = _family(series, series.help or stat.description,
                         labels=[label for label, _ in series.labels])
        for key in sorted(sums):
            family.add_metric(list(key), sums[key])
        yield family


class RouterCollector(Collector):
    """The router's counters as Prometheus metric families, read at scrape."""

    def __init__(self, view: RouterView) -> None:
        self._view = view

    def collect(self) -> Iterator[Metric]:
        row = as_row(self._view.statistics())
        for name, stat in declared(RouterStatistics):
            series = stat.metric
            if series is None or series.labels:
                continue
            value = row[name]
            number = float(value) if isinstance(value, int | float) else 0.0
            yield _family(series, series.help or stat.description, value=number)
        yield from self._connections()
        links = [as_row(link) for link in self._view.links()]
        yield from _labelled(LinkStatistics, links)
        yield self._open_links(links)
        yield from _labelled(AddressStatistics, (as_row(a) for a in self._view.addresses()))
        yield from _labelled(TcpBridgeStatistics, self._view.tcp_bridges())

    def _connections(self) -> Iterator[Metric]:
        by_role: dict[str, int] = {role.value: 0 for role in Role}
        for role in self._view.connection_roles():
            by_role[role.value] += 1
        family = GaugeMetricFamily("hop_connections", "open connections by role",
                                   labels=["role"])
        for name, count in by_role.items():
            family.add_metric([name], count)
        yield family

    @staticmethod
    def _open_links(links: list[dict[str, object]]) -> Metric:
        counts: dict[tuple[str, str], int] = {}
        for link in links:
            key = (str(link["linkType"]), str(link["linkDir"]))
            counts[key] = counts.get(key, 0) + 1
        family = GaugeMetricFamily("hop_links", "open links by type and direction",
                                   labels=["type", "dir"])
        for key in sorted(counts):
            family.add_metric(list(key), counts[key])
        return family


class Exposition:
    """The text ``/metrics`` answers with: the router's series and the
    process's (``process_*``)."""

    def __init__(self, view: RouterView) -> None:
        self._registry = CollectorRegistry(auto_describe=False)
        self._registry.register(RouterCollector(view))
        ProcessCollector(registry=self._registry)

    def __call__(self) -> bytes:
        return bytes(generate_latest(self._registry))

    def scrape(self, done: Callable[[bytes], None]) -> None:
        """Give ``done`` the text (as the HTTP server asks for it)."""
        done(self())
