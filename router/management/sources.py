"""Entity sources over the routing core: addresses, links, nodes, link routes, auto-links.

Owns turning the core's records (``router.core.Router``) into management
rows, the run-time CREATE and DELETE of ``address``, ``linkRoute`` and
``autoLink`` entities, and ``sslProfile`` entities over the profiles the
adapter has loaded.  Rows are built when asked for, from the counters the
per-message path already keeps; nothing here runs per message.  It must not
touch sockets or proton.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Iterator
from typing import Final, Protocol

import attrs

import conf
from addressing import AddressError, Direction
from autolink import AutoLinkError
from linkroute import LinkRouteError
from router.core import (
    AddressRecord,
    Connection,
    Effect,
    InLink,
    OutLink,
    Role,
    RoutedEnd,
    Router,
    UplinkTarget,
)
from router.core.tcp import TcpBridge
from router.core.watch import Watch
from router.management.agent import Changed, ManagementError, ReadOnly, Row
from router.management.statistics import (
    AddressStatistics,
    AutoLinkStatus,
    BindingStatistics,
    ExchangeStatistics,
    LinkRouteStatus,
    LinkStatistics,
    NodeStatistics,
    TcpBridgeStatistics,
    as_row,
)

__all__ = [
    "ConfigAddresses",
    "ConfigAutoLinks",
    "ConfigBindings",
    "ConfigExchanges",
    "ConfigLinkRoutes",
    "RouterAddresses",
    "RouterLinks",
    "RouterNodes",
    "SslProfileStore",
    "SslProfiles",
    "address_statistics",
    "bridge_statistics",
    "link_row",
    "link_statistics",
    "network_nodes",
    "remote_routers",
    "section_from",
]

def _links(connections: Iterable[Connection]) -> Iterator[InLink | OutLink]:
    for conn in connections:
        yield from conn.in_links.values()
        yield from conn.out_links.values()


def ingress_histogram(link: InLink | OutLink, routers: list[tuple[str, bool]] | None
                      ) -> list[int] | None:
    """``ingressHistogram`` of a consumer's link on an interior router: its
    deliveries by the router where each entered the network, one count per
    router of ``routers`` (ids in ``router.node`` index order, and which is
    this router); None for other links, as qdrouterd shows them."""
    if routers is None or not isinstance(link, OutLink) or link.conn.role is Role.INTER_ROUTER:
        return None
    counts = link.ingress or {}
    here = link.delivered - sum(counts.values())
    return [max(here, 0) if own else counts.get(router_id, 0) for router_id, own in routers]


def routers_by_index(router: Router | None) -> list[tuple[str, bool]] | None:
    """The routers of the network in ``router.node`` index order, and which
    is this one (None: not an interior router)."""
    network = None if router is None else router.network
    if network is None:
        return None
    return [(node.id, node.is_self)
            for node in sorted(network.protocol.node_table(), key=lambda n: n.index)]


def link_statistics(link: InLink | OutLink, now: float = 0.0,
                    routers: list[tuple[str, bool]] | None = None) -> LinkStatistics:
    """The ``router.link`` attributes of one link (``now`` for its zero-credit
    time; ``routers`` as ``ingress_histogram`` takes them)."""
    incoming = isinstance(link, InLink)
    conn = link.conn
    if conn.role is Role.INTER_ROUTER:
        control = link.control if isinstance(link, InLink) else (
            link.record is None and link.presettle)
        link_type = "router-control" if control else "inter-router"
    else:
        link_type = "endpoint"
    record = link.record
    accepted, rejected, released, modified = link.outcomes
    return LinkStatistics(
        adminStatus="enabled",
        operStatus="up",
        linkName=link.name,
        linkType=link_type,
        linkDir="in" if incoming else "out",
        owningAddr=record.key if record is not None else None,
        capacity=link.window if isinstance(link, InLink) else link.capacity,
        peer=None,
        connectionId=str(conn.conn_id),
        undeliveredCount=0 if isinstance(link, InLink) else len(link.queue),
        unsettledCount=len(link.unsettled),
        deliveryCount=link.delivered,
        presettledCount=link.presettled,
        droppedPresettledCount=link.dropped_presettled,
        acceptedCount=accepted,
        rejectedCount=rejected,
        releasedCount=released,
        modifiedCount=modified,
        deliveriesDelayed1Sec=link.delayed1,
        deliveriesDelayed10Sec=link.delayed10,
        deliveriesStuck=link.stuck_now,
        creditAvailable=link.credit,
        zeroCreditSeconds=Watch.zero_credit_seconds(link, now),
        settleRate=0,
        ingressHistogram=ingress_histogram(link, routers),
        priority=link.priority,
    )


def link_row(link: InLink | OutLink, now: float = 0.0,
             routers: list[tuple[str, bool]] | None = None) -> Row:
    """The ``router.link`` row of one link."""
    return {"identity": str(link.link_id), "name": link.name,
            **as_row(link_statistics(link, now, routers))}


def _terminus_key(address: str | None) -> str | None:
    # A routed link's terminus address written as a mobile address key,
    # as qdrouterd's agent writes it (so that qdstat strips the "M0").
    return None if address is None else "M0" + address


def routed_row(end: RoutedEnd) -> Row:
    """The ``router.link`` row of one link of a link-routed pair: its owning
    address is the terminus address of the link it is paired with (as the key
    of a mobile address), and
    ``peer`` that link's identity, as qdrouterd shows them."""
    partner = end.partner
    accepted, rejected, released, modified = end.outcomes
    statistics = LinkStatistics(
        adminStatus="enabled", operStatus="up", linkName=end.name, linkType="endpoint",
        linkDir="in" if end.receiving else "out",
        owningAddr=_terminus_key(partner.address if partner is not None else end.address),
        capacity=0, peer=str(partner.link_id) if partner is not None else None,
        connectionId=str(end.conn.conn_id), undeliveredCount=0,
        unsettledCount=len(end.deliveries), deliveryCount=end.delivered,
        presettledCount=end.presettled, droppedPresettledCount=0, acceptedCount=accepted,
        rejectedCount=rejected, releasedCount=released, modifiedCount=modified,
        deliveriesDelayed1Sec=0, deliveriesDelayed10Sec=0, deliveriesStuck=0,
        creditAvailable=None, zeroCreditSeconds=0, settleRate=0, ingressHistogram=None,
        priority=None)
    return {"identity": str(end.link_id), "name": end.name, **as_row(statistics)}


