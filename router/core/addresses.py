"""The address records of one router, and how each address is treated.

Owns the records by routing key (``AddressRecord``, created on first use and
kept while anything uses them), each address's treatment from the
configured ``address`` entries or the router's default
(docs/routing.md#treatment), the record a link to an address binds to
(mobile, local, another router's or an edge's node; an address with
``enableFallback`` has its primary and fallback records made together,
docs/routing.md#fallback), a multi-tenant connection's namespace
(docs/routing.md#multi-tenant-listeners) and the routing key of a
message's ``to`` (cached: it is asked per message on anonymous links).

Freeing a record is the router's (``Router.release_record``): whether
anything still uses it depends on the network and the link routes too.
Pure: no clock, no I/O; nothing here returns effects.
"""

from __future__ import annotations

import logging
from typing import Final

from addressing import (
    MAX_PHASE,
    AddressClass,
    AddressSpec,
    AddressTable,
    Distribution,
    RoutingKey,
    classify,
)
from router.core.edges.wire import EDGE_KEY
from router.core.records import AddressRecord, Connection

log = logging.getLogger(__name__)

#: x-opt-qd.phase of a message for a fallback destination: 'F' - '0'
#: (docs/routing.md#fallback).
FALLBACK_PHASE: Final = 22
_KEY_CACHE_MAX: Final = 4096
_ROUTABLE: Final = (AddressClass.MOBILE, AddressClass.LOCAL, AddressClass.ROUTER,
                    AddressClass.EDGE)


