"""Neighbours, known routers, link-state exchange and routes (ROUTER_LS).

See docs/networks.md#control-messages and docs/networks.md#link-state-and-paths.

Owns the node tracker: this router's link state and ``ls_seq``; one
``RouterNode`` per known router (mask-bit index, instance, protocol version,
link state, neighbour link, sync flags, the address keys attributed to it);
RA/LSU/LSR handling; neighbour and link-state expiry; node deletion; flux
mode; when to recompute routes and announce ``RoutesChanged``.

Must not: send HELLOs or track the ``seen`` set (``hello``), compose or
interpret MAU/MAR (``mobile``), decode bytes, or read the clock: every
method takes ``now``.

Deliberate departures from qdrouterd's ``node.py``, each harmless to peers:

* an LSR triggered by an RA is sent at once only when the router is
  reachable (else as soon as it is), and copies of the same RA
  arriving within a second (flooding delivers several) trigger only one;
* losing a connection drops the neighbour only if it is the connection the
  neighbour was last heard on;
* the deletion count restarts when a node stops being deletable, so it
  really takes three consecutive ticks;
* unreachable routers lose their route (qdrouterd keeps a stale next hop);
* a change is acted on when it happens (``settle``), not on the next tick:
  routes at once, a new ``ls_seq`` at most once a second between ticks, an
  unanswered LSR sent again when the route to its router changes.
"""

from __future__ import annotations

import logging
from typing import Final

import attrs

from router.core.routing.effects import (
    Effect,
    MobileAddressesChanged,
    RouterAdded,
    RouterLost,
    RoutesChanged,
    SendControl,
)
from router.core.routing.hello import LATE_HELLO_FACTOR, hello_lost
from router.core.routing.logs import RouterLogger
from router.core.routing.messages import (
    LinkState,
    LinkStateRequest,
    LinkStateUpdate,
    RouterAdvertisement,
)
from router.core.routing.paths import Routes, compute_routes

__all__ = ["Neighbor", "NodeRecord", "NodeTracker", "RouterNode"]

log = logging.getLogger(__name__)

# Keep an unreachable, unlisted router this many ticks before deleting it.
_DELETE_AFTER_TICKS: Final = 3
# Minimum spacing of LSRs to one router that RAs (and their flooded copies) trigger.
_LSR_HOLDOFF_S: Final = 1.0
# Minimum spacing of ``ls_seq`` bumps made between ticks (see ``NodeTracker.settle``).
_LS_HOLDDOWN_S: Final = 1.0


@attrs.frozen(kw_only=True)
class Neighbor:
    """An established neighbour: the connection it is on and the link cost."""

    id: str
    link_id: int
    cost: int


@attrs.frozen(kw_only=True)
class NodeRecord:
    """A read-only view of one known router (management ``router.node``,
    docs/networks.md#link-state-and-paths).

    The local router has ``index`` 0, ``is_self`` True and no route fields.
    ``next_hop`` is the neighbour the route goes through (a neighbour is its
    own next hop here; management shows null for it); ``link_id`` is set for
    neighbours. ``last_topology_change`` is set on the local record only.
    """

    id: str
    index: int
    is_self: bool
    protocol_version: int | None
    instance: int | None
    peers: tuple[tuple[str, int], ...]
    ls_seq: int
    mobile_seq: int
    next_hop: str | None
    link_id: int | None
    cost: int | None
    valid_origins: tuple[str, ...]
    last_topology_change: float | None = None


@attrs.define
class RouterNode:
    """What this router knows about one other router (mutable, tracker-owned)."""

    id: str
    index: int
    version: int | None
    instance: int | None
    ls_last_seen: float
    peers: dict[str, int] = attrs.field(factory=dict)
    ls_seq: int = 0
    link_id: int | None = None
    neighbor_refresh: float = 0.0
    #: When the neighbour's connection last brought frames of any kind
    #: (``NodeTracker.heard``); a late HELLO is excused while it does.
    heard: float = 0.0
    #: Its late HELLO was excused (and said so in the log) since its last one.
    late_excused: bool = False
    mobile_seq: int = 0
    advertised_mobile_seq: int = 0
    need_ls_request: bool = True
    need_mobile_request: bool = False
    mobile_requested: bool = False
    lsr_sent_at: float | None = None
    lsr_for_seq: int = -1
    keep_alive: int = 0
    addresses: dict[str, int] = attrs.field(factory=dict)

    def flush_addresses(self) -> list[Effect]:
        """Withdraw every key attributed to this router; reset its mobile sequence."""
        self.mobile_seq = 0
        if not self.addresses:
            return []
        removed = tuple(self.addresses)
        self.addresses.clear()
        return [MobileAddressesChanged(router_id=self.id, removed=removed)]


