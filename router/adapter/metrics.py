"""HTTP listeners (``http: yes``): Prometheus metrics at ``/metrics`` and a
health check at ``/healthz``, served from the router's own event loop.

Owns the HTTP connections (parsed by h11) and the exposition of the
router's counters (written by prometheus_client).  Counters are read when
a scrape asks for them, from where the per-message path already keeps
them; nothing here runs per message.  The metric names of qdrouterd's
``/metrics`` are kept (``qdr_*``), so dashboards built for it work; Hop adds
per-address and per-link-kind series under ``hop_*`` and the process's
memory and CPU (``process_*``).
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import h11
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from router.adapter.connections import Listener
from router.core import InLink, OutLink, Role
from router.management.sources import IN_PROCESS_CONNECTION, link_row

if TYPE_CHECKING:
    from router.adapter.engine import Engine

__all__ = ["HttpServer", "RouterCollector"]

log = logging.getLogger("router.adapter.http")

_READ = select.EPOLLIN | select.EPOLLRDHUP
_WRITE = select.EPOLLOUT
_IDLE_S = 60.0
_MAX_REQUEST = 16384

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

    def __init__(self, engine: Engine, router_row: Callable[[], dict[str, object]]) -> None:
        self._engine = engine
        self._router_row = router_row

    def collect(self) -> Iterator[Metric]:
        row = self._router_row()
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
        for conn in self._engine.conns.values():
            by_role[conn.core.role.value] += 1
        family = GaugeMetricFamily("hop_connections", "open connections by role",
                                   labels=["role"])
        for role, count in by_role.items():
            family.add_metric([role], count)
        yield family

    def _links(self) -> Iterator[Metric]:
        totals: dict[tuple[str, str], list[int]] = {}
        unsettled: dict[tuple[str, str], int] = {}
        open_links: dict[tuple[str, str], int] = {}
        for conn in self._engine.conns.values():
            core = conn.core
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
        for key, record in self._engine.router.records.items():
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


class _HttpConn:
    __slots__ = ("closing", "h11", "last", "out", "request", "sock", "want_write")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_REQUEST)
        self.out = bytearray()
        self.want_write = False
        self.closing = False
        self.last = now
        self.request: h11.Request | None = None


class HttpServer:
    """The HTTP side of the event loop: accepted sockets, requests, responses.

    Args:
        epoll: the engine's epoll object.
        registry: what ``/metrics`` exposes.
        healthy: whether ``/healthz`` answers 200 (else 503).
        clock: monotonic clock, for closing idle connections.
    """

    def __init__(self, epoll: select.epoll, registry: CollectorRegistry,
                 healthy: Callable[[], bool], clock: Callable[[], float]) -> None:
        self._epoll = epoll
        self._registry = registry
        self._healthy = healthy
        self._clock = clock
        self.conns: dict[int, tuple[_HttpConn, Listener]] = {}
        self.served = 0

    @classmethod
    def for_engine(cls, engine: Engine, router_row: Callable[[], dict[str, object]]
                   ) -> HttpServer:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(RouterCollector(engine, router_row))
        ProcessCollector(registry=registry)
        return cls(engine.epoll, registry, lambda: not engine.stopping, engine.clock)

    # -- sockets ----------------------------------------------------------------

    def accept(self, listener: Listener) -> None:
        while True:
            try:
                sock, _ = listener.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            # Other failures (out of descriptors) raise: the engine pauses the listener.
            listener.backoff.succeeded(self._clock())
            sock.setblocking(False)
            self.conns[sock.fileno()] = (_HttpConn(sock, self._clock()), listener)
            self._epoll.register(sock.fileno(), _READ)

    def ready(self, fd: int, mask: int) -> None:
        """I/O on one of the HTTP connections."""
        entry = self.conns.get(fd)
        if entry is None:
            return
        conn, listener = entry
        conn.last = self._clock()
        if mask & _WRITE:
            self._flush(fd, conn)
        if fd in self.conns and not conn.closing and \
                mask & (select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR):
            try:
                data = conn.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._close(fd)
                return
            self._handle(fd, conn, listener, data)

    def tick(self, now: float) -> None:
        """Close connections idle for a minute."""
        for fd, (conn, _) in list(self.conns.items()):
            if now - conn.last > _IDLE_S:
                self._close(fd)

    def close_all(self) -> None:
        for fd in list(self.conns):
            self._close(fd)

    def _close(self, fd: int) -> None:
        entry = self.conns.pop(fd, None)
        if entry is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self._epoll.unregister(fd)
        entry[0].sock.close()

    # -- HTTP ---------------------------------------------------------------------

    def _handle(self, fd: int, conn: _HttpConn, listener: Listener, data: bytes) -> None:
        parser = conn.h11
        try:
            parser.receive_data(data)
            while True:
                event = parser.next_event()
                if event is h11.NEED_DATA or event is h11.PAUSED:
                    break
                if isinstance(event, h11.ConnectionClosed):
                    self._close(fd)
                    return
                if isinstance(event, h11.Request):
                    conn.request = event
                elif isinstance(event, h11.EndOfMessage) and conn.request is not None:
                    self._respond(conn, listener, conn.request)
                    conn.request = None
                    if parser.our_state is h11.MUST_CLOSE:
                        break
                    parser.start_next_cycle()
        except h11.RemoteProtocolError as error:
            log.info("bad HTTP request on %s:%d: %s", listener.host, listener.port, error)
            if parser.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                self._send(conn, 400, b"bad request\n", "text/plain")
            conn.closing = True
            self._flush(fd, conn)
            return
        conn.closing = parser.our_state is h11.MUST_CLOSE
        self._flush(fd, conn)

    def _respond(self, conn: _HttpConn, listener: Listener, request: h11.Request) -> None:
        settings = listener.settings
        path = request.target.split(b"?", 1)[0]
        method = request.method
        if path == b"/metrics" and settings.metrics:
            if method not in (b"GET", b"HEAD"):
                self._send(conn, 405, b"method not allowed\n", "text/plain")
                return
            body = generate_latest(self._registry)
            self._send(conn, 200, body if method == b"GET" else b"", CONTENT_TYPE_LATEST,
                       length=len(body))
            self.served += 1
        elif path == b"/healthz" and settings.healthz:
            ok = self._healthy()
            body = b"OK\n" if ok else b"shutting down\n"
            self._send(conn, 200 if ok else 503, body if method != b"HEAD" else b"",
                       "text/plain", length=len(body))
        else:
            self._send(conn, 404, b"not found\n", "text/plain")

    @staticmethod
    def _send(conn: _HttpConn, status: int, body: bytes, content_type: str,
              length: int | None = None) -> None:
        headers = [("Content-Type", content_type),
                   ("Content-Length", str(len(body) if length is None else length))]
        parser = conn.h11
        conn.out += parser.send(h11.Response(status_code=status, headers=headers)) or b""
        if body:
            conn.out += parser.send(h11.Data(data=body)) or b""
        conn.out += parser.send(h11.EndOfMessage()) or b""

    def _flush(self, fd: int, conn: _HttpConn) -> None:
        while conn.out:
            try:
                sent = conn.sock.send(conn.out)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                self._close(fd)
                return
            del conn.out[:sent]
        if conn.out:
            if not conn.want_write:
                conn.want_write = True
                self._epoll.modify(fd, _READ | _WRITE)
            return
        if conn.want_write:
            conn.want_write = False
            self._epoll.modify(fd, _READ)
        if conn.closing:
            self._close(fd)