class RouterLinks(ReadOnly):
    """``router.link``: every link of every open connection."""

    def __init__(self, connections: Callable[[], Iterable[Connection]],
                 clock: Callable[[], float], router: Router | None = None) -> None:
        self._connections = connections
        self._clock = clock
        self._router = router

    def rows(self) -> Iterable[Row]:
        now = self._clock()
        connections = list(self._connections())
        routers = routers_by_index(self._router)
        return [link_row(link, now, routers) for link in _links(connections)] + [
            routed_row(end) for conn in connections for end in conn.routed.values()]

    def update(self, row: Row, attributes: dict[str, object]) -> Changed:
        # qdrouterd accepts any adminStatus and does nothing with it
        # (docs/compatibility.md#management-requests); Hop says so instead of
        # pretending.
        status = attributes.get("adminStatus", "enabled")
        if status != "enabled":
            raise ManagementError(501, f"Setting a link's adminStatus to {status!r} is not "
                                       "supported; close its connection instead")
        return Changed(row=row)


#: In-process consumers (the agent) belong to the connection numbered 0.
IN_PROCESS_CONNECTION = 0


def remote_routers(node_ids: Iterable[str], siblings: frozenset[str] = frozenset(),
                   known: Container[str] = frozenset()) -> list[str]:
    """The routers behind ``node_ids`` (remote nodes with consumers), as one
    router's operators see them (docs/scaling.md#management): this router's
    other workers (``siblings``) are not remote, and another router's
    workers (``<id>.w<n>`` where ``<id>`` is a node too, in ``known`` or
    in ``node_ids``) are that one router."""
    nodes = [n for n in node_ids if n not in siblings]
    present = set(nodes)
    routers: dict[str, None] = {}
    for node in nodes:
        base, dot, suffix = node.rpartition(".w")
        worker = dot and suffix.isdigit() and (base in present or base in known)
        routers[base if worker else node] = None
    return list(routers)