@attrs.define
class NodeTracker:
    """Link state of this router and of every known router, and the routes from it."""

    router_id: str
    instance: int
    hello_max_age_s: float
    remote_ls_max_age_s: float
    flux_interval_s: float
    max_routers: int = 128
    peers: dict[str, int] = attrs.field(factory=dict)
    ls_seq: int = 0
    nodes: dict[str, RouterNode] = attrs.field(factory=dict)
    routes: Routes = attrs.field(init=False)
    link_state_changed: bool = False
    recompute: bool = False
    last_topology_change: float | None = None
    last_ls_bump: float | None = None
    _published: tuple[Routes, dict[str, int]] | None = attrs.field(default=None, init=False)
    log: RouterLogger = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.routes = Routes(root=self.router_id)
        self.log = RouterLogger(log, self.router_id)

    # --- queries ----------------------------------------------------------

    def link_state(self) -> LinkState:
        """This router's own link state."""
        return LinkState(id=self.router_id, ls_seq=self.ls_seq, peers=self.peers)

    def neighbors(self) -> dict[str, int]:
        """Established neighbours: router id -> link id."""
        return {n.id: n.link_id for n in self.nodes.values() if n.link_id is not None}

    def is_reachable(self, node: RouterNode) -> bool:
        """Whether control messages can be sent to ``node`` now."""
        return node.link_id is not None or node.id in self.routes.routes

    def in_flux(self, now: float) -> bool:
        """Whether the topology changed within the flux interval (RA every flux interval)."""
        last = self.last_topology_change
        return last is not None and now - last <= self.flux_interval_s

    def node_table(self, mobile_seq: int) -> tuple[NodeRecord, ...]:
        """The local router (with our ``mobile_seq``) first, then every router
        this one has a route to, by index: as with qdrouterd, a router is
        listed once messages (management requests included) can reach it."""
        own = NodeRecord(
            id=self.router_id, index=0, is_self=True, protocol_version=None,
            instance=self.instance, peers=tuple(sorted(self.peers.items())), ls_seq=self.ls_seq,
            mobile_seq=mobile_seq, next_hop=None, link_id=None, cost=None, valid_origins=(),
            last_topology_change=self.last_topology_change,
        )
        records = [own]
        for node in sorted(self.nodes.values(), key=lambda n: n.index):
            route = self.routes.routes.get(node.id)
            if route is None:
                continue
            records.append(NodeRecord(
                id=node.id, index=node.index, is_self=False, protocol_version=node.version,
                instance=node.instance, peers=tuple(sorted(node.peers.items())),
                ls_seq=node.ls_seq, mobile_seq=node.mobile_seq,
                next_hop=route.next_hop, link_id=node.link_id, cost=route.cost,
                valid_origins=tuple(sorted(route.valid_origins)),
            ))
        return tuple(records)

    # --- bookkeeping ------------------------------------------------------

    def learn(
        self, router_id: str, version: int | None, instance: int | None, now: float,
        effects: list[Effect],
    ) -> RouterNode | None:
        """The record for ``router_id``, created (``RouterAdded``) if unknown.

        Returns None for our own id, or when every mask bit is in use.
        """
        if router_id == self.router_id:
            return None
        node = self.nodes.get(router_id)
        if node is not None:
            if node.version is None:
                node.version = version
            return node
        used = {n.index for n in self.nodes.values()}
        index = next((i for i in range(1, self.max_routers) if i not in used), None)
        if index is None:
            self.log.error("exceeded maximum router count %d; ignoring router %s",
                           self.max_routers, router_id)
            return None
        node = RouterNode(id=router_id, index=index, version=version, instance=instance,
                          ls_last_seen=now)
        self.nodes[router_id] = node
        self.log.info("router %s added (index %d)", router_id, index)
        effects.append(RouterAdded(id=router_id))
        return node

    def _update_instance(
        self, node: RouterNode, instance: int, version: int, effects: list[Effect]
    ) -> None:
        if node.instance is None:
            node.instance = instance
            return
        if node.instance == instance:
            return
        self.log.info("detected restart of router %s (instance %d -> %d)",
                      node.id, node.instance, instance)
        node.instance = instance
        node.version = version
        node.peers = {}
        node.ls_seq = 0
        node.advertised_mobile_seq = 0
        effects.extend(node.flush_addresses())
        node.need_ls_request = True
        self.recompute = True

    def _drop_neighbor(self, node: RouterNode, why: str) -> None:
        self.log.info("neighbor %s lost on link %s: %s", node.id, node.link_id, why)
        node.link_id = None
        if self.peers.pop(node.id, None) is not None:
            self.link_state_changed = True
        self.recompute = True  # the neighbours changed: ``settle`` publishes them

    def publish(self) -> list[Effect]:
        """``RoutesChanged`` if the routes or neighbours differ from the last announced."""
        current = (self.routes, self.neighbors())
        if current == self._published:
            return []
        self._published = current
        return [RoutesChanged(routes=current[0], neighbors=current[1])]

    def _lsr(self, node: RouterNode, now: float, for_seq: int = -1) -> SendControl:
        node.need_ls_request = False
        node.lsr_sent_at = now
        node.lsr_for_seq = for_seq
        self.log.debug("SENT LSR to %s", node.id)
        return SendControl(message=LinkStateRequest(id=self.router_id), destination=node.id)

    # --- inputs -----------------------------------------------------------

    def neighbor_refresh(
        self, router_id: str, version: int, instance: int, link_id: int, cost: int, now: float
    ) -> list[Effect]:
        """A HELLO listing us arrived from ``router_id`` on ``link_id``
        (docs/networks.md#link-state-and-paths)."""
        effects: list[Effect] = []
        node = self.learn(router_id, version, instance, now, effects)
        if node is None:
            return effects
        if node.link_id != link_id:
            node.link_id = link_id
            node.need_ls_request = True
            # QUIRK kept: a neighbour still in our link state keeps its old cost
            # (docs/compatibility.md#qdrouterd-behaviour-hop-keeps).
            if router_id not in self.peers:
                self.peers[router_id] = cost
                self.link_state_changed = True
            self.log.info("neighbor %s established on link %d, cost %d",
                          router_id, link_id, self.peers[router_id])
            self.recompute = True  # the neighbours changed: ``settle`` publishes them
        node.neighbor_refresh = now
        node.heard = now
        node.late_excused = False
        self._update_instance(node, instance, version, effects)
        return effects

    def link_lost(self, link_id: int) -> None:
        """The control link of connection ``link_id`` went away: lose its
        neighbour now (``settle`` publishes the change)."""
        for node in self.nodes.values():
            if node.link_id == link_id:
                self._drop_neighbor(node, "connection lost")

    def ra_received(self, msg: RouterAdvertisement, now: float) -> list[Effect]:
        """RA: learn the sender, detect restarts, request what we lack."""
        effects: list[Effect] = []
        node = self.learn(msg.id, msg.pv, msg.instance, now, effects)
        if node is None:
            return effects
        self._update_instance(node, msg.instance, msg.pv, effects)
        node.ls_last_seen = now
        if node.ls_seq < msg.ls_seq:
            # Flooded copies of one RA arrive several times: request once.
            held_off = (
                node.lsr_sent_at is not None and now - node.lsr_sent_at < _LSR_HOLDOFF_S
                and node.lsr_for_seq >= msg.ls_seq
            )
            if not self.is_reachable(node):
                node.need_ls_request = True
            elif not held_off:
                effects.append(self._lsr(node, now, msg.ls_seq))
        node.advertised_mobile_seq = msg.mobile_seq
        if node.mobile_seq < msg.mobile_seq:
            node.need_mobile_request = True
        return effects

    def lsu_received(self, msg: LinkStateUpdate, now: float) -> list[Effect]:
        """LSU: keep the link state if it is newer than the one we hold."""
        effects: list[Effect] = []
        node = self.learn(msg.id, msg.pv, msg.instance, now, effects)
        if node is None or msg.ls.ls_seq <= node.ls_seq:
            return effects
        self.log.debug("link state of %s: %r", node.id, msg.ls)
        node.peers = dict(msg.ls.peers)
        node.ls_seq = msg.ls.ls_seq
        node.ls_last_seen = now
        self.recompute = True
        for peer in node.peers:
            self.learn(peer, None, None, now, effects)
        return effects

    def lsr_received(self, msg: LinkStateRequest, now: float) -> list[Effect]:
        """LSR: learn the requester and send it our link state."""
        effects: list[Effect] = []
        if self.learn(msg.id, msg.pv, None, now, effects) is None:
            return effects
        reply = LinkStateUpdate(id=self.router_id, instance=self.instance, ls_seq=self.ls_seq,
                                ls=self.link_state())
        effects.append(SendControl(message=reply, destination=msg.id))
        return effects

    # --- the tick ---------------------------------------------------------

    def excuse(self, held_s: float) -> None:
        """The router could not listen for ``held_s`` (its own loop was held):
        its neighbours' HELLOs and the link states received are aged without
        that time, so a stall of this router's own does not drop neighbours
        whose HELLOs wait unread in its sockets (docs/networks.md#timers)."""
        for node in self.nodes.values():
            node.neighbor_refresh += held_s
            node.heard += held_s
            node.ls_last_seen += held_s

    def neighbor_on(self, link_id: int) -> RouterNode | None:
        """The neighbour established on connection ``link_id``, if any."""
        for node in self.nodes.values():
            if node.link_id == link_id:
                return node
        return None

    def heard(self, link_id: int, now: float) -> str | None:
        """Frames of any kind came on connection ``link_id`` by ``now``.

        Returns:
            The neighbour established on it, if any.
        """
        node = self.neighbor_on(link_id)
        if node is None:
            return None
        late = now - node.neighbor_refresh
        if late > self.hello_max_age_s and now - node.heard <= self.hello_max_age_s \
                and not node.late_excused:
            node.late_excused = True
            self.log.warning("no HELLO from %s for %.1fs, but its connection still brings "
                             "frames: kept as a neighbour while it does, for up to %gs",
                             node.id, late, LATE_HELLO_FACTOR * self.hello_max_age_s)
        node.heard = now
        return node.id

    def _expire(self, now: float, effects: list[Effect]) -> None:
        for node in list(self.nodes.values()):
            if node.link_id is not None and hello_lost(node.neighbor_refresh, node.heard, now,
                                                       self.hello_max_age_s):
                self._drop_neighbor(
                    node, f"no HELLO for {self.hello_max_age_s:g}s"
                    if now - node.heard > self.hello_max_age_s else
                    f"no HELLO for {now - node.neighbor_refresh:.1f}s, though its connection "
                    "still brings frames")
            if node.peers and now - node.ls_last_seen > self.remote_ls_max_age_s:
                self.log.info("link state of router %s expired", node.id)
                node.peers = {}
                node.ls_seq = 0
                effects.extend(node.flush_addresses())
                self.recompute = True
            listed = any(node.id in other.peers for other in self.nodes.values())
            if node.peers or node.link_id is not None or listed:
                node.keep_alive = 0
                continue
            node.keep_alive += 1
            if node.keep_alive >= _DELETE_AFTER_TICKS:
                self.log.info("router %s deleted", node.id)
                effects.extend(node.flush_addresses())
                del self.nodes[node.id]
                effects.append(RouterLost(id=node.id))

    def _recompute(self) -> None:
        link_states = {self.router_id: self.peers}
        link_states.update((node.id, node.peers) for node in self.nodes.values())
        routes = compute_routes(link_states, self.router_id)
        if routes == self.routes:
            return
        for node in self.nodes.values():
            # An LSR still unanswered may have gone down the path that failed:
            # ask again along the new one.
            if node.lsr_for_seq > node.ls_seq and \
                    routes.next_hop(node.id) != self.routes.next_hop(node.id):
                node.need_ls_request = True
        self.routes = routes
        self.log.info(
            "computed routes: radius %d, next hops {%s}, costs {%s}", routes.radius,
            ", ".join(f"{d}: {r.next_hop}" for d, r in sorted(routes.routes.items())),
            ", ".join(f"{d}: {r.cost}" for d, r in sorted(routes.routes.items())),
        )
        self.log.debug("valid origins: {%s}", ", ".join(
            f"{d}: {sorted(r.valid_origins)}" for d, r in sorted(routes.routes.items())))

    def tick(self, now: float) -> tuple[list[Effect], bool]:
        """Expire, then ``settle``.

        Returns:
            The effects, and whether an RA must follow (our link state changed).
        """
        effects: list[Effect] = []
        self._expire(now, effects)
        settled, send_ra = self.settle(now, ticking=True)
        effects.extend(settled)
        return effects, send_ra

    def settle(self, now: float, *, ticking: bool = False) -> tuple[list[Effect], bool]:
        """Act on what the inputs changed: bump ``ls_seq``, recompute, send pending LSRs.

        Called on the tick and after each input that can change the routes,
        so that a neighbour gained or lost, or a link state learnt, changes
        them at once rather than on the next tick. Routes are recomputed on
        every change (local work only); a new ``ls_seq`` (and the RA that
        floods it) comes at once only if the last one is at least
        ``_LS_HOLDDOWN_S`` old, otherwise on a later tick, so a burst of
        changes costs one flood a second as on the tick alone
        (docs/networks.md#link-state-and-paths).

        Returns:
            The effects, and whether an RA must follow (our link state changed).
        """
        effects: list[Effect] = []
        changed = self.link_state_changed or self.recompute
        bump = self.link_state_changed and (
            ticking or self.last_ls_bump is None or now - self.last_ls_bump >= _LS_HOLDDOWN_S)
        if changed:
            if not self.in_flux(now):
                self.log.debug("entered flux mode")
            self.last_topology_change = now
        if bump:
            self.link_state_changed = False
            self.last_ls_bump = now
            self.ls_seq += 1
            self.log.info("local link state: %r", self.link_state())
        if changed:
            self.recompute = False
            self._recompute()
        effects.extend(self.publish())
        for node in self.nodes.values():
            if node.need_ls_request and self.is_reachable(node):
                effects.append(self._lsr(node, now))
        return effects, bump
