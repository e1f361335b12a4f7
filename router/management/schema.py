"""The management schema: qdrouterd's entity types, their attributes and operations.

Owns the one declaration of every management entity type
(docs/operations.md#management):
configuration types take their attributes from the conf schema (``conf``'s
section classes, so the conf loader, the agent, the manual and ``hopstat``
cannot drift apart) plus the read-only attributes declared here; operational
types are declared here whole.  It must not read router state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import attrs

from conf.entities import ENTITY_TYPES_BY_NAME
from conf.fields import schema_fields

__all__ = [
    "PREFIX",
    "SCHEMA",
    "Attribute",
    "EntityType",
    "Schema",
]

PREFIX: Final = "org.apache.qpid.dispatch."
MANAGEMENT_TYPE: Final = "org.amqp.management"

AttributeType = str | tuple[str, ...]


@attrs.frozen(kw_only=True)
class Attribute:
    """One attribute of an entity type, as GET-SCHEMA describes it."""

    name: str
    type: AttributeType
    description: str = ""
    default: object = None
    required: bool = False
    #: May be given to CREATE (and in a conf file).
    create: bool = False
    #: May be changed by UPDATE.
    update: bool = False
    #: A counter (qdrouterd's "graph": consoles chart it).
    graph: bool = False


@attrs.frozen(kw_only=True)
class EntityType:
    """One entity type; ``attributes`` and ``operations`` exclude the inherited ones."""

    name: str
    description: str
    extends: str | None
    operations: tuple[str, ...] = ()
    attributes: tuple[Attribute, ...] = ()
    #: The conf section type whose schema gives the creatable attributes.
    conf_name: str | None = None
    singleton: bool = False
    deprecated: bool = False
    #: Prefixed with ``org.apache.qpid.dispatch.`` (all but ``org.amqp.management``).
    prefixed: bool = True

    @property
    def fully_qualified(self) -> str:
        return PREFIX + self.name if self.prefixed else self.name


def _i(name: str, description: str, *, graph: bool = True) -> Attribute:
    return Attribute(name=name, type="integer", description=description, graph=graph)


def _s(name: str, description: str) -> Attribute:
    return Attribute(name=name, type="string", description=description)


def _every(conf_name: str) -> tuple[str, ...]:
    """Every attribute of a conf section type (for ``updatable``)."""
    return tuple(f.schema.conf_name for f in schema_fields(ENTITY_TYPES_BY_NAME[conf_name].cls))


def _from_conf(conf_name: str, *, updatable: tuple[str, ...] = (),
               extra: tuple[Attribute, ...] = ()) -> tuple[Attribute, ...]:
    """The attributes of a conf section type, then ``extra`` (read-only)."""
    entity = ENTITY_TYPES_BY_NAME[conf_name]
    result = []
    for field in schema_fields(entity.cls):
        schema = field.schema
        if schema.conf_name == "name":
            continue
        default = None if field.required else schema.type.plain(field.default)
        result.append(Attribute(
            name=schema.conf_name,
            type=schema.type.management_type(),
            description=schema.doc,
            default=default,
            required=field.required,
            create=True,
            update=schema.conf_name in updatable,
        ))
    return (*result, *extra)


_OUTCOME_COUNTERS = (
    _i("acceptedDeliveries", "deliveries accepted"),
    _i("rejectedDeliveries", "deliveries rejected"),
    _i("releasedDeliveries", "deliveries released"),
    _i("modifiedDeliveries", "deliveries modified"),
)

_ROUTER_STATS = (
    _s("version", "software version"),
    _s("hostName", "host name of the machine"),
    _i("addrCount", "router.address entities", graph=False),
    _i("linkCount", "router.link entities", graph=False),
    _i("nodeCount", "other routers known", graph=False),
    _i("linkRouteCount", "linkRoute entities", graph=False),
    _i("autoLinkCount", "autoLink entities", graph=False),
    _i("connectionCount", "open connections", graph=False),
    _i("blockedLinkCount", "links whose credit has been zero for more than 10 s"),
    _i("linksBlocked", "the same as blockedLinkCount (the name qdstat reads)"),
    _i("presettledDeliveries", "pre-settled deliveries received from producers"),
    _i("droppedPresettledDeliveries", "pre-settled deliveries dropped for want of credit"),
    *_OUTCOME_COUNTERS,
    _i("deliveriesDelayed1Sec", "deliveries settled after more than 1 s in the router"),
    _i("deliveriesDelayed10Sec", "deliveries settled after more than 10 s in the router"),
    _i("deliveriesStuck", "deliveries unsettled for more than 10 s"),
    _i("deliveriesIngress", "deliveries received from producers"),
    _i("deliveriesEgress", "deliveries sent to consumers"),
    _i("deliveriesTransit", "deliveries sent to other routers"),
    _i("deliveriesIngressRouteContainer", "deliveries received on route-container connections"),
    _i("deliveriesEgressRouteContainer", "deliveries sent on route-container connections"),
    _i("deliveriesRedirectedToFallback", "deliveries sent to a fallback destination"),
    _i("deliveriesStreamed", "large messages forwarded frame by frame as they arrived"),
    _i("deliveriesStreamedAborted",
       "streamed messages aborted: by the producer, its leaving, or their size"),
    _i("streamingPauses",
       "times a producer's connection stopped being read because a copy fell behind"),
    _i("uptimeSeconds", "seconds since the router started"),
    _i("memoryUsage", "virtual memory size of the process, in bytes", graph=False),
    _i("workerThreads", "threads serving connections", graph=False),
)

_LINK_STATS = (
    Attribute(name="adminStatus", type=("enabled", "disabled"), default="enabled", update=True,
              description="accepted for qdrouterd's tools; has no effect"),
    Attribute(name="operStatus", type=("up", "down", "quiescing", "idle"),
              description="operational status"),
    _s("linkName", "the link's name"),
    Attribute(name="linkType", type=("endpoint", "router-control", "inter-router"),
              description="what the link is for"),
    Attribute(name="linkDir", type=("in", "out"), description="in: the router receives"),
    _s("owningAddr", "routing key of the address the link is bound to"),
    _i("capacity", "credit window", graph=False),
    _s("peer", "identity of the paired link (link-routed links)"),
    _s("connectionId", "identity of the link's connection"),
    _i("undeliveredCount", "deliveries waiting for credit"),
    _i("unsettledCount", "deliveries sent or received and not yet settled"),
    _i("deliveryCount", "deliveries sent or received"),
    _i("presettledCount", "pre-settled deliveries"),
    _i("droppedPresettledCount", "pre-settled deliveries dropped for want of credit"),
    _i("acceptedCount", "deliveries accepted"),
    _i("rejectedCount", "deliveries rejected"),
    _i("releasedCount", "deliveries released"),
    _i("modifiedCount", "deliveries modified"),
    _i("deliveriesDelayed1Sec", "deliveries settled after more than 1 s"),
    _i("deliveriesDelayed10Sec", "deliveries settled after more than 10 s"),
    _i("deliveriesStuck", "deliveries unsettled for more than 10 s"),
    _i("creditAvailable", "credit the link has now"),
    _i("zeroCreditSeconds", "seconds the link has had no credit", graph=False),
    _i("settleRate", "settlements per second, averaged over 5 s"),
    Attribute(name="ingressHistogram", type="list", description="not kept by Hop (null)"),
    _i("priority", "priority of an inter-router link", graph=False),
)

_ADDRESS_STATS = (
    Attribute(name="distribution",
              type=("flood", "multicast", "closest", "balanced", "linkBalanced", "unavailable"),
              description="treatment of the address"),
    _i("inProcess", "in-process consumers (the management agent)", graph=False),
    _i("subscriberCount", "local consumers"),
    _i("remoteCount", "remote routers with consumers"),
    _i("containerCount", "local route-container connections serving a link route"),
    _i("deliveriesIngress", "deliveries that entered the network here"),
    _i("deliveriesEgress", "deliveries sent to local consumers"),
    _i("deliveriesTransit", "deliveries sent to other routers"),
    _i("deliveriesToContainer", "deliveries to in-process consumers"),
    _i("deliveriesFromContainer", "deliveries from in-process producers"),
    _i("deliveriesIngressRouteContainer", "deliveries received from route containers"),
    _i("deliveriesEgressRouteContainer", "deliveries sent to route containers"),
    _i("deliveriesRedirectedToFallback", "deliveries redirected to the fallback"),
    _s("key", "the routing key"),
    Attribute(name="remoteHostRouters", type="list", description="routers with consumers"),
    Attribute(name="transitOutstanding", type="list", description="not kept by Hop (null)"),
    _i("trackedDeliveries", "unsettled deliveries in flight", graph=False),
    _i("priority", "priority override, -1 when none", graph=False),
)

_NODE_STATS = (
    _s("id", "router id"),
    _i("protocolVersion", "routing protocol version", graph=False),
    _i("instance", "the router's start time, epoch seconds", graph=False),
    Attribute(name="linkState", type="list", description="the router's neighbours"),
    _s("nextHop", "neighbour through which the router is reached (null: a neighbour)"),
    Attribute(name="validOrigins", type="list",
              description="routers whose multicast this router forwards to it"),
    _s("address", "the router's management address"),
    _s("routerLink", "identity of the inter-router link to a neighbour"),
    _i("cost", "cost of the path to the router", graph=False),
    _i("lastTopoChange", "epoch seconds of the last topology change", graph=False),
    _i("index", "the router's index", graph=False),
)

_CONNECTION_STATS = (
    Attribute(name="adminStatus", type=("enabled", "deleted"), default="enabled", update=True,
              description="deleted closes a normal or route-container connection"),
    Attribute(name="operStatus", type=("up", "closing"), description="operational status"),
    _s("protocol", "amqp"),
    _s("container", "the peer's container id"),
    Attribute(name="opened", type="boolean", description="the OPEN exchange is complete"),
    _s("host", "the peer's address, or the connector's host:port"),
    Attribute(name="dir", type=("in", "out"), description="in: accepted by a listener"),
    _s("role", "connection role"),
    Attribute(name="isAuthenticated", type="boolean", description="SASL authenticated the peer"),
    Attribute(name="isEncrypted", type="boolean", description="the connection uses TLS"),
    Attribute(name="enableProtocolTrace", type="boolean", default=False,
              description="not supported by Hop"),
    _s("sasl", "SASL mechanism used"),
    _s("user", "authenticated user"),
    Attribute(name="ssl", type="boolean", description="the connection uses TLS"),
    _s("sslProto", "TLS protocol version"),
    _s("sslCipher", "TLS cipher"),
    _i("sslSsf", "TLS security strength factor", graph=False),
    _s("tenant", "vhost of a multi-tenant listener"),
    _i("uptimeSeconds", "seconds since the connection opened"),
    Attribute(name="properties", type="map", description="the peer's OPEN properties"),
    _i("lastDlvSeconds", "seconds since the last delivery (null: none yet)"),
)

_LOG_STATS = tuple(
    _i(f"{level}Count", f"{level} records")
    for level in ("trace", "debug", "info", "notice", "warning", "error", "critical")
)

_ALLOCATOR_STATS = (
    _s("typeName", "pool type"),
    _i("typeSize", "object size", graph=False),
    _i("transferBatchSize", "not kept by Hop", graph=False),
    _i("localFreeListMax", "not kept by Hop"),
    _i("globalFreeListMax", "not kept by Hop"),
    _i("totalAllocFromHeap", "objects allocated"),
    _i("totalFreeToHeap", "objects freed"),
    _i("heldByThreads", "not kept by Hop"),
    _i("batchesRebalancedToThreads", "not kept by Hop"),
    _i("batchesRebalancedToGlobal", "not kept by Hop"),
)

_CONNECTOR_STATUS = (
    _s("connectionStatus",
       "INITIALIZING, CONNECTING (waiting to retry), SUCCESS (connected), FAILED, CLOSING"),
    _s("connectionMsg", "the last status message"),
    _i("reconnectAttempts", "failed attempts in a row since the last success"),
    _i("nextRetrySeconds", "seconds until the next attempt (none while connected or failed)"),
)

_NODE_OPERATIONS = ("QUERY", "GET-TYPES", "GET-ANNOTATIONS", "GET-OPERATIONS",
                    "GET-ATTRIBUTES", "GET-MGMT-NODES")
_CRD = ("CREATE", "DELETE")

_TYPES: tuple[EntityType, ...] = (
    EntityType(name="entity", description="base of every entity type", extends=None,
               attributes=(_s("name", "unique name"), _s("identity", "unique identity"),
                           _s("type", "fully qualified type"))),
    EntityType(name="configurationEntity", description="base of configuration types",
               extends="entity", operations=("READ",)),
    EntityType(name="operationalEntity", description="base of operational types",
               extends="entity", operations=("READ",)),
    EntityType(name=MANAGEMENT_TYPE, description="the AMQP management node",
               extends="operationalEntity", operations=_NODE_OPERATIONS, prefixed=False),
    EntityType(name="management", description="qdrouterd's management node",
               extends=MANAGEMENT_TYPE, operations=("GET-SCHEMA", "GET-JSON-SCHEMA", "GET-LOG")),
    EntityType(name="router", description="the router", extends="configurationEntity",
               conf_name="router", singleton=True,
               attributes=_from_conf("router", extra=_ROUTER_STATS)),
    # UPDATE reads the profile's files again (certificate rotation).
    EntityType(name="sslProfile", description="TLS settings", extends="configurationEntity",
               conf_name="sslProfile", operations=("CREATE", "UPDATE", "DELETE"),
               attributes=_from_conf("sslProfile", updatable=_every("sslProfile"))),
    EntityType(name="authServicePlugin", description="delegated SASL authentication",
               extends="configurationEntity", conf_name="authServicePlugin", operations=_CRD,
               attributes=_from_conf("authServicePlugin")),
    EntityType(name="listener", description="a port accepting connections",
               extends="configurationEntity", conf_name="listener", operations=_CRD,
               attributes=_from_conf("listener")),
    EntityType(name="connector", description="a peer the router connects to",
               extends="configurationEntity", conf_name="connector", operations=_CRD,
               attributes=_from_conf("connector", extra=_CONNECTOR_STATUS)),
    EntityType(name="log", description="settings of one log module",
               extends="configurationEntity", conf_name="log", operations=("UPDATE",),
               attributes=_from_conf("log", updatable=(
                   "enable", "includeTimestamp", "includeSource", "outputFile"))),
    EntityType(name="logStats", description="records logged per level by one module",
               extends="operationalEntity", attributes=_LOG_STATS),
    EntityType(name="router.config.address", description="treatment of matching addresses",
               extends="configurationEntity", conf_name="address", operations=_CRD,
               attributes=_from_conf("address")),
    EntityType(name="router.config.linkRoute", description="a link route",
               extends="configurationEntity", conf_name="linkRoute", operations=_CRD,
               attributes=_from_conf("linkRoute", extra=(
                   Attribute(name="operStatus", type=("active", "inactive"),
                             description="active while a connection serves the route"),))),
    EntityType(name="router.config.autoLink", description="an auto-link",
               extends="configurationEntity", conf_name="autoLink", operations=_CRD,
               attributes=_from_conf("autoLink", extra=(
                   _s("linkRef", "identity of the router.link while attached"),
                   Attribute(name="operStatus",
                             type=("inactive", "attaching", "failed", "active", "quiescing",
                                   "idle"),
                             description="state of the auto-link"),
                   _s("lastError", "why the container last refused or detached the link"),
               ))),
    EntityType(name="router.config.exchange", description="an exchange (not implemented)",
               extends="configurationEntity", conf_name="exchange", operations=_CRD,
               attributes=_from_conf("exchange")),
    EntityType(name="router.config.binding", description="an exchange binding (not implemented)",
               extends="configurationEntity", conf_name="binding", operations=_CRD,
               attributes=_from_conf("binding")),
    EntityType(name="router.link", description="a link the router has",
               extends="operationalEntity", operations=("UPDATE",), attributes=_LINK_STATS),
    EntityType(name="router.address", description="an address the router knows",
               extends="operationalEntity", attributes=_ADDRESS_STATS),
    EntityType(name="router.node", description="a router of the network",
               extends="operationalEntity", attributes=_NODE_STATS),
    EntityType(name="connection", description="an AMQP connection",
               extends="operationalEntity", operations=("UPDATE",),
               attributes=_CONNECTION_STATS),
    EntityType(name="allocator", description="memory use by object type",
               extends="operationalEntity", attributes=_ALLOCATOR_STATS),
    EntityType(name="policy", description="global connection policy",
               extends="configurationEntity", conf_name="policy", singleton=True,
               attributes=_from_conf("policy", extra=(
                   _i("connectionsProcessed", "connections accepted and checked"),
                   _i("connectionsDenied", "connections refused"),
                   _i("connectionsCurrent", "client connections now"),
                   _i("linksDenied", "attaches refused"),
                   _i("sessionsDenied", "sessions refused (beyond maxSessions)"),
                   _i("maxMessageSizeDenied", "messages refused for their size"),
                   _i("totalDenials", "connections, sessions, links and messages refused"),
               ))),
    EntityType(name="vhost", description="a vhost policy", extends="configurationEntity",
               conf_name="vhost", operations=("CREATE", "UPDATE", "DELETE"),
               attributes=_from_conf("vhost", updatable=_every("vhost"))),
    EntityType(name="vhostStats", description="a vhost's connections and denials",
               extends="operationalEntity", attributes=(
                   _s("hostname", "the vhost"),
                   _i("connectionsApproved", "connections admitted"),
                   _i("connectionsDenied", "connections refused"),
                   _i("connectionsCurrent", "connections open now"),
                   Attribute(name="perUserState", type="map",
                             description="open connections by user"),
                   Attribute(name="perHostState", type="map",
                             description="open connections by remote host"),
                   _i("sessionDenied", "sessions refused"),
                   _i("senderDenied", "sending links refused"),
                   _i("receiverDenied", "receiving links refused"),
                   _i("maxMessageSizeDenied", "messages refused for their size"),
               )),
    EntityType(name="discovery", description="the peer group this router joins (Hop)",
               extends="configurationEntity", conf_name="discovery", operations=("READ",),
               attributes=_from_conf("discovery", extra=(
                   Attribute(name="peers", type="list", description="routers heard live"),
                   _i("beaconsSent", "beacons this router sent"),
                   Attribute(name="beaconsIgnored", type="map",
                             description="datagrams ignored, by reason"),
               ))),
    EntityType(name="console", description="deprecated", extends="configurationEntity",
               conf_name="console", deprecated=True, attributes=_from_conf("console")),
)


class Schema:
    """Lookups over the entity types."""

    def __init__(self, types: tuple[EntityType, ...]) -> None:
        self.types = {t.name: t for t in types}
        self._by_name: dict[str, EntityType] = {}
        for t in types:
            self._by_name[t.name] = t
            self._by_name[t.fully_qualified] = t

    def __iter__(self) -> Iterator[EntityType]:
        return iter(self.types.values())

    def find(self, name: str) -> EntityType | None:
        """The type called ``name``, fully qualified or short."""
        return self._by_name.get(name)

    def bases(self, entity_type: EntityType) -> list[EntityType]:
        """The base types of ``entity_type``, nearest first."""
        result = []
        current = entity_type.extends
        while current is not None:
            base = self.types[current]
            result.append(base)
            current = base.extends
        return result

    def is_a(self, entity_type: EntityType, base: EntityType) -> bool:
        return entity_type is base or base in self.bases(entity_type)

    def attributes(self, entity_type: EntityType) -> list[Attribute]:
        """Every attribute of ``entity_type``, inherited ones first."""
        result: list[Attribute] = []
        for t in [*reversed(self.bases(entity_type)), entity_type]:
            result.extend(t.attributes)
        return result

    def attribute_names(self, entity_type: EntityType) -> list[str]:
        return [a.name for a in self.attributes(entity_type)]

    def operations(self, entity_type: EntityType) -> list[str]:
        """Every operation of ``entity_type``, its own first."""
        result: list[str] = []
        for t in [entity_type, *self.bases(entity_type)]:
            result.extend(op for op in t.operations if op not in result)
        return result

    def describe(self) -> dict[str, object]:
        """The schema as GET-SCHEMA returns it (false and empty fields omitted)."""
        types: dict[str, object] = {}
        for t in self:
            entry: dict[str, object] = {"fullyQualifiedType": t.fully_qualified}
            if t.description:
                entry["description"] = t.description
            if t.extends is not None:
                base = self.types[t.extends]
                entry["extends"] = base.fully_qualified
            if t.operations:
                entry["operations"] = list(t.operations)
            if t.singleton:
                entry["singleton"] = True
            if t.deprecated:
                entry["deprecated"] = True
            attributes: dict[str, object] = {}
            for a in t.attributes:
                described: dict[str, object] = {
                    "type": list(a.type) if isinstance(a.type, tuple) else a.type}
                if a.description:
                    described["description"] = a.description
                if a.default is not None:
                    described["default"] = a.default
                for flag in ("required", "create", "update", "graph"):
                    if getattr(a, flag):
                        described[flag] = True
                attributes[a.name] = described
            if attributes:
                entry["attributes"] = attributes
            types[t.fully_qualified] = entry
        return {"prefix": PREFIX.rstrip("."), "entityTypes": types}


SCHEMA: Final = Schema(_TYPES)
