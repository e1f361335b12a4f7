"""The link routes a router knows: configured ones, learnt ones, and who serves them.

Owns matching an attach's address to a link route (docs/brokers.md#link-routes:
one pattern table per direction, link routes before message routing), the
address key each pattern is advertised under (docs/brokers.md#link-route-keys:
``C``/``D`` plus the prefix for a prefix-style pattern, ``E``/``F`` plus the
pattern otherwise), which route-container connections serve each configured link
route (``active`` while at least one does), and the patterns other routers
advertise, which make attaches link-routed here even without configuration.

It must not know what a connection or a router is: destinations are the
caller's opaque peers, and remote routers are chosen by the caller from the
key.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

import attrs

from addressing import (
    AddressError,
    Direction,
    PatternTable,
    RouteContainer,
    normalize_pattern,
    prefix_pattern,
    serves,
    strip_address,
)
from linkroute.spec import LinkRouteError, LinkRouteSpec

log = logging.getLogger(__name__)

P = TypeVar("P", bound=RouteContainer)

_PREFIX_CLASS = {Direction.IN: "C", Direction.OUT: "D"}
_PATTERN_CLASS = {Direction.IN: "E", Direction.OUT: "F"}
_KEY_DIRECTION = {"C": Direction.IN, "D": Direction.OUT, "E": Direction.IN, "F": Direction.OUT}
_GLOB_TAIL = ("/#", ".#")

LINK_ROUTE_HINT = 4
"""The treatment number link-route keys carry in MAUs (qdrouterd's linkBalanced)."""


def route_key(pattern: str, direction: Direction) -> str:
    """The address key a stored pattern is advertised under (docs/brokers.md#link-route-keys).

    A pattern with no ``*`` whose only ``#`` ends it is prefix-style:
    ``a.b/#`` in direction ``in`` is ``Ca.b``; any other pattern keeps its
    text: ``a.*.b`` out is ``Fa.*.b``.
    """
    if pattern.endswith(_GLOB_TAIL):
        prefix = pattern[:-2]
        words = prefix.replace("/", ".").split(".")
        if "*" not in words and "#" not in words:
            return _PREFIX_CLASS[direction] + prefix
    return _PATTERN_CLASS[direction] + pattern


def key_pattern(key: str) -> tuple[str, Direction] | None:
    """The stored pattern and direction of a link-route key another router
    advertised, or None when ``key`` is no valid link-route key."""
    direction = _KEY_DIRECTION.get(key[:1])
    text = key[1:]
    if direction is None or not text:
        return None
    try:
        pattern = prefix_pattern(text) if key[0] in "CD" else normalize_pattern(text)
    except AddressError:
        return None
    return pattern, direction


@attrs.define(eq=False)
class LinkRoute(Generic[P]):
    """One configured link route and the open connections that serve it."""

    spec: LinkRouteSpec
    identity: str
    pattern: str
    peers: list[P] = attrs.field(factory=list)

    @property
    def label(self) -> str:
        return self.spec.name or self.identity

    @property
    def oper_status(self) -> str:
        """``active`` while a connection serves it (qdrouterd's ``operStatus``)."""
        return "active" if self.peers else "inactive"


@attrs.define(eq=False)
class RouteEntry(Generic[P]):
    """One pattern in one direction: the configured link routes that share it
    and whether other routers advertise it.

    ``rotation`` holds the serving connections in the order attaches use
    them (round robin across containers, docs/brokers.md#where-a-routed-attach-goes).
    """

    pattern: str
    direction: Direction
    key: str
    routes: list[LinkRoute[P]] = attrs.field(factory=list)
    learnt: bool = False
    rotation: list[P] = attrs.field(factory=list)

    def route_of(self, peer: P) -> LinkRoute[P] | None:
        """The configured link route through which ``peer`` serves this entry."""
        for route in self.routes:
            if any(p is peer for p in route.peers):
                return route
        return None

    def next_peer(self) -> P | None:
        """The serving connection the next attach goes to; rotates."""
        rotation = self.rotation
        if not rotation:
            return None
        peer = rotation[0]
        if len(rotation) > 1:
            rotation.append(rotation.pop(0))
        return peer


class LinkRouteTable(Generic[P]):
    """Configured and learnt link routes, one pattern table per direction.

    Args:
        specs: the configured link routes.
        ids: where identities come from (shared with the router's other
            configuration entities, as qdrouterd numbers them); ``1, 2, ...`` by default.
    """

    def __init__(self, specs: Iterable[LinkRouteSpec] = (), *,
                 ids: Iterator[int] | None = None) -> None:
        self._tables: dict[Direction, PatternTable[RouteEntry[P]]] = {
            Direction.IN: PatternTable(), Direction.OUT: PatternTable()}
        self._routes: list[LinkRoute[P]] = []
        # Route-container connections now open, for link routes added at run time.
        self._open: list[P] = []
        self._ids = itertools.count(1) if ids is None else ids
        for spec in specs:
            self.add(spec)

    def __iter__(self) -> Iterator[LinkRoute[P]]:
        return iter(self._routes)

    def __len__(self) -> int:
        return len(self._routes)

    def _entry(self, pattern: str, direction: Direction) -> RouteEntry[P]:
        table = self._tables[direction]
        entry = table.get(pattern)
        if entry is None:
            entry = RouteEntry(pattern=pattern, direction=direction,
                               key=route_key(pattern, direction))
            table.add(pattern, entry)
        return entry

    def add(self, spec: LinkRouteSpec) -> LinkRoute[P]:
        """Add a configured link route (inactive until a connection serves it).

        Raises:
            LinkRouteError: another link route has the same name.
        """
        if spec.name is not None and any(r.spec.name == spec.name for r in self._routes):
            raise LinkRouteError(f"name conflicts with an existing entity: {spec.name!r}")
        if spec.prefix is not None:
            pattern = prefix_pattern(spec.prefix)
        else:
            assert spec.pattern is not None
            pattern = normalize_pattern(spec.pattern)
        route: LinkRoute[P] = LinkRoute(spec=spec, identity=str(next(self._ids)),
                                        pattern=pattern)
        self._routes.append(route)
        self._entry(pattern, spec.direction).routes.append(route)
        return route

    def entries(self) -> Iterator[RouteEntry[P]]:
        for table in self._tables.values():
            for _, entry in table:
                yield entry

    def match(self, address: str, direction: Direction) -> RouteEntry[P] | None:
        """The link route an attach for ``address`` in ``direction`` takes, if any.

        ``direction`` is ``in`` for a client sender (the router receives),
        ``out`` for a client receiver.
        """
        return self._tables[direction].match(strip_address(address))

    # -- connections -------------------------------------------------------------

    def connection_opened(self, peer: P) -> list[RouteEntry[P]]:
        """A route-container connection opened: the entries it is now the
        first local destination of (their keys become advertised)."""
        self._open.append(peer)
        gained: list[RouteEntry[P]] = []
        for route in self._routes:
            self._serve(route, peer, gained)
        return gained

    def activate(self, route: LinkRoute[P]) -> list[RouteEntry[P]]:
        """A link route added at run time: the open connections that serve it
        take it up; returns the entries that gained their first destination."""
        gained: list[RouteEntry[P]] = []
        for peer in self._open:
            self._serve(route, peer, gained)
        return gained

    def serve_only(self, route: LinkRoute[P], peer: P) -> list[RouteEntry[P]]:
        """A link route that ``peer`` alone serves (one made over that
        connection, whose spec names no container): returns the entry when it
        gained its first destination."""
        gained: list[RouteEntry[P]] = []
        self._serve(route, peer, gained, scoped=True)
        return gained

    def _serve(self, route: LinkRoute[P], peer: P, gained: list[RouteEntry[P]],
               scoped: bool = False) -> None:
        spec = route.spec
        if not scoped and not serves(peer, container_id=spec.container_id,
                                     connection=spec.connection):
            return
        route.peers.append(peer)
        entry = self._entry(route.pattern, spec.direction)
        if not any(p is peer for p in entry.rotation):
            if not entry.rotation:
                gained.append(entry)
            entry.rotation.append(peer)
        where = f"connection {spec.connection}" if spec.connection is not None \
            else f"container {spec.container_id}" if spec.container_id is not None \
            else "the connection that made it"
        log.info("Link Route Activated '%s' on %s", route.label, where)

    def remove(self, route: LinkRoute[P]) -> list[RouteEntry[P]]:
        """Delete a configured link route.  Links it already routed stay up;
        new attaches no longer take it.  Returns the entry when it lost its
        last local destination (its key is no longer advertised)."""
        self._routes.remove(route)
        spec = route.spec
        table = self._tables[spec.direction]
        entry = table.get(route.pattern)
        if entry is None:
            return []
        entry.routes.remove(route)
        had_destination = bool(entry.rotation)
        entry.rotation = [p for p in entry.rotation
                          if any(any(q is p for q in r.peers) for r in entry.routes)]
        if not entry.routes and not entry.learnt:
            table.remove(route.pattern)
        log.info("Link Route Deleted '%s'", route.label)
        return [entry] if had_destination and not entry.rotation else []

    def connection_closed(self, peer: P) -> list[RouteEntry[P]]:
        """A connection closed: the entries it was the last local destination of."""
        self._open = [p for p in self._open if p is not peer]
        lost = []
        for route in self._routes:
            if not any(p is peer for p in route.peers):
                continue
            route.peers = [p for p in route.peers if p is not peer]
            entry = self._entry(route.pattern, route.spec.direction)
            if any(p is peer for p in entry.rotation):
                entry.rotation = [p for p in entry.rotation if p is not peer]
                if not entry.rotation:
                    lost.append(entry)
            log.info("Link Route Deactivated '%s'", route.label)
        return lost

    # -- other routers -------------------------------------------------------------

    def learn(self, key: str) -> RouteEntry[P] | None:
        """Another router advertises link-route ``key``: attaches matching its
        pattern are link-routed here too (docs/brokers.md#link-route-keys)."""
        parsed = key_pattern(key)
        if parsed is None:
            return None
        entry = self._entry(*parsed)
        if not entry.learnt:
            entry.learnt = True
            log.info("link route %s learnt from the network", key)
        return entry

    def forget(self, key: str) -> None:
        """No router advertises ``key`` any more."""
        parsed = key_pattern(key)
        if parsed is None:
            return
        pattern, direction = parsed
        table = self._tables[direction]
        entry = table.get(pattern)
        if entry is None or not entry.learnt:
            return
        entry.learnt = False
        if not entry.routes:
            table.remove(pattern)


__all__ = ["LINK_ROUTE_HINT", "LinkRoute", "LinkRouteTable", "RouteEntry", "key_pattern",
           "route_key"]