def network_nodes(router: Router) -> frozenset[str]:
    """The ids of the routers the network holds now (none for a router
    that does not speak the routing protocol)."""
    network = router.network
    return frozenset() if network is None else frozenset(
        node.id for node in network.protocol.node_table())


def bridge_statistics(bridge: TcpBridge) -> TcpBridgeStatistics:
    """A TCP bridge's counts, as ``tcpListener``, ``tcpConnector`` and
    ``/metrics`` show them (docs/tcp.md)."""
    return TcpBridgeStatistics(
        connectionsOpened=bridge.opened, connectionsClosed=bridge.closed,
        bytesIn=bridge.bytes_in, bytesOut=bridge.bytes_out, connectionsRefused=bridge.refused)


def address_statistics(record: AddressRecord, siblings: frozenset[str] = frozenset(),
                       known: Container[str] = frozenset()) -> AddressStatistics:
    """The ``router.address`` attributes of one address record; with
    ``siblings``, the router's other workers' node ids (remote to this
    worker, not to the router), and ``known``, the nodes of the network
    (``remote_routers``)."""
    in_process = sum(1 for link in record.consumers
                     if link.conn.conn_id == IN_PROCESS_CONNECTION)
    ingress = sum(link.delivered for link in record.senders)
    egress = sum(link.delivered for link in record.consumers)
    # An edge connection's link bound as a destination (an interior's
    # downlink to an edge, an edge's link up its uplink) is a local
    # destination, as qdrouterd counts it; other routers are remote.
    routers = [target for target in record.remotes if not isinstance(target, UplinkTarget)]
    remote = remote_routers((target.router_id for target in routers), siblings, known)
    return AddressStatistics(
        distribution=record.distribution.value,
        inProcess=in_process,
        subscriberCount=len(record.consumers) - in_process
        + len(record.remotes) - len(routers),
        remoteCount=len(remote),
        containerCount=0,
        deliveriesIngress=ingress + record.retired_in,
        deliveriesEgress=egress + record.retired_out,
        deliveriesTransit=record.transit,
        deliveriesToContainer=record.to_container,
        deliveriesFromContainer=0,
        deliveriesIngressRouteContainer=0,
        deliveriesEgressRouteContainer=0,
        deliveriesRedirectedToFallback=record.redirected,
        deliveriesRedelivered=record.redelivered,
        key=record.key,
        remoteHostRouters=remote,
        transitOutstanding=None,
        trackedDeliveries=sum(len(link.unsettled) for link in record.senders),
        priority=record.priority if record.priority is not None else -1,
    )


#: The first letters of link-route keys (docs/brokers.md#link-route-keys).
LINK_ROUTE_CLASSES: Final = "CDEF"


def _address_row(record: AddressRecord, containers: int = 0,
                 siblings: frozenset[str] = frozenset(),
                 known: Container[str] = frozenset()) -> Row:
    statistics = address_statistics(record, siblings, known)
    if record.key[0] in LINK_ROUTE_CLASSES:
        statistics = attrs.evolve(statistics, containerCount=containers,
                                  distribution="linkBalanced")
    return {"identity": record.key, "name": record.key, **as_row(statistics)}


def _link_route_row(key: str, containers: int) -> Row:
    """A link route's key that no address record holds (one this router
    configures or serves itself): its local route-container connections."""
    statistics = AddressStatistics(
        distribution="linkBalanced", inProcess=0, subscriberCount=0, remoteCount=0,
        containerCount=containers, deliveriesIngress=0, deliveriesEgress=0,
        deliveriesTransit=0, deliveriesToContainer=0, deliveriesFromContainer=0,
        deliveriesIngressRouteContainer=0, deliveriesEgressRouteContainer=0,
        deliveriesRedirectedToFallback=0, deliveriesRedelivered=0, key=key, remoteHostRouters=[],
        transitOutstanding=None, trackedDeliveries=0, priority=-1)
    return {"identity": key, "name": key, **as_row(statistics)}


