"""The ``Router`` façade: binding links to address records and deciding credit.

Owns the attach and detach decisions of docs/routing.md#attaching-links, the
credit transitions of docs/routing.md#credit and the life of a connection,
and composes the parts that do the rest, each built with what it needs:
the address records and their treatment (``router.core.addresses``), the
routing protocol and the other routers (``router.core.network``, which also
binds inter-router links), an edge's uplink or an interior's edges
(``router.core.edges``), link routes (``router.core.linkrouting``) and
auto-links (``router.core.autolinks``).  It is pure: no clock, no sockets,
no proton.  Per-message forwarding does not go through here (the adapter's
``router.adapter.forwarding``); this object only changes the structures the
forwarder reads, and only on attach and detach.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from addressing import (
    AddressTable,
    BindingSpec,
    Direction,
    Distribution,
    ExchangeSpec,
    Role,
    classify,
)
from autolink import AutoLinkSpec
from linkroute import Detach, LinkRouteSpec
from router.core.addresses import Addresses
from router.core.autolinks import AutoLinking
from router.core.destinations import demand_changed, senders_changed
from router.core.edges import (
    EDGE_KEY,
    HEARTBEAT_ADDRESS,
    LOOKUP_ADDRESS,
    EdgeHosts,
    Uplink,
)
from router.core.effects import (
    AttachRefused,
    CreditEffect,
    Effect,
    IncomingAccepted,
    OutgoingAccepted,
)
from router.core.exchanges import Exchanging
from router.core.ids import LinkId
from router.core.linkrouting import LinkRouting
from router.core.network import FROM_HINT, HINTS, Network
from router.core.records import (
    AddressRecord,
    Connection,
    InLink,
    OutLink,
    RoutedEnd,
)
from router.core.routing import ProtocolTimers

log = logging.getLogger(__name__)

COORDINATOR = "$coordinator"
WAYPOINT_CAPABILITY = "qd.waypoint"
FALLBACK_CAPABILITY = "qd.fallback"
# First letters of link-route keys (docs/brokers.md#link-route-keys): prefix in/out,
# pattern in/out.
LINK_ROUTE_CLASSES = "CDEF"
# Keys other routers learn of this router's destinations: mobile addresses
# and the edge routers attached here (docs/networks.md#mobile-addresses).
_ADVERTISED = "MH"

NOT_FOUND = AttachRefused(condition="amqp:not-found", description="Node not found")
NO_ROUTE = AttachRefused(
    condition="qd:no-route-to-dest", description="No route to the destination node"
)
SERVICE_TAKES_NO_RECEIVERS = AttachRefused(
    condition="amqp:not-allowed",
    description="The router's heartbeat and address lookup services take messages only",
    null_terminus=True,
)
EDGES_ONLY = AttachRefused(
    condition="amqp:unauthorized-access",
    description="The address lookup service answers edge routers only",
    null_terminus=True,
)
NO_COORDINATOR = AttachRefused(
    condition="amqp:precondition-failed",
    description=(
        "The router can't coordinate transactions by itself, a linkRoute to a "
        "coordinator must be configured to use transactions."
    ),
    null_terminus=True,
)


class Unavailable:
    """Marker: the address's treatment is ``unavailable``."""

    def __repr__(self) -> str:
        return "UNAVAILABLE"


UNAVAILABLE = Unavailable()



def _edge_senders(record: AddressRecord) -> bool:
    """Whether a sender of ``record``, or of the address it is the fallback
    of, is on an edge connection."""
    return any(s.conn.role is Role.EDGE for rec in (record, record.primary)
               if rec is not None for s in rec.senders)


