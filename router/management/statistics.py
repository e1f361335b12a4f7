"""The operational attributes of the management entities, each declared once.

Owns, for every entity type, the attributes the router reports rather than
takes from its configuration: one frozen record class per entity (its
fields named exactly as qdrouterd's schema names the attributes), each
field carrying what GET-SCHEMA says of it (type, description, default,
whether UPDATE may change it, whether consoles chart it) and, where the
attribute is also a Prometheus series, that series' name and kind.  The
schema (``router.management.schema``), the rows the entity sources build
(``as_row``: a misspelled or forgotten attribute fails the type check) and
``/metrics`` (``router.adapter.http.metrics``) all read these declarations.
It holds no state and reads no router state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, Literal

import attrs

__all__ = [
    "AddressStatistics",
    "AllocatorStatistics",
    "AutoLinkStatus",
    "BindingStatistics",
    "ConnectionStatistics",
    "ConnectorStatus",
    "DiscoveryStatus",
    "ExchangeStatistics",
    "LinkRouteStatus",
    "LinkStatistics",
    "LogStatistics",
    "Metric",
    "NodeStatistics",
    "PolicyStatistics",
    "RouterStatistics",
    "Stat",
    "TcpBridgeStatistics",
    "TcpConnectionStatistics",
    "VhostStatistics",
    "as_row",
    "declared",
]

_KEY: Final = "hop.stat"

#: A GET-SCHEMA attribute type: a name, or the values of an enumeration.
SchemaType = str | tuple[str, ...]


@attrs.frozen(kw_only=True)
class Metric:
    """A Prometheus series an attribute is exposed as.

    ``labels`` pairs each label with the attribute of the same row that
    gives its value; a labelled series sums the attribute over the rows
    that share the labels' values.  ``help`` is the series' help text
    (default: the attribute's description).
    """

    name: str
    kind: Literal["counter", "gauge"]
    labels: tuple[tuple[str, str], ...] = ()
    help: str | None = None


@attrs.frozen(kw_only=True)
class Stat:
    """What is declared of one attribute."""

    type: SchemaType
    description: str
    default: object = None
    update: bool = False
    graph: bool = False
    metric: Metric | None = None


def _field(stat: Stat) -> Any:
    return attrs.field(metadata={_KEY: stat})


def counter(description: str, *, metric: str | None = None,
            labels: tuple[tuple[str, str], ...] = (), help: str | None = None) -> Any:
    """A count that only grows (consoles chart it)."""
    series = None if metric is None else Metric(name=metric, kind="counter", labels=labels,
                                                help=help)
    return _field(Stat(type="integer", description=description, graph=True, metric=series))


def gauge(description: str, *, metric: str | None = None, graph: bool = True,
          labels: tuple[tuple[str, str], ...] = (), help: str | None = None) -> Any:
    """A number of things now."""
    series = None if metric is None else Metric(name=metric, kind="gauge", labels=labels,
                                                help=help)
    return _field(Stat(type="integer", description=description, graph=graph, metric=series))


def integer(description: str, *, graph: bool = False) -> Any:
    """A number that is not a count: a setting, an index, a time, a size."""
    return _field(Stat(type="integer", description=description, graph=graph))


def text(description: str) -> Any:
    return _field(Stat(type="string", description=description))


def flag(description: str, *, default: bool | None = None, update: bool = False) -> Any:
    return _field(Stat(type="boolean", description=description, default=default,
                       update=update))


def items(description: str) -> Any:
    return _field(Stat(type="list", description=description))


def mapping(description: str) -> Any:
    return _field(Stat(type="map", description=description))


def choice(values: tuple[str, ...], description: str, *, default: str | None = None,
           update: bool = False) -> Any:
    return _field(Stat(type=values, description=description, default=default, update=update))


def declared(record: type) -> Iterator[tuple[str, Stat]]:
    """Every attribute ``record`` declares, in order, with its declaration."""
    for field in attrs.fields(record):
        yield field.name, field.metadata[_KEY]


def as_row(record: attrs.AttrsInstance) -> dict[str, object]:
    """A record's attributes as a management row (names as declared)."""
    return {field.name: getattr(record, field.name) for field in attrs.fields(type(record))}


_ROUTER_HELP = "router {}"

_OUTCOMES = ("accepted", "rejected", "released", "modified")


@attrs.frozen(kw_only=True)
class RouterStatistics:
    """``router``: the router-wide counts (besides its conf attributes)."""

    version: str = text("software version")
    hostName: str = text("host name of the machine")
    addrCount: int = gauge("router.address entities", graph=False,
                           metric="qdr_addresses_total", help="router addrCount")
    linkCount: int = gauge("router.link entities", graph=False, metric="qdr_links_total",
                           help="router linkCount")
    nodeCount: int = gauge("other routers known", graph=False, metric="qdr_routers_total",
                           help="router nodeCount")
    linkRouteCount: int = gauge("linkRoute entities", graph=False,
                                metric="qdr_link_routes_total", help="router linkRouteCount")
    autoLinkCount: int = gauge("autoLink entities", graph=False,
                               metric="qdr_auto_links_total", help="router autoLinkCount")
    connectionCount: int = gauge("open connections", graph=False,
                                 metric="qdr_connections_total", help="router connectionCount")
    blockedLinkCount: int = gauge("links whose credit has been zero for more than 10 s")
    linksBlocked: int = gauge("the same as blockedLinkCount (the name qdstat reads)",
                              metric="qdr_links_blocked_total", help="router linksBlocked")
    presettledDeliveries: int = counter(
        "pre-settled deliveries received from producers",
        metric="qdr_presettled_deliveries_total", help="router presettledDeliveries")
    droppedPresettledDeliveries: int = counter(
        "pre-settled deliveries dropped for want of credit",
        metric="qdr_dropped_presettled_deliveries_total",
        help="router droppedPresettledDeliveries")
    acceptedDeliveries: int = counter("deliveries accepted",
                                      metric="qdr_accepted_deliveries_total",
                                      help="router acceptedDeliveries")
    rejectedDeliveries: int = counter("deliveries rejected",
                                      metric="qdr_rejected_deliveries_total",
                                      help="router rejectedDeliveries")
    releasedDeliveries: int = counter("deliveries released",
                                      metric="qdr_released_deliveries_total",
                                      help="router releasedDeliveries")
    modifiedDeliveries: int = counter("deliveries modified",
                                      metric="qdr_modified_deliveries_total",
                                      help="router modifiedDeliveries")
    deliveriesDelayed1Sec: int = counter(
        "deliveries settled after more than 1 s in the router",
        metric="qdr_deliveries_delayed_1sec_total", help="router deliveriesDelayed1Sec")
    deliveriesDelayed10Sec: int = counter(
        "deliveries settled after more than 10 s in the router",
        metric="qdr_deliveries_delayed_10sec_total", help="router deliveriesDelayed10Sec")
    # Deliveries unsettled for more than 10 s now, those of every link (a
    # message held between a producer and a consumer is two), as qdrouterd.
    deliveriesStuck: int = gauge("deliveries unsettled for more than 10 s, now",
                                 metric="qdr_deliveries_stuck",
                                 help="router deliveriesStuck")
    deliveriesIngress: int = counter("deliveries received from producers",
                                     metric="qdr_deliveries_ingress_total",
                                     help="router deliveriesIngress")
    deliveriesEgress: int = counter("deliveries sent to consumers",
                                    metric="qdr_deliveries_egress_total",
                                    help="router deliveriesEgress")
    deliveriesTransit: int = counter("deliveries sent to other routers",
                                     metric="qdr_deliveries_transit_total",
                                     help="router deliveriesTransit")
    deliveriesIngressRouteContainer: int = counter(
        "deliveries received on route-container connections",
        metric="qdr_deliveries_ingress_route_container_total",
        help="router deliveriesIngressRouteContainer")
    deliveriesEgressRouteContainer: int = counter(
        "deliveries sent on route-container connections",
        metric="qdr_deliveries_egress_route_container_total",
        help="router deliveriesEgressRouteContainer")
    deliveriesRedirectedToFallback: int = counter(
        "deliveries sent to a fallback destination",
        metric="qdr_deliveries_redirected_to_fallback_total",
        help="router deliveriesRedirectedToFallback")
    deliveriesRedelivered: int = counter(
        "deliveries forwarded again after a consumer gave them back (redeliveryLimit)",
        metric="hop_deliveries_redelivered_total", help="router deliveriesRedelivered")
    deliveriesStreamed: int = counter(
        "large messages forwarded frame by frame as they arrived",
        metric="hop_deliveries_streamed_total", help="router deliveriesStreamed")
    deliveriesStreamedAborted: int = counter(
        "streamed messages aborted: by the producer, its leaving, or their size",
        metric="hop_deliveries_streamed_aborted_total", help="router deliveriesStreamedAborted")
    streamingPauses: int = counter(
        "times a producer's connection stopped being read because a copy fell behind",
        metric="hop_streaming_pauses_total", help="router streamingPauses")
    edgeCount: int = gauge("edge routers attached to this interior router", graph=False,
                           metric="hop_edges_total", help="router edgeCount")
    uplinkActive: int = gauge("1 while this edge router has an active uplink, else 0",
                              graph=False, metric="hop_uplink_active",
                              help="router uplinkActive")
    uplinkActivations: int = counter(
        "times an edge router activated an uplink (the first, then each failover)",
        metric="hop_uplink_activations_total", help="router uplinkActivations")
    edgeAddressUpdates: int = counter(
        "address-tracking messages an edge router received from its interior",
        metric="hop_edge_address_updates_total", help="router edgeAddressUpdates")
    edgeLookups: int = counter(
        "link-route lookups: an edge router's questions, an interior's answers",
        metric="hop_edge_lookups_total", help="router edgeLookups")
    uptimeSeconds: int = integer("seconds since the router started", graph=True)
    memoryUsage: int | None = integer("virtual memory size of the process, in bytes")
    residentMemory: int | None = gauge(
        "resident memory of the process, in bytes (of every worker, summed; /metrics has "
        "it as process_resident_memory_bytes)")
    heapInUse: int | None = gauge(
        "bytes the C allocator has handed out (Python's objects larger than 512 bytes "
        "among them); none where the C library cannot say", graph=False,
        metric="hop_heap_in_use_bytes", help="router heapInUse")
    heapFree: int | None = gauge(
        "bytes the C allocator holds free, given back to the system each minute",
        graph=False, metric="hop_heap_free_bytes", help="router heapFree")
    workerThreads: int = integer("threads serving connections")


_BY_KIND: Final = (("type", "linkType"), ("dir", "linkDir"))


def _on_links(what: str) -> str:
    return f"{what} on the open links, by link type and direction"


@attrs.frozen(kw_only=True)
class LinkStatistics:
    """``router.link``: one link of an open connection."""

    adminStatus: str = choice(("enabled", "disabled"),
                              "accepted for qdrouterd's tools; has no effect",
                              default="enabled", update=True)
    operStatus: str = choice(("up", "down", "quiescing", "idle"), "operational status")
    linkName: str = text("the link's name")
    linkType: str = choice(("endpoint", "router-control", "inter-router"), "what the link is for")
    linkDir: str = choice(("in", "out"), "in: the router receives")
    owningAddr: str | None = text("routing key of the address the link is bound to")
    capacity: int = integer("credit window")
    peer: str | None = text("identity of the paired link (link-routed links)")
    connectionId: str = text("identity of the link's connection")
    undeliveredCount: int = gauge("deliveries waiting for credit")
    unsettledCount: int = gauge("deliveries sent or received and not yet settled",
                                metric="hop_link_unsettled", labels=_BY_KIND,
                                help="unsettled deliveries on open links")
    deliveryCount: int = counter("deliveries sent or received", metric="hop_link_deliveries",
                                 labels=_BY_KIND, help=_on_links("deliveries"))
    presettledCount: int = counter("pre-settled deliveries", metric="hop_link_presettled",
                                   labels=_BY_KIND, help=_on_links("presettled"))
    droppedPresettledCount: int = counter("pre-settled deliveries dropped for want of credit")
    acceptedCount: int = counter("deliveries accepted", metric="hop_link_accepted",
                                 labels=_BY_KIND, help=_on_links("accepted"))
    rejectedCount: int = counter("deliveries rejected", metric="hop_link_rejected",
                                 labels=_BY_KIND, help=_on_links("rejected"))
    releasedCount: int = counter("deliveries released", metric="hop_link_released",
                                 labels=_BY_KIND, help=_on_links("released"))
    modifiedCount: int = counter("deliveries modified", metric="hop_link_modified",
                                 labels=_BY_KIND, help=_on_links("modified"))
    deliveriesDelayed1Sec: int = counter("deliveries settled after more than 1 s")
    deliveriesDelayed10Sec: int = counter("deliveries settled after more than 10 s")
    deliveriesStuck: int = counter("deliveries unsettled for more than 10 s")
    creditAvailable: int | None = gauge("credit the link has now")
    zeroCreditSeconds: int = integer("seconds the link has had no credit")
    settleRate: int = gauge("settlements per second, averaged over 5 s")
    ingressHistogram: list[int] | None = items(
        "a consumer's deliveries on an interior router by the router where each entered the "
        "network, one count per router in router.node index order (null for other links)")
    priority: int | None = integer("priority of an inter-router link")


_BY_ADDRESS: Final = (("address", "key"),)
_BY_BRIDGE: Final = (("kind", "kind"), ("bridge", "name"), ("address", "address"))


@attrs.frozen(kw_only=True)
class AddressStatistics:
    """``router.address``: an address the router knows, by routing key."""

    distribution: str = choice(
        ("flood", "multicast", "closest", "balanced", "linkBalanced", "unavailable"),
        "treatment of the address")
    inProcess: int = gauge("in-process consumers (the management agent)", graph=False)
    subscriberCount: int = gauge("local consumers", metric="hop_address_consumers",
                                 labels=_BY_ADDRESS, help="local consumers")
    remoteCount: int = gauge("remote routers with consumers")
    containerCount: int = gauge("local route-container connections serving a link route")
    deliveriesIngress: int = counter(
        "deliveries that entered the network here", metric="hop_address_deliveries_ingress",
        labels=_BY_ADDRESS)
    deliveriesEgress: int = counter(
        "deliveries sent to local consumers", metric="hop_address_deliveries_egress",
        labels=_BY_ADDRESS)
    deliveriesTransit: int = counter(
        "deliveries sent to other routers", metric="hop_address_deliveries_transit",
        labels=_BY_ADDRESS, help="deliveries sent on to other routers")
    deliveriesToContainer: int = counter("deliveries to in-process consumers")
    deliveriesFromContainer: int = counter("deliveries from in-process producers")
    deliveriesIngressRouteContainer: int = counter("deliveries received from route containers")
    deliveriesEgressRouteContainer: int = counter("deliveries sent to route containers")
    deliveriesRedirectedToFallback: int = counter("deliveries redirected to the fallback")
    deliveriesRedelivered: int = counter(
        "deliveries forwarded again after a consumer gave them back (redeliveryLimit)",
        metric="hop_address_deliveries_redelivered", labels=_BY_ADDRESS,
        help="deliveries forwarded again after a consumer gave them back")
    key: str = text("the routing key")
    remoteHostRouters: list[str] = items("routers with consumers")
    transitOutstanding: list[int] | None = items("not kept by Hop (null)")
    trackedDeliveries: int = gauge("unsettled deliveries in flight", graph=False)
    priority: int = integer("priority override, -1 when none")


@attrs.frozen(kw_only=True)
class NodeStatistics:
    """``router.node``: a router of the network."""

    id: str = text("router id")
    protocolVersion: int | None = integer("routing protocol version")
    instance: int | None = integer("the router's start time, epoch seconds")
    linkState: list[str] = items("the router's neighbours")
    linkCosts: dict[str, object] = mapping(
        "the cost of the link to each neighbour (a Hop extension)")
    nextHop: str | None = text("neighbour through which the router is reached (null: a neighbour)")
    validOrigins: list[str] = items("routers whose multicast this router forwards to it")
    address: str = text("the address of the router (its agent: this address and /$management)")
    routerLink: str | None = text("identity of the inter-router link to a neighbour")
    cost: int | None = integer("cost of the path to the router")
    lastTopoChange: int | None = integer("epoch seconds of the last topology change")
    index: int = integer("the router's index")


@attrs.frozen(kw_only=True)
class ConnectionStatistics:
    """``connection``: an open connection."""

    adminStatus: str = choice(("enabled", "deleted"),
                              "deleted closes a normal or route-container connection",
                              default="enabled", update=True)
    operStatus: str = choice(("up", "closing"), "operational status")
    protocol: str = text("amqp")
    container: str | None = text("the peer's container id")
    opened: bool = flag("the OPEN exchange is complete")
    host: str = text("the peer's address, or the connector's host:port")
    dir: str = choice(("in", "out"), "in: accepted by a listener")
    role: str = text("connection role")
    isAuthenticated: bool = flag("SASL authenticated the peer")
    isEncrypted: bool = flag("the connection uses TLS")
    enableProtocolTrace: bool = flag(
        "log every AMQP frame of this connection under PROTOCOL at trace, whatever "
        "that module's level", default=False, update=True)
    sasl: str | None = text("SASL mechanism used")
    user: str | None = text("authenticated user")
    ssl: bool = flag("the connection uses TLS")
    sslProto: str | None = text("TLS protocol version")
    sslCipher: str | None = text("TLS cipher")
    sslSsf: int | None = integer("TLS security strength factor")
    tenant: str | None = text("vhost of a multi-tenant listener")
    uptimeSeconds: int = integer("seconds since the connection opened", graph=True)
    properties: dict[str, object] = mapping("the peer's OPEN properties")
    lastDlvSeconds: int | None = integer("seconds since the last delivery (null: none yet)",
                                         graph=True)
    active: bool = flag("false only for an edge router's edge connection that is not its "
                        "active uplink", default=True)


@attrs.frozen(kw_only=True)
class LogStatistics:
    """``logStats``: records logged per level by one module."""

    traceCount: int = counter("trace records")
    debugCount: int = counter("debug records")
    infoCount: int = counter("info records")
    noticeCount: int = counter("notice records")
    warningCount: int = counter("warning records")
    errorCount: int = counter("error records")
    criticalCount: int = counter("critical records")


@attrs.frozen(kw_only=True)
class AllocatorStatistics:
    """``allocator``: memory use by object type (Hop keeps none: no rows)."""

    typeName: str = text("pool type")
    typeSize: int = integer("object size")
    transferBatchSize: int = integer("not kept by Hop")
    localFreeListMax: int = integer("not kept by Hop", graph=True)
    globalFreeListMax: int = integer("not kept by Hop", graph=True)
    totalAllocFromHeap: int = counter("objects allocated")
    totalFreeToHeap: int = counter("objects freed")
    heldByThreads: int = integer("not kept by Hop", graph=True)
    batchesRebalancedToThreads: int = integer("not kept by Hop", graph=True)
    batchesRebalancedToGlobal: int = integer("not kept by Hop", graph=True)


@attrs.frozen(kw_only=True)
class ConnectorStatus:
    """``connector``: the state of its connection (besides its conf attributes)."""

    connectionStatus: str = text(
        "INITIALIZING, CONNECTING (waiting to retry), SUCCESS (connected), FAILED, CLOSING")
    connectionMsg: str | None = text("the last status message")
    reconnectAttempts: int = gauge("failed attempts in a row since the last success")
    nextRetrySeconds: int | None = gauge(
        "seconds until the next attempt (none while connected or failed)")


@attrs.frozen(kw_only=True)
class TcpBridgeStatistics:
    """``tcpListener`` and ``tcpConnector``: the connections each carried
    (docs/tcp.md); bytes in go from clients to services, out come back."""

    connectionsOpened: int = counter(
        "connections opened through this bridge", metric="hop_tcp_connections_opened",
        labels=_BY_BRIDGE)
    connectionsClosed: int = counter(
        "connections through this bridge that ended", metric="hop_tcp_connections_closed",
        labels=_BY_BRIDGE)
    bytesIn: int = counter("bytes sent from clients to services on its connections",
                           metric="hop_tcp_bytes_in", labels=_BY_BRIDGE)
    bytesOut: int = counter("bytes sent from services to clients on its connections",
                            metric="hop_tcp_bytes_out", labels=_BY_BRIDGE)
    connectionsRefused: int = counter(
        "connections its service refused or could not be reached for (a Hop extension)",
        metric="hop_tcp_connections_refused", labels=_BY_BRIDGE)


@attrs.frozen(kw_only=True)
class TcpConnectionStatistics:
    """``tcpConnection``: one carried TCP connection, seen from one of its
    sides (qdrouterd shows a client's side as in, a service's as out)."""

    address: str = text("the address the connection is carried on")
    host: str = text("the peer of this side, host:port")
    direction: str = choice(("in", "out"), "in: a client connected to a tcpListener; "
                            "out: the router connected to a tcpConnector's service")
    bytesIn: int = counter("bytes sent from the client to the service")
    bytesOut: int = counter("bytes sent from the service to the client")
    uptimeSeconds: int = integer("seconds since the connection was accepted")
    lastInSeconds: int = integer("seconds since the client last sent bytes")
    lastOutSeconds: int = integer("seconds since the service last sent bytes")


@attrs.frozen(kw_only=True)
class LinkRouteStatus:
    """``router.config.linkRoute``: whether a connection serves it."""

    operStatus: str = choice(("active", "inactive"), "active while a connection serves the route")


@attrs.frozen(kw_only=True)
class AutoLinkStatus:
    """``router.config.autoLink``: where an auto-link is in its life."""

    linkRef: str | None = text("identity of the router.link while attached")
    operStatus: str = choice(("inactive", "attaching", "failed", "active", "quiescing", "idle"),
                             "state of the auto-link")
    lastError: str | None = text("why the container last refused or detached the link")


@attrs.frozen(kw_only=True)
class ExchangeStatistics:
    """``router.config.exchange``: what an exchange did with its messages
    (docs/routing.md#exchanges)."""

    bindingCount: int = gauge("bindings of the exchange")
    receivedCount: int = counter("messages the exchange received")
    droppedCount: int = counter("messages no next hop and no alternate took")
    forwardedCount: int = counter("messages forwarded by a binding or to the alternate")
    divertedCount: int = counter("messages forwarded to the alternate only (counted in "
                                 "forwardedCount too)")


@attrs.frozen(kw_only=True)
class BindingStatistics:
    """``router.config.binding``: the messages whose subject matched a binding."""

    matchedCount: int = counter("messages whose subject matched the key")


@attrs.frozen(kw_only=True)
class PolicyStatistics:
    """``policy``: the global policy's denial counters (besides its conf attributes)."""

    connectionsProcessed: int = counter("connections accepted and checked")
    connectionsDenied: int = counter("connections refused")
    connectionsCurrent: int = gauge("client connections now")
    linksDenied: int = counter("attaches refused")
    sessionsDenied: int = counter("sessions refused (beyond maxSessions)")
    maxMessageSizeDenied: int = counter("messages refused for their size")
    totalDenials: int = counter("connections, sessions, links and messages refused")


@attrs.frozen(kw_only=True)
class VhostStatistics:
    """``vhostStats``: a vhost's connections and denials."""

    hostname: str = text("the vhost")
    id: str = text("the vhost (qdrouterd's deprecated name of hostname)")
    connectionsApproved: int = counter("connections admitted")
    connectionsDenied: int = counter("connections refused")
    connectionsCurrent: int = gauge("connections open now")
    perUserState: dict[str, object] = mapping("open connections by user")
    perHostState: dict[str, object] = mapping("open connections by remote host")
    sessionDenied: int = counter("sessions refused")
    senderDenied: int = counter("sending links refused")
    receiverDenied: int = counter("receiving links refused")
    maxMessageSizeDenied: int = counter("messages refused for their size")


@attrs.frozen(kw_only=True)
class DiscoveryStatus:
    """``discovery``: the group's live peers (besides its conf attributes)."""

    peers: list[str] = items("routers heard live")
    beaconsSent: int = counter("beacons this router sent")
    beaconsIgnored: dict[str, object] = mapping("datagrams ignored, by reason")