class RouterAddresses(ReadOnly):
    """``router.address``: the address records of the core, by routing key,
    and the keys of the link routes configured or served here (as qdrouterd
    lists them from configuration on: ``containerCount`` counts the
    connections that serve one now).  ``siblings``: the router's other
    workers (docs/scaling.md#management)."""

    def __init__(self, router: Router, siblings: frozenset[str] = frozenset()) -> None:
        self._router = router
        self._siblings = siblings

    def rows(self) -> Iterable[Row]:
        records = self._router.records
        containers = {entry.key: len(entry.rotation)
                      for entry in self._router.link_routing.table.entries()
                      if entry.routes or entry.rotation}
        known = network_nodes(self._router) if self._siblings else frozenset()
        rows = [_address_row(record, containers.get(key, 0), self._siblings, known)
                for key, record in records.items()]
        rows += [_link_route_row(key, count) for key, count in containers.items()
                 if key not in records]
        return rows


class RouterNodes(ReadOnly):
    """``router.node``: every router of the network (interior mode only).

    ``to_epoch`` turns the core's clock into epoch seconds (``lastTopoChange``).
    """

    def __init__(self, router: Router,
                 to_epoch: Callable[[float], float] = lambda t: t) -> None:
        self._router = router
        self._to_epoch = to_epoch

    def rows(self) -> Iterable[Row]:
        network = self._router.network
        if network is None:
            return []
        rows = []
        for node in network.protocol.node_table():
            stats = NodeStatistics(
                id=node.id,
                index=node.index,
                protocolVersion=node.protocol_version,
                instance=node.instance,
                linkState=[peer for peer, _ in node.peers],
                linkCosts=dict(node.peers),
                nextHop=None if node.is_self or node.next_hop == node.id else node.next_hop,
                validOrigins=list(node.valid_origins),
                address=f"amqp:/_topo/0/{node.id}",
                routerLink=None if node.link_id is None else str(node.link_id),
                cost=node.cost,
                lastTopoChange=None if node.last_topology_change is None
                else int(self._to_epoch(node.last_topology_change)),
            )
            rows.append({"identity": f"router.node/{node.id}",
                         "name": f"router.node/{node.id}", **as_row(stats)})
        return rows


class ConfigAddresses(ReadOnly):
    """``router.config.address``: the configured address patterns; CREATE and
    DELETE change the table at once (new links take the new treatment)."""

    def __init__(self, router: Router) -> None:
        self._router = router
        self._identities: dict[str, str] = {}

    def _identity(self, pattern: str) -> str:
        identity = self._identities.get(pattern)
        if identity is None:
            identity = self._identities[pattern] = str(next(self._router.config_ids))
        return identity

    def rows(self) -> Iterable[Row]:
        rows = []
        for pattern, spec in self._router.addresses.table:
            identity = self._identity(pattern)
            section = conf.AddressSection.from_spec(spec)
            row: Row = conf.section_attributes(section)
            row["identity"] = identity
            row["name"] = spec.name or f"address/{identity}"
            row["pattern"] = row.get("pattern") or None
            rows.append(row)
        return rows

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        # qdrouterd's CREATE spelling (docs/compatibility.md#management-requests)
        if "fallback" in attributes:
            attributes.setdefault("enableFallback", attributes.pop("fallback"))
        section = section_from("address", name, attributes, strings_typed=True)
        assert isinstance(section, conf.AddressSection)
        try:
            spec = section.to_spec()
            pattern = self._router.addresses.table.add(spec)
        except AddressError as error:
            raise ManagementError(400, str(error)) from None
        identity = self._identity(pattern)
        return Changed(row=next(r for r in self.rows() if r["identity"] == identity))

    def delete(self, row: Row) -> tuple[()]:
        for pattern, identity in list(self._identities.items()):
            if identity == row["identity"]:
                self._router.addresses.table.remove(pattern)
                del self._identities[pattern]
                return ()
        raise ManagementError(404, f"No entity with identity={row['identity']}")


def _with_aliases(row: Row, cls: type[conf.fields.Section]) -> Row:
    """``row`` with each deprecated attribute name beside its current one
    (``dir`` beside ``direction``), as qdrouterd's routing core lists them."""
    for field in conf.fields.schema_fields(cls):
        for alias in field.schema.aliases:
            row[alias] = row.get(field.schema.conf_name)
    return row


