"""The management schema: qdrouterd's entity types, their attributes and operations.

Owns the one declaration of every management entity type
(docs/operations.md#management): configuration types take their
attributes from the conf schema (``conf``'s section classes, so the conf
loader, the agent, the manual and ``hopstat`` cannot drift apart), and the
attributes the router reports from ``router.management.statistics`` (which
rows and ``/metrics`` read too).  It must not read router state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

import attrs

from conf.entities import ENTITY_TYPES_BY_NAME, NESTED_TYPES_BY_NAME
from conf.fields import Section, schema_fields
from router.management.statistics import (
    AddressStatistics,
    AllocatorStatistics,
    AutoLinkStatus,
    BindingStatistics,
    ConnectionStatistics,
    ConnectorStatus,
    DiscoveryStatus,
    ExchangeStatistics,
    LinkRouteStatus,
    LinkStatistics,
    LogStatistics,
    NodeStatistics,
    PolicyStatistics,
    RouterStatistics,
    TcpBridgeStatistics,
    TcpConnectionStatistics,
    VhostStatistics,
    declared,
)

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


def _s(name: str, description: str) -> Attribute:
    return Attribute(name=name, type="string", description=description)


def _every(conf_name: str) -> tuple[str, ...]:
    """Every attribute of a conf section type (for ``updatable``)."""
    return tuple(f.schema.conf_name for f in schema_fields(ENTITY_TYPES_BY_NAME[conf_name].cls))


def _from_conf(conf_name: str, *, updatable: tuple[str, ...] = (),
               extra: tuple[Attribute, ...] = (), aliases: bool = False
               ) -> tuple[Attribute, ...]:
    """The attributes of a conf section type, then ``extra`` (read-only);
    with ``aliases``, each deprecated name too (shown beside its attribute)."""
    cls = ENTITY_TYPES_BY_NAME[conf_name].cls
    if aliases:
        extra = (*(Attribute(name=alias, type=f.schema.type.management_type(),
                             description=f"deprecated: use '{f.schema.conf_name}'", create=True)
                   for f in schema_fields(cls) for alias in f.schema.aliases), *extra)
    return _declared(cls, updatable=updatable, extra=extra)


def _nested(name: str) -> EntityType:
    """The type of settings a conf section holds in a map attribute (never a
    row of its own: they are read, created and updated with their section)."""
    nested = NESTED_TYPES_BY_NAME[name]
    return EntityType(name=name, description=f"settings in the {nested.attribute} of a "
                      f"{nested.parent} (schema only)", extends="configurationEntity",
                      attributes=_declared(nested.cls))


def _declared(cls: type[Section], *, updatable: tuple[str, ...] = (),
              extra: tuple[Attribute, ...] = ()) -> tuple[Attribute, ...]:
    """The attributes a conf section class declares (but ``name``), then ``extra``."""
    result = []
    for field in schema_fields(cls):
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


def _stats(record: type) -> tuple[Attribute, ...]:
    """The attributes a ``router.management.statistics`` record declares."""
    return tuple(Attribute(name=name, type=stat.type, description=stat.description,
                           default=stat.default, update=stat.update, graph=stat.graph)
                 for name, stat in declared(record))


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
               attributes=_from_conf("router", extra=_stats(RouterStatistics))),
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
               attributes=_from_conf("connector", extra=_stats(ConnectorStatus))),
    EntityType(name="tcpListener", description="a TCP port whose connections are carried "
               "to a service (docs/tcp.md)", extends="configurationEntity",
               conf_name="tcpListener", operations=_CRD,
               attributes=_from_conf("tcpListener", extra=_stats(TcpBridgeStatistics))),
    EntityType(name="tcpConnector", description="a TCP service the connections of an "
               "address reach (docs/tcp.md)", extends="configurationEntity",
               conf_name="tcpConnector", operations=_CRD,
               attributes=_from_conf("tcpConnector", extra=_stats(TcpBridgeStatistics))),
    EntityType(name="tcpConnection", description="a TCP connection carried by the router",
               extends="operationalEntity", attributes=_stats(TcpConnectionStatistics)),
    EntityType(name="log", description="settings of one log module",
               extends="configurationEntity", conf_name="log", operations=("UPDATE",),
               attributes=_from_conf("log", updatable=(
                   "enable", "includeTimestamp", "includeSource", "outputFile"))),
    EntityType(name="logStats", description="records logged per level by one module",
               extends="operationalEntity", attributes=_stats(LogStatistics)),
    EntityType(name="router.config.address", description="treatment of matching addresses",
               extends="configurationEntity", conf_name="address", operations=_CRD,
               attributes=_from_conf("address")),
    EntityType(name="router.config.linkRoute", description="a link route",
               extends="configurationEntity", conf_name="linkRoute", operations=_CRD,
               attributes=_from_conf("linkRoute", extra=_stats(LinkRouteStatus), aliases=True)),
    EntityType(name="router.connection.linkRoute",
               description="a link route made over a connection, which alone serves it "
                           "(how an edge router offers its brokers' link routes); seen "
                           "and deleted only over that connection",
               extends="operationalEntity", operations=_CRD,
               attributes=(
                   Attribute(name="pattern", type="string", required=True, create=True,
                             description="the addresses it routes (an AMQP address pattern)"),
                   Attribute(name="direction", type=("in", "out"), required=True, create=True,
                             description="in: links the router receives on; out: sends on"),
                   _s("containerId", "the container id of the connection that serves it"))),
    EntityType(name="router.config.autoLink", description="an auto-link",
               extends="configurationEntity", conf_name="autoLink", operations=_CRD,
               attributes=_from_conf("autoLink", extra=_stats(AutoLinkStatus), aliases=True)),
    EntityType(name="router.config.exchange",
               description="an exchange: messages to its address forwarded by their subject",
               extends="configurationEntity", conf_name="exchange", operations=_CRD,
               attributes=_from_conf("exchange", extra=_stats(ExchangeStatistics))),
    EntityType(name="router.config.binding",
               description="a binding of an exchange: subjects matching its key go to its "
                           "next hop",
               extends="configurationEntity", conf_name="binding", operations=_CRD,
               attributes=_from_conf("binding", extra=_stats(BindingStatistics))),
    EntityType(name="router.link", description="a link the router has",
               extends="operationalEntity", operations=("UPDATE",),
               attributes=_stats(LinkStatistics)),
    EntityType(name="router.address", description="an address the router knows",
               extends="operationalEntity", attributes=_stats(AddressStatistics)),
    EntityType(name="router.node", description="a router of the network",
               extends="operationalEntity", attributes=_stats(NodeStatistics)),
    EntityType(name="connection", description="an AMQP connection",
               extends="operationalEntity", operations=("UPDATE",),
               attributes=_stats(ConnectionStatistics)),
    EntityType(name="allocator", description="memory use by object type",
               extends="operationalEntity", attributes=_stats(AllocatorStatistics)),
    EntityType(name="policy", description="global connection policy",
               extends="configurationEntity", conf_name="policy", singleton=True,
               attributes=_from_conf("policy", extra=_stats(PolicyStatistics))),
    EntityType(name="vhost", description="a vhost policy", extends="configurationEntity",
               conf_name="vhost", operations=("CREATE", "UPDATE", "DELETE"),
               attributes=_from_conf("vhost", updatable=_every("vhost"))),
    _nested("vhostUserGroupSettings"),
    EntityType(name="vhostStats", description="a vhost's connections and denials",
               extends="operationalEntity", attributes=_stats(VhostStatistics)),
    EntityType(name="discovery", description="the peer group this router joins (Hop)",
               extends="configurationEntity", conf_name="discovery", operations=("READ",),
               attributes=_from_conf("discovery", extra=_stats(DiscoveryStatus))),
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
            types[t.name] = entry  # keyed by the short name, as qdrouterd's schema
        return {"prefix": PREFIX.rstrip("."), "entityTypes": types}


SCHEMA: Final = Schema(_TYPES)
