"""Link routing in one router: attaches that match a link route, and their
pairs.  The domain itself (specs, matching, a pair's life) is the
``linkroute`` package's; this module applies it to this router's
connections and records.

Owns, for one router, the link-route table (``linkroute.LinkRouteTable``):
advertising a link route's key while a route-container connection serves
it (docs/brokers.md#link-route-keys), learning the keys other routers advertise, turning a
matching attach into a pair of links (``linkroute.route_attach``: to a
local container, or one hop on toward a router that advertises the route),
and turning what happens to each pair (``linkroute.RoutedLink``) into
effects for the adapter.  Messages on routed links are relayed by the
adapter without parsing; nothing here runs per message.

Pure: no proton, no clock; it returns effects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from addressing import Direction, Role
from linkroute import (
    LINK_ROUTE_HINT,
    NO_ROUTE,
    Answer,
    AnswerNear,
    Detach,
    LinkRoute,
    LinkRouteSpec,
    LinkRouteTable,
    PairEvent,
    PairState,
    Refusal,
    RoutedLink,
    RouteEntry,
    Side,
    ToContainer,
    client_address,
    route_attach,
    routed_name,
)
from router.core.effects import (
    AnswerAttach,
    AttachRefused,
    DetachRouted,
    Effect,
    ForwardAttach,
)
from router.core.ids import LinkId
from router.core.network import Network
from router.core.records import AddressRecord, Connection, RemoteTarget, RoutedEnd

log = logging.getLogger(__name__)


class LinkRouting:
    """The link routes of one router and the pairs of links they made.

    Args:
        specs: the configured link routes.
        link_id: gives the next link id (shared with the router's other links).
        records: the router's address records (link-route keys learnt from
            other routers have one, holding the routers that advertise them).
        network: the network side, for advertising keys (None: standalone).
        allow_resumable: the router's ``allowResumableLinkRoute``.
        offer: an edge router offers the link routes it serves to its
            interior (``True``) and withdraws them (``False``).
    """

    def __init__(self, specs: Iterable[LinkRouteSpec], *, link_id: Callable[[], LinkId],
                 records: dict[str, AddressRecord], network: Network | None,
                 allow_resumable: bool = True,
                 offer: Callable[[RouteEntry[Connection], bool], list[Effect]] | None = None,
                 ids: Iterator[int] | None = None) -> None:
        self.table: LinkRouteTable[Connection] = LinkRouteTable(specs, ids=ids)
        self._link_id = link_id
        self._records = records
        self._network = network
        self._offer = offer
        self.allow_resumable = allow_resumable
        #: The link routes each connection made over itself (``connection.linkRoute``).
        self.scoped: dict[Connection, list[LinkRoute[Connection]]] = {}

    def reach(self, address: str, direction: Direction) -> tuple[bool, bool]:
        """Whether ``address`` is link-routed in ``direction`` here, and whether
        that route has somewhere to go (an edge's lookup)."""
        entry = self.table.match(address, direction)
        if entry is None:
            return False, False
        record = self._records.get(entry.key)
        return True, bool(entry.rotation) or bool(record is not None and record.remotes)

    # -- route-container connections and the network ------------------------------

    def connection_opened(self, conn: Connection, now: float) -> list[Effect]:
        """Activate the link routes ``conn`` serves; advertise newly served keys."""
        effects: list[Effect] = []
        for entry in self.table.connection_opened(conn):
            effects.extend(self._served(entry, now))
        return effects

    def add_route(self, spec: LinkRouteSpec, now: float) -> tuple[LinkRoute[Connection],
                                                                    list[Effect]]:
        """Add a link route at run time; the open connections serving it take
        it up at once (raises ``LinkRouteError`` for a name already taken)."""
        route = self.table.add(spec)
        effects: list[Effect] = []
        for entry in self.table.activate(route):
            effects.extend(self._served(entry, now))
        return route, effects

    def remove_route(self, route: LinkRoute[Connection], now: float) -> list[Effect]:
        """Delete a link route: new attaches no longer take it (links it already
        routed stay up), and a key no connection serves any more is withdrawn."""
        effects: list[Effect] = []
        for entry in self.table.remove(route):
            effects.extend(self._withdrawn(entry, now))
        return effects

    def add_connection_route(self, conn: Connection, *, name: str, pattern: str,
                             direction: Direction, now: float
                             ) -> tuple[LinkRoute[Connection], list[Effect]]:
        """A link route that ``conn`` alone serves, made over it (management's
        ``connection.linkRoute``: how an edge router offers the link routes of
        its own brokers, docs/networks.md#link-routes-through-an-edge).  It goes
        with the connection.  Raises ``LinkRouteError`` for a bad pattern or a
        name already taken."""
        route = self.table.add(LinkRouteSpec(name=name, pattern=pattern, direction=direction))
        self.scoped.setdefault(conn, []).append(route)
        effects: list[Effect] = []
        for entry in self.table.serve_only(route, conn):
            effects.extend(self._served(entry, now))
        return route, effects

    def remove_connection_route(self, conn: Connection, route: LinkRoute[Connection],
                                now: float) -> list[Effect]:
        """Delete a link route ``conn`` made."""
        routes = self.scoped.get(conn, [])
        if route in routes:
            routes.remove(route)
        if not routes:
            self.scoped.pop(conn, None)
        return self.remove_route(route, now)

    def _served(self, entry: RouteEntry[Connection], now: float) -> list[Effect]:
        """``entry`` gained its first destination here: other routers learn it
        (an interior's network, an edge's interior)."""
        effects: list[Effect] = []
        if self._network is not None:
            effects.extend(self._network.address_added(entry.key, LINK_ROUTE_HINT, now))
        if self._offer is not None:
            effects.extend(self._offer(entry, True))
        return effects

    def _withdrawn(self, entry: RouteEntry[Connection], now: float) -> list[Effect]:
        """``entry`` lost its last destination here."""
        effects: list[Effect] = []
        if self._network is not None:
            effects.extend(self._network.address_removed(entry.key, now))
        if self._offer is not None:
            effects.extend(self._offer(entry, False))
        return effects

    def learn(self, key: str) -> bool:
        """Another router advertises ``key``; False when it is no link-route key."""
        return self.table.learn(key) is not None

    def forget(self, key: str) -> None:
        self.table.forget(key)

    # -- attaches ---------------------------------------------------------------------

    def attach(self, conn: Connection, *, name: str, address: str, receiving: bool,
               resumable: bool = False, handle: object = None, required: bool = False
               ) -> tuple[RoutedEnd | AttachRefused | None, list[Effect]]:
        """A client (or a router on the way) attached a link: link-route it
        if its address matches a link route (docs/routing.md#attaching-links,
        docs/brokers.md#where-a-routed-attach-goes).

        Args:
            conn: where the attach arrived.
            name: its link name.
            address: the container-facing terminus address (the target of a
                sender, the source of a receiver; ``$coordinator`` for a
                transaction coordinator).
            receiving: the router receives on the link (a client sender).
            resumable: the client's terminus outlives its connection.
            handle: the adapter's link.
            required: the attach must be link-routed (a dynamic terminus asking
                for ``x-opt-qd.address``, docs/routing.md#dynamic-addresses): no
                match is no route.

        Returns:
            None when no link route matches (message routing applies); a
            refusal; or the near end of a new pair, with the far attach to make.
        """
        direction = Direction.IN if receiving else Direction.OUT
        entry = self.table.match(address, direction)
        if entry is None:
            if required:
                return AttachRefused(condition=NO_ROUTE.condition,
                                     description=NO_ROUTE.description), []
            return None, []
        record = self._records.get(entry.key)
        remotes: list[RemoteTarget] = record.remotes if record is not None else []
        decision = route_attach(entry, address, remotes, resumable=resumable,
                                allow_resumable=self.allow_resumable)
        if isinstance(decision, Refusal):
            log.info("[%r] link-routed attach %s %r refused: %s", conn, name, address,
                     decision.condition)
            return AttachRefused(condition=decision.condition,
                                 description=decision.description), []
        if isinstance(decision, ToContainer):
            return self._pair(conn, decision.peer, name=name, address=decision.address,
                              receiving=receiving, resumable=resumable, handle=handle,
                              route=decision.spec, client_address=address)
        return self._pair(conn, decision.router.link.conn, name=name, address=address,
                          receiving=receiving, resumable=resumable, handle=handle)

    def forward_direct(self, conn: Connection, far_conn: Connection, *, name: str,
                       address: str, receiving: bool, resumable: bool = False,
                       handle: object = None) -> tuple[RoutedEnd, list[Effect]]:
        """Link-route an attach straight to ``far_conn``, address unchanged: an
        edge router's client attach for a link route its interior has
        (docs/networks.md#link-routes-through-an-edge)."""
        return self._pair(conn, far_conn, name=name, address=address, receiving=receiving,
                          resumable=resumable, handle=handle)

    def _pair(self, conn: Connection, far_conn: Connection, *, name: str, address: str,
              receiving: bool, resumable: bool, handle: object,
              route: LinkRouteSpec | None = None, client_address: str | None = None
              ) -> tuple[RoutedEnd, list[Effect]]:
        """The near end of a new pair, and the far attach to make on ``far_conn``
        (``address``, rewritten from the client's ``client_address`` when given)."""
        client_address = client_address or address
        near = RoutedEnd(self._link_id(), conn, name=name, receiving=receiving, handle=handle,
                         address=client_address)
        far = RoutedEnd(self._link_id(), far_conn, name=routed_name(
            name, None if conn.role is Role.INTER_ROUTER else conn.container_id),
            receiving=not receiving, address=address)
        far.route = route
        near.partner, far.partner = far, near
        near.pair = far.pair = RoutedLink(near=near, far=far, near_resumable=resumable)
        conn.routed[near.link_id] = near
        far_conn.routed[far.link_id] = far
        log.debug("[%r] %s %r link-routed to %r", conn, name, address, far_conn)
        return near, [ForwardAttach(near=near, far=far, name=far.name, address=address)]

    def answered(self, far: RoutedEnd, address: str | None, *, null: bool,
                 resumable: bool = False) -> list[Effect]:
        """The far side answered the attach: ``address`` is its container-facing
        terminus address; ``null``: it answered with a null terminus."""
        pair = far.pair
        assert pair is not None
        pair.far_resumable = resumable
        return self._act(pair, PairEvent.REFUSED if null else PairEvent.ANSWERED,
                         address=address)

    def detached(self, end: RoutedEnd, detach: Detach) -> list[Effect]:
        """The peer detached ``end``; the other side gets the same detach."""
        pair = end.pair
        if pair is None or pair.state is PairState.CLOSED:
            return []
        event = PairEvent.NEAR_DETACHED if end is pair.near else PairEvent.FAR_DETACHED
        return self._act(pair, event, detach=detach)

    def connection_closed(self, conn: Connection, now: float) -> list[Effect]:
        """A connection went away: its pairs' other sides get routed-link-lost,
        and the link routes it alone served stop being advertised."""
        effects: list[Effect] = []
        for end in list(conn.routed.values()):
            pair = end.pair
            if pair is None or pair.state is PairState.CLOSED:
                continue
            event = PairEvent.NEAR_LOST if end is pair.near else PairEvent.FAR_LOST
            effects.extend(self._act(pair, event))
        conn.routed.clear()
        for route in self.scoped.pop(conn, []):
            effects.extend(self.remove_route(route, now))
        if conn.role is Role.ROUTE_CONTAINER:
            for entry in self.table.connection_closed(conn):
                effects.extend(self._withdrawn(entry, now))
        return effects

    def _act(self, pair: RoutedLink[RoutedEnd], event: PairEvent, *,
             detach: Detach | None = None, address: str | None = None) -> list[Effect]:
        effects: list[Effect] = []
        for action in pair.fire(event, detach):
            if isinstance(action, AnswerNear):
                null = action.answer is Answer.NULL
                answer = address
                route = pair.far.route
                if answer is not None and route is not None:
                    answer = client_address(answer, route)
                tenant = pair.near.conn.tenant
                if answer is not None and tenant is not None and answer.startswith(tenant):
                    answer = answer[len(tenant):]  # the client's own namespace
                effects.append(AnswerAttach(near=pair.near, address=None if null else answer,
                                            null=null))
            else:
                end = pair.near if action.side is Side.NEAR else pair.far
                d = action.detach
                effects.append(DetachRouted(end=end, condition=d.condition,
                                            description=d.description, closed=d.closed))
        if pair.state is PairState.CLOSED:
            for end in (pair.near, pair.far):
                end.conn.routed.pop(end.link_id, None)
        return effects


__all__ = ["LinkRouting"]