def section_from(conf_name: str, name: str | None, attributes: dict[str, object], *,
                 strings_typed: bool = False) -> conf.fields.Section:
    """The conf section a CREATE describes, checked exactly as a conf file's;
    a bad value is a 400 with the conf loader's message.

    With ``strings_typed`` a string attribute given a number, boolean, list
    or map is refused rather than read as its text, as qdrouterd's routing
    core refuses it for the ``router.config`` types.
    """
    if name is not None:
        attributes["name"] = name
    if strings_typed:
        cls = conf.entities.ENTITY_TYPES_BY_NAME[conf_name].cls
        for field in conf.fields.schema_fields(cls):
            value = attributes.get(field.schema.conf_name)
            if (type(field.schema.type) is conf.types.StringType and value is not None
                    and not isinstance(value, str)):
                node = conf.document.from_plain(value, conf.diagnostics.FILE_POSITION)
                kind = conf.document.describe_kind(node)
                raise ManagementError(
                    400, f"attribute {field.schema.conf_name!r} must be a string, got {kind}")
    try:
        return conf.build_section(conf_name, attributes)
    except conf.ConfError as error:
        raise ManagementError(400, "; ".join(d.message for d in error.diagnostics)) from None


class SslProfileStore(Protocol):
    """The sslProfiles the router has loaded (the adapter keeps them)."""

    def sections(self) -> Iterable[conf.SslProfileSection]:
        """Every loaded profile's section, in order."""
        ...

    def load(self, section: conf.SslProfileSection) -> None:
        """Read ``section``'s files as the profile of its name: a new profile,
        or one that replaces the profile of that name for the connections its
        listeners and connectors make from then on.

        Raises:
            ManagementError: 400 naming the profile and the file that does not
                load; nothing changed.
        """
        ...

    def users(self, name: str) -> list[str]:
        """The listeners and connectors that use profile ``name``, described."""
        ...

    def remove(self, name: str) -> None:
        """Forget profile ``name`` (no listener or connector uses it)."""
        ...


class SslProfiles(ReadOnly):
    """``sslProfile``: the profiles the router has loaded, as conf sections.

    CREATE loads one and checks it, so listeners and connectors created after
    it may name it.  UPDATE changes its attributes and reads its files again
    (with no attribute, only the files: rotation in place); the listeners and
    connectors using it take the new files for the connections they make from
    then on, and open connections keep theirs.  A profile that does not load
    is refused with 400 and the previous one stays, as stored and as loaded.
    DELETE refuses a profile a listener or connector uses.  The password is
    never read back, so a null ``password`` in an UPDATE (a row read and sent
    back) keeps it.
    """

    _CONF_NAME = "sslProfile"
    _SECRETS = ("password",)

    def __init__(self, store: SslProfileStore) -> None:
        self._store = store

    def _row(self, section: conf.SslProfileSection) -> Row:
        row: Row = conf.section_attributes(section)
        row["identity"] = f"{self._CONF_NAME}/{section.name}"
        for secret in self._SECRETS:
            if row.get(secret) is not None:
                row[secret] = None
        return row

    def _section(self, row: Row) -> conf.SslProfileSection:
        for section in self._store.sections():
            if self._row(section)["identity"] == row["identity"]:
                return section
        raise ManagementError(404, f"No entity with identity={row['identity']}")

    def rows(self) -> Iterable[Row]:
        return [self._row(section) for section in self._store.sections()]

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        if name is None and attributes.get("name") is None:
            raise ManagementError(400, f"A {self._CONF_NAME} needs a name")
        section = section_from(self._CONF_NAME, name, attributes)
        assert isinstance(section, conf.SslProfileSection)
        self._store.load(section)
        return Changed(row=self._row(section))

    def update(self, row: Row, attributes: dict[str, object]) -> Changed:
        current = self._section(row)
        merged = {key: value for key, value in conf.section_attributes(current).items()
                  if value is not None}
        for key, value in attributes.items():
            if value is not None:
                merged[key] = value
            elif key not in self._SECRETS:
                merged.pop(key, None)  # back to its default
        section = section_from(self._CONF_NAME, None, merged)
        assert isinstance(section, conf.SslProfileSection)
        self._store.load(section)
        return Changed(row=self._row(section))

    def delete(self, row: Row) -> tuple[()]:
        section = self._section(row)
        name = section.name or ""
        users = self._store.users(name)
        if users:
            raise ManagementError(
                400, f"sslProfile {name!r} is used by {', '.join(users)}; delete "
                     f"{'it' if len(users) == 1 else 'them'} first")
        self._store.remove(name)
        return ()


