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

from addressing import AddressClass, AddressTable, Distribution, classify
from router.core.effects import (
    AttachRefused,
    BlockSender,
    CreditEffect,
    IncomingAccepted,
    OutgoingAccepted,
    UnblockSender,
)
from router.core.ids import LinkId
from router.core.records import AddressRecord, Connection, InLink, OutLink

log = logging.getLogger(__name__)

COORDINATOR = "$coordinator"
WAYPOINT_CAPABILITY = "qd.waypoint"
_KEY_CACHE_MAX = 4096

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
    """

    def __init__(
        self,
        *,
        router_id: str,
        addresses: AddressTable,
        default_distribution: Distribution = Distribution.BALANCED,
        token: Callable[[], str],
    ) -> None:
        self.router_id = router_id
        self.addresses = addresses
        self.default_distribution = default_distribution
        self._token = token
        self.records: dict[str, AddressRecord] = {}
        self._next_link_id = 0
        self._key_cache: dict[str, str | None] = {}

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
        if key.cls is AddressClass.MOBILE:
            record = self._record(key.key, address, distribution, priority)
        elif key.cls is AddressClass.LOCAL:
            record = self._record(key.key, address, Distribution.BALANCED, priority)
        else:
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
    ) -> tuple[OutgoingAccepted | AttachRefused, list[CreditEffect]]:
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
        if key.cls is AddressClass.MOBILE:
            record = self._record(key.key, address, distribution, priority)
        elif key.cls is AddressClass.LOCAL:
            record = self._record(key.key, address, Distribution.BALANCED, priority)
        else:
            return NO_ROUTE, []
        link = OutLink(self._link_id(), conn, name=name, address=address, record=record,
                       presettle=presettle, handle=handle)
        effects: list[CreditEffect] = []
        if not record.consumers:
            effects = [UnblockSender(link=s) for s in record.senders if s.blocked]
            for sender in record.senders:
                sender.blocked = False
        record.consumers.append(link)
        conn.out_links[link.link_id] = link
        return OutgoingAccepted(link=link, address=address), effects

    # -- detach -----------------------------------------------------------

    def link_detached(self, link: InLink | OutLink) -> list[CreditEffect]:
        """Unbind a link.  The adapter has already settled its deliveries."""
        effects: list[CreditEffect] = []
        record = link.record
        if isinstance(link, OutLink):
            link.conn.out_links.pop(link.link_id, None)
            consumers = link.record.consumers
            if link in consumers:
                consumers.remove(link)
                if not consumers:
                    for sender in link.record.senders:
                        if not sender.blocked:
                            sender.blocked = True
                            effects.append(BlockSender(link=sender))
        else:
            link.conn.in_links.pop(link.link_id, None)
            if record is not None and link in record.senders:
                record.senders.remove(link)
        if record is not None and not record.in_use:
            self.records.pop(record.key, None)
            log.debug("address record %s freed", record)
        return effects

    def connection_closed(self, conn: Connection) -> list[CreditEffect]:
        """Unbind every link of a connection that went away."""
        effects: list[CreditEffect] = []
        links: list[InLink | OutLink] = [*conn.in_links.values(), *conn.out_links.values()]
        for link in links:
            effects.extend(self.link_detached(link))
        return [e for e in effects if e.link.conn is not conn]

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
            key = rk.key if rk.cls in (AddressClass.MOBILE, AddressClass.LOCAL) else None
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
