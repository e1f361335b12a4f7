"""The ``Router`` façade: binding links to address records and deciding credit.

Owns the address records of one router, the treatment of each address, the
attach decisions of reference 5.1 and the credit transitions of 5.2.  It is
pure: no clock, no sockets, no proton.  Per-message forwarding does not go
through here (see ``router.core.forwarder``); this object only changes the
structures the forwarder reads, and only on attach and detach.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from addressing import AddressClass, AddressTable, Distribution, RoutingKey, classify
from router.core.effects import (
    AttachRefused,
    BlockSender,
    Effect,
    IncomingAccepted,
    OutgoingAccepted,
    UnblockSender,
)
from router.core.ids import LinkId
from router.core.network import Network
from router.core.records import (
    PRIORITIES,
    AddressRecord,
    Connection,
    InLink,
    OutLink,
    RouterLink,
)

log = logging.getLogger(__name__)

COORDINATOR = "$coordinator"
WAYPOINT_CAPABILITY = "qd.waypoint"
_KEY_CACHE_MAX = 4096
_ROUTABLE = (AddressClass.MOBILE, AddressClass.LOCAL, AddressClass.ROUTER)

NOT_FOUND = AttachRefused(condition="amqp:not-found", description="Node not found")
NO_ROUTE = AttachRefused(
    condition="qd:no-route-to-dest", description="No route to the destination node"
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

# Treatment numbers used as hints in MAUs (reference 4.4).
HINTS = {
    Distribution.MULTICAST: 1,
    Distribution.CLOSEST: 2,
    Distribution.BALANCED: 3,
    Distribution.UNAVAILABLE: 5,
}
_FROM_HINT = {1: Distribution.MULTICAST, 2: Distribution.CLOSEST, 3: Distribution.BALANCED}


def waypoint_ordinal(capabilities: Iterable[str]) -> int | None:
    """The N of a ``qd.waypoint`` (1) or ``qd.waypoint.N`` capability, if any."""
    for cap in capabilities:
        if cap == WAYPOINT_CAPABILITY:
            return 1
        if cap.startswith(WAYPOINT_CAPABILITY + "."):
            tail = cap[len(WAYPOINT_CAPABILITY) + 1 :]
            if tail.isdigit() and 1 <= int(tail) <= 9:
                return int(tail)
    return None


class Router:
    """Address records and link binding for one router.

    Args:
        router_id: this router's id (container id, ``_topo`` addresses).
        addresses: the configured ``address`` entries.
        default_distribution: treatment of addresses no entry matches.
        token: source of the random part of dynamic addresses (injected so
            tests are deterministic).
        interior: run the routing protocol with other routers.
        instance: this router's start time (epoch seconds), for the protocol.
        timers: the router entity's protocol intervals (``hello_interval_s``...).
    """

    def __init__(
        self,
        *,
        router_id: str,
        addresses: AddressTable,
        default_distribution: Distribution = Distribution.BALANCED,
        token: Callable[[], str],
        interior: bool = False,
        instance: int = 0,
        timers: dict[str, float] | None = None,
    ) -> None:
        self.router_id = router_id
        self.addresses = addresses
        self.default_distribution = default_distribution
        self._token = token
        self.records: dict[str, AddressRecord] = {}
        self._next_link_id = 0
        self._key_cache: dict[str, str | None] = {}
        self.network: Network | None = None
        if interior:
            self.network = Network(router_id=router_id, instance=instance, records=self.records,
                                   record_for=self._remote_record, release_record=self._release,
                                   **(timers or {}))

    # -- attach -----------------------------------------------------------

    def _link_id(self) -> LinkId:
        self._next_link_id += 1
        return LinkId(self._next_link_id)

    def _treatment(self, address: str) -> tuple[Distribution, int | None, tuple[int, int]]:
        spec = self.addresses.lookup(address)
        if spec is None:
            return self.default_distribution, None, (0, 0)
        return spec.distribution, spec.priority, spec.phases

    def _record(self, key: str, address: str, distribution: Distribution,
                priority: int | None) -> AddressRecord:
        record = self.records.get(key)
        if record is None:
            record = AddressRecord(key, address, distribution, priority)
            self.records[key] = record
            log.debug("address record %s created", record)
        return record

    def _bind(self, key: RoutingKey, address: str, distribution: Distribution,
              priority: int | None) -> AddressRecord | None:
        """The record a link to ``address`` binds to: mobile addresses take
        their treatment, local ones (dynamic, ``_local/``) are balanced, and
        other classes cannot be bound (reference 4.4)."""
        if key.cls is AddressClass.MOBILE:
            return self._record(key.key, address, distribution, priority)
        if key.cls is AddressClass.LOCAL:
            return self._record(key.key, address, Distribution.BALANCED, priority)
        return None

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
    ) -> IncomingAccepted | AttachRefused:
        """A client sender attached: bind it (reference 5.1 step 4, 6, 7)."""
        if coordinator:
            return NO_COORDINATOR
        if dynamic:
            address = f"amqp:/_$temp.{self._token()}"
        if not address:
            link = InLink(self._link_id(), conn, name=name, address=None, record=None,
                          handle=handle)
            conn.in_links[link.link_id] = link
            return IncomingAccepted(link=link, address=None)
        distribution, priority, (ingress, _) = self._treatment(address)
        ordinal = waypoint_ordinal(capabilities)
        if ordinal is not None:
            ingress = ordinal
        if distribution is Distribution.UNAVAILABLE:
            return NOT_FOUND
        key = classify(address, router_id=self.router_id, phase=ingress)
        record = self._bind(key, address, distribution, priority)
        if record is None:
            return NO_ROUTE
        link = InLink(self._link_id(), conn, name=name, address=address, record=record,
                      phase=ingress, handle=handle)
        record.senders.append(link)
        conn.in_links[link.link_id] = link
        return IncomingAccepted(link=link, address=address)

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
        """A client receiver attached: bind it as a consumer (reference 5.1 step 5-7)."""
        if dynamic:
            address = f"amqp:/_topo/0/{self.router_id}/temp.{self._token()}"
        if not address:
            return NO_ROUTE, []
        distribution, priority, (_, egress) = self._treatment(address)
        ordinal = waypoint_ordinal(capabilities)
        if ordinal is not None:
            egress = ordinal - 1
        if distribution is Distribution.UNAVAILABLE and not dynamic:
            return NOT_FOUND, []
        key = classify(address, router_id=self.router_id, phase=egress)
        record = self._bind(key, address, distribution, priority)
        if record is None:
            return NO_ROUTE, []
        link = OutLink(self._link_id(), conn, name=name, address=address, record=record,
                       presettle=presettle, handle=handle)
        effects: list[Effect] = []
        if not record.consumers:
            effects = [UnblockSender(link=s) for s in record.senders if s.blocked]
            for sender in record.senders:
                sender.blocked = False
            if self.network is not None and key.cls is AddressClass.MOBILE:
                effects.extend(self.network.address_added(key.key, HINTS[distribution], now))
        record.consumers.append(link)
        conn.out_links[link.link_id] = link
        return OutgoingAccepted(link=link, address=address), effects

    # -- detach -----------------------------------------------------------

    def link_detached(self, link: InLink | OutLink, now: float = 0.0) -> list[Effect]:
        """Unbind a link.  The adapter has already settled its deliveries."""
        effects: list[Effect] = []
        record = link.record
        if isinstance(link, OutLink):
            link.conn.out_links.pop(link.link_id, None)
            if link.record is not None and link in link.record.consumers:
                consumers = link.record.consumers
                consumers.remove(link)
                if not consumers:
                    effects.extend(self._last_consumer_left(link.record, now))
        else:
            link.conn.in_links.pop(link.link_id, None)
            if record is not None and link in record.senders:
                record.senders.remove(link)
        if record is not None:
            self._release(record)
        return effects

    def _last_consumer_left(self, record: AddressRecord, now: float) -> list[Effect]:
        effects: list[Effect] = []
        if self.network is not None and record.key[0] == "M":
            effects.extend(self.network.address_removed(record.key, now))
        if not record.has_destination:
            for sender in record.senders:
                if not sender.blocked:
                    sender.blocked = True
                    effects.append(BlockSender(link=sender))
        return effects

    def _release(self, record: AddressRecord) -> None:
        """Free a record nothing uses any more (reference 4.8)."""
        if record.in_use or record.remotes:
            return
        if self.network is not None and record.key in self.network.remote:
            return
        if self.records.get(record.key) is record:
            del self.records[record.key]
            log.debug("address record %s freed", record)

    def connection_closed(self, conn: Connection, now: float = 0.0) -> list[Effect]:
        """Unbind every link of a connection that went away."""
        effects: list[Effect] = []
        links: list[InLink | OutLink] = [*conn.in_links.values(), *conn.out_links.values()]
        for link in links:
            effects.extend(self.link_detached(link, now))
        if self.network is not None:
            effects.extend(self.network.link_lost(conn, now))
        return [e for e in effects
                if not isinstance(e, (BlockSender, UnblockSender)) or e.link.conn is not conn]

    # -- the network -----------------------------------------------------------

    def _remote_record(self, key: str, hint: int) -> AddressRecord | None:
        """The record of a key another router advertised (reference 9.6, 4.4)."""
        record = self.records.get(key)
        if record is not None:
            return record
        if key[0] == "R":
            return self._record(key, f"_topo/0/{key[1:]}", Distribution.CLOSEST, None)
        if key[0] != "M" or len(key) < 3:
            return None  # link-route and edge keys come with their issues
        address = key[2:]
        spec = self.addresses.lookup(address)
        if spec is not None and spec.distribution is not Distribution.UNAVAILABLE:
            return self._record(key, address, spec.distribution, spec.priority)
        distribution = _FROM_HINT.get(hint, self.default_distribution)
        if distribution is Distribution.UNAVAILABLE:
            distribution = Distribution.BALANCED
        return self._record(key, address, distribution, None)

    def router_link(self, conn: Connection, cost: int) -> RouterLink:
        """The network's view of an inter-router connection (created on first use)."""
        assert self.network is not None
        link = self.network.link_of(conn)
        return link if link is not None else self.network.add_link(conn, cost)

    def control_link_attached(self, conn: Connection, *, outgoing: bool, name: str,
                              handle: object, cost: int, now: float
                              ) -> tuple[InLink | OutLink, list[Effect]]:
        """A router-control link (capability ``qd.router``) attached."""
        rlink = self.router_link(conn, cost)
        if outgoing:
            out = OutLink(self._link_id(), conn, name=name, address="", record=None,
                          presettle=True, handle=handle)
            out.prepared = True
            rlink.control = out
            conn.out_links[out.link_id] = out
            assert self.network is not None
            return out, self.network.control_attached(rlink, now)
        link = InLink(self._link_id(), conn, name=name, address=None, record=None,
                      handle=handle)
        link.router_link = rlink
        link.control = True
        link.transit = True
        rlink.control_in = link
        conn.in_links[link.link_id] = link
        return link, []

    def data_link_attached(self, conn: Connection, *, outgoing: bool, name: str,
                           handle: object, cost: int) -> InLink | OutLink:
        """An inter-router data link (capability ``qd.router-data``) attached;
        its priority is its attach order in its direction (reference 9.1)."""
        rlink = self.router_link(conn, cost)
        if outgoing:
            out = OutLink(self._link_id(), conn, name=name, address="", record=None,
                          handle=handle)
            out.prepared = True
            for priority in range(PRIORITIES):
                if rlink.data[priority] is None:
                    rlink.data[priority] = out
                    break
            conn.out_links[out.link_id] = out
            return out
        link = InLink(self._link_id(), conn, name=name, address=None, record=None, handle=handle)
        link.router_link = rlink
        link.transit = True
        rlink.data_in += 1
        conn.in_links[link.link_id] = link
        return link

    def tick(self, now: float) -> list[Effect]:
        return [] if self.network is None else self.network.tick(now)

    def next_deadline(self) -> float | None:
        return None if self.network is None else self.network.next_deadline()

    # -- anonymous routing -------------------------------------------------

    def lookup(self, to: str, phase: int = 0) -> AddressRecord | Unavailable | None:
        """The record a message for ``to`` goes to (anonymous senders, 5.3 step 8).

        ``None``: no record, so the message finds no destination.  Called per
        message on anonymous links, so the routing key of each address string
        is cached.
        """
        cache_key = to if phase == 0 else f"{phase}:{to}"
        key = self._key_cache.get(cache_key, "")
        if key == "":
            rk = classify(to, router_id=self.router_id, phase=phase)
            key = rk.key if rk.cls in _ROUTABLE else None
            if len(self._key_cache) >= _KEY_CACHE_MAX:
                self._key_cache.clear()
            self._key_cache[cache_key] = key
        if key is None:
            return None
        record = self.records.get(key)
        if record is not None:
            return record
        if key[0] == "M" and self._treatment(to)[0] is Distribution.UNAVAILABLE:
            return UNAVAILABLE
        return None