class ConfigLinkRoutes(ReadOnly):
    """``router.config.linkRoute``: the configured link routes and their status;
    CREATE takes effect at once on the connections that serve it, DELETE stops
    new attaches taking it (links it already routed stay up)."""

    def __init__(self, router: Router, clock: Callable[[], float]) -> None:
        self._router = router
        self._clock = clock

    def rows(self) -> Iterable[Row]:
        rows = []
        scoped = {id(r) for routes in self._router.link_routing.scoped.values() for r in routes}
        for route in self._router.link_routing.table:
            if id(route) in scoped:
                continue  # router.connection.linkRoute
            row: Row = _with_aliases(conf.section_attributes(
                conf.LinkRouteSection.from_spec(route.spec)), conf.LinkRouteSection)
            row["identity"] = route.identity
            row["name"] = route.label
            row.update(as_row(LinkRouteStatus(operStatus=route.oper_status)))
            rows.append(row)
        return rows

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        section = section_from("linkRoute", name, attributes, strings_typed=True)
        assert isinstance(section, conf.LinkRouteSection)
        try:
            route, effects = self._router.link_routing.add_route(section.to_spec(), self._clock())
        except LinkRouteError as error:
            raise ManagementError(400, str(error)) from None
        row = next(r for r in self.rows() if r["identity"] == route.identity)
        return Changed(row=row, effects=tuple(effects))

    def delete(self, row: Row) -> tuple[Effect, ...]:
        routing = self._router.link_routing
        for route in routing.table:
            if route.identity == row["identity"]:
                return tuple(routing.remove_route(route, self._clock()))
        raise ManagementError(404, f"No entity with identity={row['identity']}")


class ConnectionLinkRoutes(ReadOnly):
    """``router.connection.linkRoute``: link routes a connection made over
    itself and alone serves (docs/networks.md#link-routes-through-an-edge);
    each request sees only those of the connection it came on.

    Args:
        router: the routing core.
        requester: the core connection the request being served came on.
        clock: monotonic clock (seconds).
    """

    def __init__(self, router: Router, requester: Callable[[], object],
                 clock: Callable[[], float]) -> None:
        self._router = router
        self._requester = requester
        self._clock = clock

    def _conn(self) -> Connection | None:
        conn = self._requester()
        return conn if isinstance(conn, Connection) else None

    def rows(self) -> Iterable[Row]:
        conn = self._conn()
        if conn is None:
            return []
        return [{"identity": route.identity, "name": route.label, "pattern": route.pattern,
                 "direction": route.spec.direction.value, "containerId": conn.container_id}
                for route in self._router.link_routing.scoped.get(conn, [])]

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        conn = self._conn()
        if conn is None:
            raise ManagementError(400, "Can only create via management CREATE over the "
                                       "connection that serves it")
        pattern = attributes.get("pattern")
        direction = attributes.get("direction")
        if not isinstance(pattern, str) or not pattern:
            raise ManagementError(400, "Pattern field is required")
        if direction not in ("in", "out"):
            raise ManagementError(400, "direction must be 'in' or 'out'")
        try:
            route, effects = self._router.link_routing.add_connection_route(
                conn, name=name or f"connection/{conn.conn_id}/linkRoute/{pattern}",
                pattern=pattern, direction=Direction(direction), now=self._clock())
        except (LinkRouteError, AddressError) as error:
            raise ManagementError(400, str(error)) from None
        row = next(r for r in self.rows() if r["identity"] == route.identity)
        return Changed(row=row, effects=tuple(effects))

    def delete(self, row: Row) -> tuple[Effect, ...]:
        conn = self._conn()
        routing = self._router.link_routing
        if conn is not None:
            for route in routing.scoped.get(conn, []):
                if route.identity == row["identity"]:
                    return tuple(routing.remove_connection_route(conn, route, self._clock()))
        raise ManagementError(404, f"No entity with identity={row['identity']}")