class Addresses:
    """The records and the treatment of addresses.

    Args:
        router_id: this router's id (its ``_topo`` addresses).
        table: the configured ``address`` entries.
        default_distribution: the treatment of addresses no entry matches.
        redelivery_limit: the ``redeliveryLimit`` of mobile addresses whose
            entry gives none (docs/routing.md#re-forwarding-released-deliveries).
        edge_mode: this is an edge router (its own addresses are ``_edge/``'s).
    """

    def __init__(self, *, router_id: str, table: AddressTable,
                 default_distribution: Distribution = Distribution.BALANCED,
                 redelivery_limit: int = 0, edge_mode: bool = False) -> None:
        self.router_id = router_id
        self.table = table
        self.default_distribution = default_distribution
        self.redelivery_limit = redelivery_limit
        self.edge_mode = edge_mode
        self.records: dict[str, AddressRecord] = {}
        self._key_cache: dict[str, str | None] = {}

    def classify(self, address: str, *, phase: int = 0,
                 fallback: bool = False) -> RoutingKey | None:
        """The routing key of ``address`` at ``phase`` on this router."""
        return classify(address, router_id=self.router_id, phase=phase, fallback=fallback,
                        edge_mode=self.edge_mode)

    def in_tenant(self, conn: Connection, address: str) -> str:
        """``address`` as the router keeps it for ``conn``: a mobile address of a
        connection on a multi-tenant listener lives in its vhost's namespace,
        ``<vhost>/<address>`` (docs/routing.md#multi-tenant-listeners)."""
        tenant = conn.tenant
        if tenant is None or not address:
            return address
        key = self.classify(address)
        if key is None or key.cls is not AddressClass.MOBILE:
            return address
        return tenant + address

    def unavailable(self, key: RoutingKey | None) -> bool:
        """An address whose treatment is unavailable is refused unless its
        record exists already with another one, as the router's own
        ``$management`` does (qdrouterd decides a treatment when it makes an
        address's record, docs/routing.md#treatment)."""
        record = None if key is None else self.records.get(key.key)
        return record is None or record.distribution is Distribution.UNAVAILABLE

    def treatment(self, address: str) -> tuple[Distribution, AddressSpec | None]:
        spec = self.table.lookup(address)
        if spec is None:
            return self.default_distribution, None
        return spec.distribution, spec

    def phases(self, address: str) -> tuple[int, int] | None:
        """The ingress and egress phases the address's entry gives, if any."""
        spec = self.table.lookup(address)
        if spec is None:
            return None
        return spec.phases[0], spec.phases[1]

    def record(self, key: str, address: str, distribution: Distribution,
               spec: AddressSpec | None) -> AddressRecord:
        """Find or create the record of ``key``.  An address with
        ``enableFallback`` has its primary (``M0``) and fallback (``MF``,
        balanced) records created and freed together (docs/routing.md#fallback)."""
        record = self.records.get(key)
        if record is not None:
            return record
        if spec is None or not spec.enable_fallback or key[:2] not in ("M0", "MF"):
            return self._new_record(key, address, distribution, spec)
        text = key[2:]
        primary = self.records.get("M0" + text) \
            or self._new_record("M0" + text, address, distribution, spec)
        fallback = self.records.get("MF" + text) \
            or self._new_record("MF" + text, address, Distribution.BALANCED, spec)
        primary.fallback, fallback.primary = fallback, primary
        return primary if key[1] == "0" else fallback

    def _new_record(self, key: str, address: str, distribution: Distribution,
                    spec: AddressSpec | None) -> AddressRecord:
        priority = spec.priority if spec is not None else None
        limit = spec.redelivery_limit if spec is not None else None
        if limit is None:
            # The router's default is for mobile addresses; the router's own
            # (``_topo``, ``_edge``, dynamic) answer where they are.
            limit = self.redelivery_limit if key[:1] == "M" else 0
        if distribution is Distribution.MULTICAST:
            limit = 0  # copies are never sent again
        record = AddressRecord(key, address, distribution, priority, limit)
        self.records[key] = record
        log.debug("address record %s created", record)
        return record

    def bind(self, key: RoutingKey, address: str, distribution: Distribution,
             spec: AddressSpec | None) -> AddressRecord | None:
        """The record a link to ``address`` binds to: mobile addresses take
        their treatment, local ones (dynamic, ``_local/``) are balanced, a
        known router's address binds to that router's record, and other
        classes cannot be bound (docs/routing.md#treatment)."""
        if key.cls is AddressClass.MOBILE:
            return self.record(key.key, address, distribution, spec)
        if key.cls is AddressClass.LOCAL:
            return self.record(key.key, address, Distribution.BALANCED, spec)
        if key.cls in (AddressClass.ROUTER, AddressClass.EDGE):
            # Another router's node (``_topo/0/B/$management``, an edge's
            # ``_edge/E/$management``): its record exists while that router
            # is reachable.
            return self.records.get(key.key)
        return None

    def bind_auto_link(self, address: str, phase: int, fallback: bool) -> AddressRecord:
        """The record an auto-link's link binds to: its address at its phase
        (the fallback record for a fallback ``out`` link)."""
        distribution, spec = self.treatment(address)
        if distribution is Distribution.UNAVAILABLE:
            distribution = Distribution.BALANCED
        key = self.classify(address, phase=phase, fallback=fallback)
        assert key is not None, "an auto-link address is always a mobile address"
        record = self.bind(key, address, distribution, spec)
        assert record is not None, "an auto-link address is always a mobile address"
        return record

    def edge_record(self) -> AddressRecord:
        """An edge router's ``L_edge`` record: the way up its uplink."""
        return self.record(EDGE_KEY, "_edge", Distribution.CLOSEST, None)

    def downlink_record(self, edge_id: str) -> AddressRecord:
        """An interior router's ``H<edge-id>`` record of an edge attached to it."""
        return self.record("H" + edge_id, f"_edge/{edge_id}", Distribution.BALANCED, None)

    def forget(self, record: AddressRecord) -> None:
        """Drop what the lookup caches hold for a freed record's address.

        Both caches (``key_of``'s and the address table's) are bounded, but a
        router whose clients keep making dynamic addresses (a requester's
        reply-to each session) would otherwise fill them with addresses no
        message will name again, one a few hundred bytes, over hours on a
        router that sees few of them (docs/reliability.md#what-grows)."""
        address = record.address
        self._key_cache.pop(address, None)
        key = record.key
        if key[:1] == "M" and key[1:2] != "0":
            phase = FALLBACK_PHASE if key[1:2] == "F" else int(key[1:2])
            self._key_cache.pop(f"{phase}:{address}", None)
        self.table.forget(address)

    @property
    def cached(self) -> int:
        """How many lookups the two caches hold (``key_of``'s and the table's)."""
        return len(self._key_cache) + self.table.cached

    def key_of(self, to: str, phase: int = 0) -> str | None:
        """The routing key a message for ``to`` at ``phase`` goes to, or None
        (an address no router routes, a phase no router sends); cached."""
        cache_key = to if phase == 0 else f"{phase}:{to}"
        key = self._key_cache.get(cache_key, "")
        if key == "":
            if phase == FALLBACK_PHASE:
                rk = self.classify(to, fallback=True)
            elif 0 <= phase <= MAX_PHASE:
                rk = self.classify(to, phase=phase)
            else:  # a phase no router sends: nowhere to go
                rk = None
            key = rk.key if rk is not None and rk.cls in _ROUTABLE else None
            if len(self._key_cache) >= _KEY_CACHE_MAX:
                self._key_cache.clear()
            self._key_cache[cache_key] = key
        return key


__all__ = ["FALLBACK_PHASE", "Addresses"]