def waypoint_ordinal(capabilities: Iterable[str]) -> int | None:
    """The N of a ``qd.waypoint`` (1) or ``qd.waypoint.N`` capability, if any."""
    for cap in capabilities:
        if cap == WAYPOINT_CAPABILITY:
            return 1
        if cap.startswith(WAYPOINT_CAPABILITY + "."):
            tail = cap[len(WAYPOINT_CAPABILITY) + 1 :]
            if tail.isascii() and tail.isdigit() and 1 <= int(tail) <= 9:
                return int(tail)
    return None



def _drawn(next_id: Callable[[], LinkId]) -> Iterator[int]:
    """Identities drawn from ``next_id`` one at a time, as they are asked for."""
    while True:
        yield int(next_id())

class Router:
    """Link binding and the parts of one router's core.

    Args:
        router_id: this router's id (container id, ``_topo`` addresses).
        addresses: the configured ``address`` entries.
        default_distribution: treatment of addresses no entry matches.
        token: source of the random part of dynamic addresses (injected so
            tests are deterministic).
        interior: run the routing protocol with other routers.
        edge: this is an edge router: ``edge`` connections are uplinks
            (docs/networks.md#edge-routers).
        instance: this router's start time (epoch seconds), for the protocol.
        timers: the routing protocol's intervals (the router entity's).
        auto_links: the configured auto-links.
        link_routes: the configured link routes.
        allow_resumable_link_route: route attaches whose terminus outlives
            its connection (``allowResumableLinkRoute``).
        redelivery_limit: the ``redeliveryLimit`` of mobile addresses whose
            ``address`` entry does not give one
            (docs/routing.md#re-forwarding-released-deliveries).
        exchanges, bindings: the configured exchanges and their bindings
            (docs/routing.md#exchanges), already checked together.
    """

    def __init__(
        self,
        *,
        router_id: str,
        addresses: AddressTable,
        default_distribution: Distribution = Distribution.BALANCED,
        token: Callable[[], str],
        interior: bool = False,
        edge: bool = False,
        instance: int = 0,
        timers: ProtocolTimers | None = None,
        auto_links: Iterable[AutoLinkSpec] = (),
        link_routes: Iterable[LinkRouteSpec] = (),
        allow_resumable_link_route: bool = True,
        redelivery_limit: int = 0,
        exchanges: Iterable[ExchangeSpec] = (),
        bindings: Iterable[BindingSpec] = (),
    ) -> None:
        self.router_id = router_id
        self.redelivery_limit = redelivery_limit
        self._token = token
        self._next_link_id = 0
        self.edge_mode = edge
        #: The address records and their treatment; ``records`` is theirs.
        self.addresses = Addresses(router_id=router_id, table=addresses,
                                   default_distribution=default_distribution,
                                   redelivery_limit=redelivery_limit, edge_mode=edge)
        self.records = self.addresses.records
        self.network: Network | None = None
        if interior:
            self.network = Network(router_id=router_id, instance=instance, records=self.records,
                                   record_for=self.remote_record,
                                   release_record=self.release_record,
                                   link_id=self._link_id, timers=timers)
        #: An edge router's uplink; an interior router's edges.
        self.uplink: Uplink | None = None
        self.edges: EdgeHosts | None = None
        if edge:
            self.uplink = Uplink(router_id=router_id, records=self.records,
                                 link_id=self._link_id, token=token,
                                 edge_record=self.addresses.edge_record,
                                 phases=self.addresses.phases)
        #: Identities of configuration entities (auto-links, link routes,
        #: addresses): drawn from the links' sequence, as qdrouterd's routing
        #: core numbers its links and configuration entities from one counter.
        self.config_ids: Iterator[int] = _drawn(self._link_id)
        self.auto_links = AutoLinking(auto_links, link_id=self._link_id, ids=self.config_ids,
                                      bind=self.addresses.bind_auto_link,
                                      add_consumer=self.consumer_added,
                                      add_sender=self.sender_added)
        self.link_routing = LinkRouting(link_routes, link_id=self._link_id, records=self.records,
                                        network=self.network, ids=self.config_ids,
                                        allow_resumable=allow_resumable_link_route,
                                        offer=self.uplink.offer_entry if self.uplink else None)
        self.exchanges = Exchanging(
            router_id=router_id, link_id=self._link_id, ids=self.config_ids,
            bind=lambda address, phase: self.addresses.bind_auto_link(address, phase, False),
            add_consumer=self.consumer_added, detach=self.link_detached)
        for exchange in exchanges:
            self.exchanges.add_exchange(exchange)  # nothing to tell yet: no link, no peer
        for binding in bindings:
            self.exchanges.add_binding(binding)
        if interior and not edge:
            self.edges = EdgeHosts(link_id=self._link_id,
                                   downlink_record=self.addresses.downlink_record,
                                   link_route=self.link_routing.reach, network=self.network)

    # -- address records ----------------------------------------------------

    def _link_id(self) -> LinkId:
        self._next_link_id += 1
        return LinkId(self._next_link_id)

    def in_tenant(self, conn: Connection, address: str) -> str:
        """``address`` in ``conn``'s namespace (``Addresses.in_tenant``)."""
        return self.addresses.in_tenant(conn, address)

    def release_record(self, record: AddressRecord) -> None:
        """Free a record nothing uses any more (docs/routing.md#address-lifetime): no
        link, no destination beyond this router, no router advertising it; a
        primary and its fallback are freed together."""
        pair = [r for r in (record, record.fallback, record.primary) if r is not None]
        for rec in pair:
            if rec.in_use or rec.remotes:
                return
            if self.network is not None and rec.key in self.network.remote:
                return
        for rec in pair:
            if self.records.get(rec.key) is rec:
                del self.records[rec.key]
                self.addresses.forget(rec)
                log.debug("address record %s freed", rec)
                if rec.key[0] in LINK_ROUTE_CLASSES:
                    self.link_routing.forget(rec.key)

    def consumer_added(self, record: AddressRecord, link: OutLink, now: float) -> list[Effect]:
        """Bind a router-outgoing link as a destination of ``record``: its first
        consumer unblocks its senders and is advertised to the network and,
        on an edge, to the interior."""
        first = not record.consumers
        record.consumers.append(link)
        if not first:
            if _edge_senders(record):
                # An edge's sender may count this consumer and not the others
                # (docs/networks.md#edge-routers).
                return senders_changed(record)
            demand_changed(record)
            return []
        effects: list[Effect] = []
        if self.network is not None and record.key[0] in _ADVERTISED:
            effects.extend(self.network.address_added(record.key, HINTS[record.distribution],
                                                      now))
        effects.extend(senders_changed(record))
        if self.uplink is not None:
            effects.extend(self.uplink.consumers_changed(record))
        return effects

    def consumer_removed(self, record: AddressRecord, link: OutLink,
                         now: float) -> list[Effect]:
        """Unbind a destination of ``record``; its last blocks the senders."""
        consumers = record.consumers
        if link not in consumers:
            return []
        consumers.remove(link)
        if consumers:
            if _edge_senders(record):
                return senders_changed(record)
            demand_changed(record)
            return []
        effects: list[Effect] = []
        if self.network is not None and record.key[0] in _ADVERTISED:
            effects.extend(self.network.address_removed(record.key, now))
        effects.extend(senders_changed(record))
        if self.uplink is not None:
            effects.extend(self.uplink.consumers_changed(record))
        return effects

    def sender_added(self, record: AddressRecord) -> list[Effect]:
        """A producer link was bound to or left ``record``: an edge makes it
        known upward."""
        if self.uplink is None:
            return []
        return self.uplink.senders_changed(record)

    # -- edge routers (docs/networks.md#edge-routers) ----------------------------------

    def own_link_answered(self, link: InLink | OutLink, address: str | None) -> list[Effect]:
        """The peer answered a link the core made (``AttachOwnLink``);
        ``address`` is the terminus address it answered with."""
        if self.uplink is not None:
            return self.uplink.answered(link, address)
        return []

    def edge_lookup(self, handle: object, address: str, receiving: bool,
                    now: float) -> list[Effect] | None:
        """On an edge router, a client's attach to ``address`` that no link
        route of the edge's own serves is first looked up at the interior
        (docs/networks.md#link-routes-through-an-edge): the effects that ask,
        then ``LookupAnswered`` for ``handle``.  None: go on at once."""
        uplink = self.uplink
        if uplink is None:
            return None
        entry = self.link_routing.table.match(address,
                                              Direction.IN if receiving else Direction.OUT)
        if entry is not None and entry.rotation:
            return None
        return uplink.lookup(handle, address, receiving, now)

    def service_received(self, link: InLink, data: bytes,
                         now: float) -> tuple[bool, list[Effect]]:
        """A message on one of the edge services' links (not a routed
        message): whether the router takes it (False: a request it refuses,
        which its sender sees REJECTED, as qdrouterd's services do), and
        what it makes the router do."""
        if self.uplink is not None:
            return True, self.uplink.received(link, data)
        if self.edges is not None:
            return self.edges.received(link, data, now)
        return True, []

    # -- attach -----------------------------------------------------------

    def incoming_link_attached(
        self,
        conn: Connection,
        *,
        name: str,
        address: str | None,
        dynamic: bool = False,
        capabilities: tuple[str, ...] = (),
        coordinator: bool = False,
        handle: object = None,
        now: float = 0.0,
    ) -> tuple[IncomingAccepted | AttachRefused, list[Effect]]:
        """A client sender attached: bind it (docs/routing.md#attaching-links)."""
        if coordinator:
            return NO_COORDINATOR, []
        if conn.edge is not None and self.edges is not None:
            own, effects = self.edges.attach(conn, outgoing=False, name=name, address=address,
                                             capabilities=capabilities, handle=handle, now=now)
            if isinstance(own, InLink):
                return IncomingAccepted(link=own, address=address), effects
        elif self.edges is not None and address in (HEARTBEAT_ADDRESS, LOOKUP_ADDRESS):
            # As qdrouterd's interior services: heartbeats from any
            # connection (it is closed when they stop), lookups from edges
            # only (docs/networks.md#edge-routers).
            if address == LOOKUP_ADDRESS:
                return EDGES_ONLY, []
            peer = self.edges.watch(conn, now)
            return IncomingAccepted(link=self.edges.service_attached(
                peer, address, name=name, handle=handle), address=address), []
        if dynamic:
            address = f"amqp:/_$temp.{self._token()}"
        if not address:
            link = InLink(self._link_id(), conn, name=name, address=None, record=None,
                          handle=handle)
            conn.in_links[link.link_id] = link
            return IncomingAccepted(link=link, address=None), []
        if conn.tenant is not None and not dynamic:
            address = self.in_tenant(conn, address)
        distribution, spec = self.addresses.treatment(address)
        ingress = spec.phases[0] if spec is not None else 0
        ordinal = waypoint_ordinal(capabilities)
        if ordinal is not None:
            ingress = ordinal
        fallback = FALLBACK_CAPABILITY in capabilities
        # An edge's producer for its fallback destination binds to the
        # fallback record, as in qdrouterd, so that the edge learns whether
        # fallback consumers exist beyond it (docs/networks.md#edge-routers).
        key = classify(address, router_id=self.router_id, phase=ingress,
                       fallback=fallback and conn.role is Role.EDGE, edge_mode=self.edge_mode)
        if distribution is Distribution.UNAVAILABLE and self.addresses.unavailable(key):
            return NOT_FOUND, []
        record = self.addresses.bind(key, address, distribution, spec)
        if record is None:
            return NO_ROUTE, []
        link = InLink(self._link_id(), conn, name=name, address=address, record=record,
                      phase=ingress, fallback=fallback, handle=handle)
        record.senders.append(link)
        demand_changed(record)
        conn.in_links[link.link_id] = link
        effects = self.sender_added(record)
        edge = conn.edge
        if edge is not None:
            # An edge's producer: whether the address has destinations beyond
            # it (docs/networks.md#edge-routers).
            answer = edge.tracked(link)
            if answer is not None:
                effects.append(answer)
        return IncomingAccepted(link=link, address=address), effects

    def outgoing_link_attached(
        self,
        conn: Connection,
        *,
        name: str,
        address: str | None,
        dynamic: bool = False,
        capabilities: tuple[str, ...] = (),
        presettle: bool = False,
        handle: object = None,
        now: float = 0.0,
    ) -> tuple[OutgoingAccepted | AttachRefused, list[Effect]]:
        """A client receiver attached: bind it as a consumer
        (docs/routing.md#attaching-links); with capability ``qd.fallback``, as a
        fallback destination."""
        if conn.edge is not None and self.edges is not None:
            own, effects = self.edges.attach(conn, outgoing=True, name=name, address=address,
                                             capabilities=capabilities, handle=handle, now=now)
            if isinstance(own, OutLink):
                return OutgoingAccepted(link=own, address=address), effects
        if self.edges is not None and address in (HEARTBEAT_ADDRESS, LOOKUP_ADDRESS):
            return SERVICE_TAKES_NO_RECEIVERS, []
        if dynamic:
            address = f"amqp:/_edge/{self.router_id}/temp.{self._token()}" if self.edge_mode \
                else f"amqp:/_topo/0/{self.router_id}/temp.{self._token()}"
        if not address:
            return NO_ROUTE, []
        if conn.tenant is not None and not dynamic:
            address = self.in_tenant(conn, address)
        distribution, spec = self.addresses.treatment(address)
        egress = spec.phases[1] if spec is not None else 0
        ordinal = waypoint_ordinal(capabilities)
        if ordinal is not None:
            egress = ordinal - 1
        key = classify(address, router_id=self.router_id, phase=egress,
                       fallback=FALLBACK_CAPABILITY in capabilities, edge_mode=self.edge_mode)
        if distribution is Distribution.UNAVAILABLE and not dynamic \
                and self.addresses.unavailable(key):
            return NOT_FOUND, []
        record = self.addresses.bind(key, address, distribution, spec)
        if record is None:
            return NO_ROUTE, []
        link = OutLink(self._link_id(), conn, name=name, address=address, record=record,
                       presettle=presettle, handle=handle)
        conn.out_links[link.link_id] = link
        return OutgoingAccepted(link=link, address=address), self.consumer_added(record, link,
                                                                                now)

    def in_process_attached(self, conn: Connection, address: str, name: str) -> OutLink:
        """Bind an in-process consumer of ``address`` (the management agent,
        docs/routing.md#in-process-destinations): a link with no handle,
        closest distribution, and never advertised to other routers.  The
        adapter consumes what is queued on it.
        """
        key = classify(address, router_id=self.router_id, edge_mode=self.edge_mode)
        assert key is not None
        record = self.addresses.record(key.key, address, Distribution.CLOSEST, None)
        link = OutLink(self._link_id(), conn, name=name, address=address, record=record)
        conn.out_links[link.link_id] = link
        record.consumers.append(link)
        senders_changed(record)
        return link

    def streaming_link(self, conn: Connection) -> OutLink:
        """A new link of the router's own on ``conn`` (another router, or an
        edge connection) that carries one streamed message at a time, so that
        a message still arriving does not hold up the others behind it on
        the link they share (docs/routing.md#large-messages).  What it sends
        is addressed already: it is bound to no address."""
        link = OutLink(self._link_id(), conn, name=f"qdlink.{self._token()}", address="",
                       record=None)
        link.prepared = True
        conn.out_links[link.link_id] = link
        return link

    # -- detach -----------------------------------------------------------

    def link_detached(self, link: InLink | OutLink, now: float = 0.0,
                      error: str = "") -> list[Effect]:
        """Unbind a link.  The adapter has already settled its deliveries.

        For an auto-link's link, ``error`` is why the peer detached it: the
        auto-link fails and is attached again later
        (docs/brokers.md#the-life-of-an-auto-link).
        """
        effects: list[Effect] = []
        record = link.record
        if isinstance(link, OutLink):
            link.conn.out_links.pop(link.link_id, None)
            if record is not None:
                record.retired_out += link.delivered
                effects.extend(self.consumer_removed(record, link, now))
        else:
            link.conn.in_links.pop(link.link_id, None)
            if record is not None and link in record.senders:
                record.retired_in += link.delivered
                record.senders.remove(link)
                demand_changed(record)
                effects.extend(self.sender_added(record))
        if self.uplink is not None:
            effects.extend(self.uplink.detached(link))
        elif self.edges is not None and link.conn in self.edges.peers:
            self.edges.detached(link)
            if isinstance(link, OutLink):
                effects.extend(self.edges.downlink_gone(link, now))
        if record is not None:
            self.release_record(record)
        autolink = link.autolink
        if autolink is not None and autolink.link_id == link.link_id:
            self.auto_links.detached(autolink, error, now)
        return effects

    def connection_closed(self, conn: Connection, now: float = 0.0) -> list[Effect]:
        """Unbind every link of a connection that went away, its auto-links'
        links with them (an auto-link keeps its links on other connections)."""
        effects: list[Effect] = []
        links: list[InLink | OutLink] = [*conn.in_links.values(), *conn.out_links.values()]
        for link in links:
            if link.autolink is not None:
                link.autolink = None  # its auto-link goes inactive, not failed
            effects.extend(self.link_detached(link, now))
        if self.network is not None:
            effects.extend(self.network.link_lost(conn, now))
        if conn.role is Role.EDGE and self.uplink is not None:
            effects.extend(self.uplink.closed(conn, now))
        elif self.edges is not None:
            self.edges.closed(conn)
        effects.extend(self.link_routing.connection_closed(conn, now))
        if conn.role is Role.ROUTE_CONTAINER:
            self.auto_links.connection_closed(conn)
        return [e for e in effects if not isinstance(e, CreditEffect) or e.link.conn is not conn]

    # -- route-container connections and auto-links (docs/brokers.md) ----------

    def connection_opened(self, conn: Connection, now: float = 0.0) -> list[Effect]:
        """A connection opened; a route-container connection activates the link
        routes it serves and gets the auto-links it serves attached; an edge
        connection is an uplink (on an edge router) or an edge router's
        connection (on an interior router)."""
        if conn.role is Role.EDGE:
            if self.uplink is not None:
                return self.uplink.opened(conn, now)
            if self.edges is not None:
                self.edges.opened(conn, now)
            return []
        if conn.role is not Role.ROUTE_CONTAINER:
            return []
        effects = self.link_routing.connection_opened(conn, now)
        effects.extend(self.auto_links.connection_opened(conn))
        return effects

    # -- link routes (docs/brokers.md#link-routes) ------------------------------------

    def link_routed_attach(self, conn: Connection, *, name: str, address: str,
                           receiving: bool, resumable: bool = False, handle: object = None,
                           required: bool = False
                           ) -> tuple[RoutedEnd | AttachRefused | None, list[Effect]]:
        """An attach whose address may match a link route: see ``LinkRouting.attach``."""
        if conn.tenant is not None:
            address = self.in_tenant(conn, address)
        return self.link_routing.attach(conn, name=name, address=address, receiving=receiving,
                                        resumable=resumable, handle=handle, required=required)

    def routed_answered(self, far: RoutedEnd, address: str | None, *, null: bool,
                        resumable: bool = False) -> list[Effect]:
        """The far side answered a link-routed attach."""
        return self.link_routing.answered(far, address, null=null, resumable=resumable)

    def routed_detached(self, end: RoutedEnd, detach: Detach) -> list[Effect]:
        """The peer detached one link of a link-routed pair."""
        return self.link_routing.detached(end, detach)


    # -- the network -----------------------------------------------------------

    def remote_record(self, key: str, hint: int) -> AddressRecord | None:
        """The record of a key another router advertised, made when first
        advertised (docs/networks.md#mobile-addresses, docs/routing.md#treatment)."""
        record = self.records.get(key)
        if record is not None:
            return record
        if key[0] == "R":
            return self.addresses.record(key, f"_topo/0/{key[1:]}", Distribution.CLOSEST, None)
        if key[0] in LINK_ROUTE_CLASSES:
            if not self.link_routing.learn(key):
                return None
            return self.addresses.record(key, key[1:], Distribution.BALANCED, None)
        if key[0] == "H":
            # An edge router attached to another interior router.
            distribution = FROM_HINT.get(hint, Distribution.BALANCED)
            return self.addresses.record(key, f"_edge/{key[1:]}", distribution, None)
        if key[0] != "M" or len(key) < 3:
            return None
        address = key[2:]
        distribution, spec = self.addresses.treatment(address)
        if spec is not None and distribution is not Distribution.UNAVAILABLE:
            return self.addresses.record(key, address, distribution, spec)
        distribution = FROM_HINT.get(hint, self.addresses.default_distribution)
        if distribution is Distribution.UNAVAILABLE:
            distribution = Distribution.BALANCED
        return self.addresses.record(key, address, distribution, None)

    def inter_router_connections(self) -> list[Connection]:
        """The connections to neighbouring interior routers (none on an edge
        or a standalone router): the adapter tells ``neighbor_heard`` which
        brought frames before each ``tick``."""
        return self.network.connections() if self.network is not None else []

    def neighbor_heard(self, conn: Connection, now: float) -> None:
        """Frames came on inter-router connection ``conn`` since the last tick:
        a late HELLO of the neighbour is excused while they do
        (docs/networks.md#timers)."""
        if self.network is not None:
            self.network.heard(conn, now)

    def tick(self, now: float) -> list[Effect]:
        """Timers: the routing protocol's and auto-links' retries."""
        effects = self.auto_links.tick(now)
        if self.network is not None:
            effects.extend(self.network.tick(now))
        if self.uplink is not None:
            effects.extend(self.uplink.tick(now))
        if self.edges is not None:
            effects.extend(self.edges.tick(now))
        return effects

    def next_deadline(self) -> float | None:
        """When ``tick`` is next due (asked on every turn of the event loop)."""
        deadlines = [self.auto_links.next_deadline()]
        if self.network is not None:
            deadlines.append(self.network.next_deadline())
        if self.uplink is not None:
            deadlines.append(self.uplink.next_deadline())
        if self.edges is not None:
            deadlines.append(self.edges.next_deadline())
        due = [d for d in deadlines if d is not None]
        return min(due) if due else None

    # -- anonymous routing -------------------------------------------------

    def lookup(self, to: str, phase: int = 0) -> AddressRecord | Unavailable | None:
        """The record a message for ``to`` goes to (docs/routing.md#anonymous-senders).

        ``None``: no record, so the message finds no destination.  Called per
        message on anonymous links, so the routing key of each address string
        is cached.
        """
        key = self.addresses.key_of(to, phase)
        if key is None:
            return None
        record = self.records.get(key)
        if record is not None:
            return record
        if key[0] == "M" and self.addresses.treatment(to)[0] is Distribution.UNAVAILABLE:
            return UNAVAILABLE
        if self.uplink is not None and self.uplink.active is not None:
            # An edge router sends what it has no record for up its uplink
            # (docs/networks.md#edge-routers).
            return self.records.get(EDGE_KEY)
        return None