class ConfigAutoLinks(ReadOnly):
    """``router.config.autoLink``: the auto-links and where each is in its life."""

    def __init__(self, router: Router) -> None:
        self._router = router

    def rows(self) -> Iterable[Row]:
        rows = []
        for autolink in self._router.auto_links.table:
            row: Row = _with_aliases(conf.section_attributes(
                conf.AutoLinkSection.from_spec(autolink.spec)), conf.AutoLinkSection)
            row["identity"] = autolink.identity
            row["name"] = autolink.label
            row.update(as_row(AutoLinkStatus(
                operStatus=autolink.state.value, lastError=autolink.last_error,
                linkRef=None if autolink.link_id is None else str(autolink.link_id))))
            rows.append(row)
        return rows

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        section = section_from("autoLink", name, attributes, strings_typed=True)
        assert isinstance(section, conf.AutoLinkSection)
        try:
            autolink, effects = self._router.auto_links.add(section.to_spec())
        except AutoLinkError as error:
            raise ManagementError(400, str(error)) from None
        row = next(r for r in self.rows() if r["identity"] == autolink.identity)
        return Changed(row=row, effects=tuple(effects))

    def delete(self, row: Row) -> tuple[Effect, ...]:
        for autolink in self._router.auto_links.table:
            if autolink.identity == row["identity"]:
                return tuple(self._router.auto_links.remove(autolink))
        raise ManagementError(404, f"No entity with identity={row['identity']}")


class ConfigExchanges(ReadOnly):
    """``router.config.exchange``: the exchanges and what each did with its
    messages; CREATE and DELETE change them at once (a DELETE takes the
    exchange's bindings with it), with qdrouterd's refusals."""

    def __init__(self, router: Router) -> None:
        self._router = router

    def rows(self) -> Iterable[Row]:
        rows = []
        for exchange in self._router.exchanges:
            row: Row = conf.section_attributes(conf.ExchangeSection.from_spec(exchange.spec))
            row["identity"] = exchange.identity
            row.update(as_row(ExchangeStatistics(
                bindingCount=len(exchange.bindings), receivedCount=exchange.received,
                droppedCount=exchange.dropped, forwardedCount=exchange.forwarded,
                divertedCount=exchange.diverted)))
            rows.append(row)
        return rows

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        if name is None and "name" not in attributes:
            raise ManagementError(400, "exchange requires a unique name")
        section = section_from("exchange", name, attributes, strings_typed=True)
        assert isinstance(section, conf.ExchangeSection)
        try:
            exchange, effects = self._router.exchanges.add_exchange(section.to_spec())
        except AddressError as error:
            raise ManagementError(400, str(error)) from None
        row = next(r for r in self.rows() if r["identity"] == exchange.identity)
        return Changed(row=row, effects=tuple(effects))

    def delete(self, row: Row) -> tuple[Effect, ...]:
        for exchange in self._router.exchanges:
            if exchange.identity == row["identity"]:
                return tuple(self._router.exchanges.remove_exchange(exchange))
        raise ManagementError(404, f"No entity with identity={row['identity']}")


class ConfigBindings(ReadOnly):
    """``router.config.binding``: the bindings of every exchange and the
    messages each matched; CREATE and DELETE change them at once."""

    def __init__(self, router: Router) -> None:
        self._router = router

    def rows(self) -> Iterable[Row]:
        rows = []
        for binding in self._router.exchanges.bindings():
            row: Row = conf.section_attributes(conf.BindingSection.from_spec(binding.spec))
            row["identity"] = binding.identity
            row["name"] = binding.spec.name or f"binding/{binding.identity}"
            if row.get("bindingKey") is None:
                row["bindingKey"] = "#"  # what it matches, as qdrouterd shows it
            row.update(as_row(BindingStatistics(matchedCount=binding.matched)))
            rows.append(row)
        return rows

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        section = section_from("binding", name, attributes, strings_typed=True)
        assert isinstance(section, conf.BindingSection)
        try:
            binding, effects = self._router.exchanges.add_binding(section.to_spec())
        except AddressError as error:
            raise ManagementError(400, str(error)) from None
        row = next(r for r in self.rows() if r["identity"] == binding.identity)
        return Changed(row=row, effects=tuple(effects))

    def delete(self, row: Row) -> tuple[Effect, ...]:
        for binding in self._router.exchanges.bindings():
            if binding.identity == row["identity"]:
                return tuple(self._router.exchanges.remove_binding(binding))
        raise ManagementError(404, f"No entity with identity={row['identity']}")
