"""The router network as the forwarder sees it: inter-router connections,
their control and data links, control-message relaying, and which remote
routers each address record can reach.

Owns the ``RoutingProtocol`` of an interior router, the inter-router
connections (``RouterLink``: one per neighbour connection, with its control
link and per-priority data links), the relaying of control messages
(docs/networks.md#forwarding-control-messages: HELLO to one neighbour, RA
flooded, differential MAU multicast once along valid origins, everything
else unicast along next hops, loop guard), and the remote destinations of each address record,
recomputed when routes or mobile addresses change (never per message).

Must not touch proton or sockets: it hands the adapter encoded control
messages to send (``SendFrame``) and credit effects, like the rest of the
core.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from addressing import Distribution
from router.core.destinations import senders_changed
from router.core.effects import Effect, SendFrame
from router.core.ids import LinkId
from router.core.message import AnnotationEncoder, decode_annotations, scan
from router.core.records import (
    PRIORITIES,
    AddressRecord,
    Connection,
    HopLoad,
    InLink,
    OutLink,
    RemoteTarget,
    RouterLink,
    UplinkTarget,
)
from router.core.routing import (
    ALL,
    MA_ALL_ADDRESS,
    TOPO_ALL_ADDRESS,
    MobileAddressesChanged,
    Opcode,
    PeerProtocolError,
    ProtocolTimers,
    RouterAdded,
    RouterLost,
    Routes,
    RoutesChanged,
    RoutingProtocol,
    SendControl,
    SendHello,
    compute_routes,
    decode_envelope,
    encode_control,
)
from router.core.routing import Effect as ProtocolEffect

log = logging.getLogger(__name__)

_TOPO_PREFIX: Final = "amqp:/_topo/0/"
#: How long a unicast control message waits for a route to its router, and
#: how many wait at most (docs/networks.md#control-messages-ahead-of-their-route).
HELD_S: Final = 10.0
HELD_MAX: Final = 256
#: Treatment numbers used as hints in MAUs (docs/routing.md#treatment).
HINTS: Final = {
    Distribution.MULTICAST: 1,
    Distribution.CLOSEST: 2,
    Distribution.BALANCED: 3,
    Distribution.UNAVAILABLE: 5,
}
FROM_HINT: Final = {1: Distribution.MULTICAST, 2: Distribution.CLOSEST, 3: Distribution.BALANCED}


def _router_of(ingress: str | None) -> str | None:
    """``"0/R1"`` -> ``"R1"``."""
    if ingress is None:
        return None
    return ingress[2:] if ingress.startswith("0/") else ingress


class Network:
    """The network side of one interior router.

    Args:
        router_id: this router.
        instance: its start time (seconds since the epoch), sent in HELLO/RA.
        records: the router's address records (shared with ``Router``).
        record_for: finds or creates the record of a mobile key learnt from
            another router, given the sender's treatment hint.
        release_record: frees a record nothing uses any more.
        timers: the router entity's protocol intervals.
    """

    def __init__(self, *, router_id: str, instance: int,
                 records: dict[str, AddressRecord],
                 record_for: Callable[[str, int], AddressRecord | None],
                 release_record: Callable[[AddressRecord], None],
                 link_id: Callable[[], LinkId],
                 timers: ProtocolTimers | None = None) -> None:
        self.router_id = router_id
        t = timers if timers is not None else ProtocolTimers()
        self.protocol = RoutingProtocol(
            router_id, instance, hello_interval_s=t.hello_interval_s,
            hello_max_age_s=t.hello_max_age_s, ra_interval_s=t.ra_interval_s,
            ra_interval_flux_s=t.ra_interval_flux_s, remote_ls_max_age_s=t.remote_ls_max_age_s,
            mobile_batch_s=t.mobile_batch_s)
        self.records = records
        self._record_for = record_for
        self._release_record = release_record
        self._link_id = link_id
        self.links: dict[int, RouterLink] = {}
        self.by_peer: dict[str, RouterLink] = {}
        self.routes: Routes = compute_routes({router_id: {}}, router_id)
        self.remote: dict[str, set[str]] = {}  # key -> routers advertising it
        self._encoder = AnnotationEncoder(router_id)
        self._own = f"0/{router_id}"
        # (router, opcode) -> (when, frame): unicast control messages waiting for a route
        self._held: dict[tuple[str, Opcode], tuple[float, bytes]] = {}

    # -- inter-router connections ------------------------------------------------

    def link_of(self, conn: Connection) -> RouterLink | None:
        return self.links.get(conn.conn_id)

    def router_link(self, conn: Connection, cost: int) -> RouterLink:
        """The network's view of an inter-router connection (created on first use)."""
        link = self.link_of(conn)
        if link is None:
            link = self.links[conn.conn_id] = RouterLink(conn.conn_id, conn, cost)
        return link

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
            return out, self.control_attached(rlink, now)
        link = InLink(self._link_id(), conn, name=name, address=None, record=None,
                      handle=handle)
        link.router_link = rlink
        link.control = True
        link.transit = True
        conn.in_links[link.link_id] = link
        return link, []

    def data_link_attached(self, conn: Connection, *, outgoing: bool, name: str,
                           handle: object, cost: int) -> InLink | OutLink:
        """An inter-router data link (capability ``qd.router-data``) attached;
        its priority is its attach order in its direction
        (docs/networks.md#inter-router-connections)."""
        rlink = self.router_link(conn, cost)
        if outgoing:
            out = OutLink(self._link_id(), conn, name=name, address="", record=None,
                          handle=handle)
            out.prepared = True
            for priority in range(PRIORITIES):
                if rlink.data[priority] is None:
                    rlink.data[priority] = out
                    out.priority = priority
                    break
            conn.out_links[out.link_id] = out
            return out
        link = InLink(self._link_id(), conn, name=name, address=None, record=None, handle=handle)
        link.router_link = rlink
        link.transit = True
        link.priority = min(rlink.data_in, PRIORITIES - 1)
        rlink.data_in += 1
        conn.in_links[link.link_id] = link
        return link

    def control_attached(self, link: RouterLink, now: float) -> list[Effect]:
        """The router-outgoing control link is up: the neighbour can be greeted."""
        if link.ready or link.control is None:
            return []
        link.ready = True
        log.info("inter-router connection %r ready", link)
        return self.apply_protocol(self.protocol.neighbor_connected(
            link.link_id, link.cost, now, peer=link.conn.container_id or None), now)

    def link_lost(self, conn: Connection, now: float) -> list[Effect]:
        """An inter-router connection (or its control link) went away."""
        link = self.links.pop(conn.conn_id, None)
        if link is None:
            return []
        if link.peer is not None and self.by_peer.get(link.peer) is link:
            del self.by_peer[link.peer]
        log.info("inter-router connection %r lost", link)
        if not link.ready:
            return []
        return self.apply_protocol(self.protocol.neighbor_disconnected(link.link_id, now), now)

    # -- time ------------------------------------------------------------------------

    def tick(self, now: float) -> list[Effect]:
        return self.apply_protocol(self.protocol.tick(now), now)

    def next_deadline(self) -> float | None:
        return self.protocol.next_deadline()

    def connections(self) -> list[Connection]:
        """The inter-router connections whose control link is up."""
        return [link.conn for link in self.links.values() if link.ready]

    def heard(self, conn: Connection, now: float) -> None:
        """Frames of any kind came on inter-router connection ``conn`` since
        the last tick (``RoutingProtocol.neighbor_heard``)."""
        link = self.links.get(conn.conn_id)
        if link is not None and link.ready:
            self.protocol.neighbor_heard(link.link_id, now)

    # -- local addresses ---------------------------------------------------------------

    def address_added(self, key: str, hint: int, now: float) -> list[Effect]:
        return self.apply_protocol(self.protocol.local_address_added(key, hint, now), now)

    def address_removed(self, key: str, now: float) -> list[Effect]:
        return self.apply_protocol(self.protocol.local_address_removed(key, now), now)

    # -- control messages ----------------------------------------------------------------

    def control_received(self, link: RouterLink, data: bytes, now: float) -> list[Effect]:
        """A message arrived on a router-incoming control link
        (docs/networks.md#forwarding-control-messages)."""
        try:
            envelope = decode_envelope(data)
        except PeerProtocolError as exc:
            log.warning("control message from %r dropped: %s", link, exc)
            return []
        to = envelope.to or ""
        trace = envelope.trace
        if len(trace) > max(self.routes.radius, 1) + 1:
            return []  # loop guard (docs/networks.md#the-loop-guard)
        effects: list[Effect] = []
        if to.endswith("/qdhello"):
            return self.apply_protocol(
                self.protocol.control_received(envelope.message, link.link_id, now), now)
        if to in (TOPO_ALL_ADDRESS, MA_ALL_ADDRESS) or to.endswith("_topo/0/all/qdrouter.ma"):
            effects.extend(self._relay(data, trace, envelope.ingress, flood=to == TOPO_ALL_ADDRESS,
                                       came_from=link))
            effects.extend(self.apply_protocol(
                self.protocol.control_received(envelope.message, None, now), now))
            return effects
        target = to[len(_TOPO_PREFIX):].split("/", 1)[0] if to.startswith(_TOPO_PREFIX) else ""
        if not target and to.startswith("_topo/0/"):
            target = to[len("_topo/0/"):].split("/", 1)[0]
        if target == self.router_id or not target:
            return self.apply_protocol(
                self.protocol.control_received(envelope.message, link.link_id, now), now)
        hop = self._next_hop_link(target)
        if hop is not None and hop is not link:
            effects.append(SendFrame(link=hop, data=self._stamp(data)))
        return effects

    def _stamp(self, data: bytes) -> bytes:
        """The message with this router appended to its trace."""
        info = scan(data, False)
        annotations = decode_annotations(data, info)
        return self._encoder.annotate(data, info, annotations, to=annotations.to,
                                      phase=annotations.phase)

    def _relay(self, data: bytes, trace: tuple[str, ...] | list[str], ingress: str | None,
               *, flood: bool, came_from: RouterLink | None) -> list[Effect]:
        """Pass a broadcast on: RA to every neighbour not in the trace; a
        differential MAU only where this router is on the origin's shortest
        paths (valid origins), so each router gets it once."""
        visited = {_router_of(t) for t in trace}
        origin = _router_of(ingress) or self.router_id
        targets = [hop for hop in self._hops(None if flood else origin)
                   if hop.peer not in visited and hop is not came_from]
        if not targets:
            return []
        stamped = self._stamp(data)
        return [SendFrame(link=hop, data=stamped) for hop in targets]

    def _hops(self, origin: str | None) -> list[RouterLink]:
        """The distinct next-hop connections toward every reachable router;
        with ``origin``, only toward routers this router is a valid origin
        path for (docs/networks.md#link-state-and-paths)."""
        targets: dict[int, RouterLink] = {}
        for dest, route in self.routes.routes.items():
            if dest == self.router_id or route.next_hop is None:
                continue
            if origin is not None and origin != self.router_id \
                    and not self.routes.is_valid_origin(dest, origin):
                continue
            hop = self.by_peer.get(route.next_hop)
            if hop is not None:
                targets[hop.link_id] = hop
        return list(targets.values())

    def _next_hop_link(self, router_id: str) -> RouterLink | None:
        route = self.routes.routes.get(router_id)
        if route is None or route.next_hop is None:
            return self.by_peer.get(router_id)
        return self.by_peer.get(route.next_hop)

    # -- protocol effects ----------------------------------------------------------------

    def apply_protocol(self, effects: list[ProtocolEffect], now: float) -> list[Effect]:
        """Carry out what the routing protocol decided (``RoutingProtocol``'s
        effects): frames to send, routes and mobile addresses changed,
        routers added and lost; the router's effects that follow."""
        out: list[Effect] = []
        for effect in effects:
            if isinstance(effect, SendHello):
                link = self.links.get(effect.link_id)
                if link is not None and link.control is not None:
                    out.append(SendFrame(link=link, data=self._encode(effect.message, effect.to)))
            elif isinstance(effect, SendControl):
                data = self._encode(effect.message, effect.to)
                if effect.destination is ALL:
                    out.extend(self._relay_own(data, flood=effect.to == TOPO_ALL_ADDRESS))
                else:
                    hop = self._next_hop_link(effect.destination)
                    if hop is not None:
                        out.append(SendFrame(link=hop, data=data))
                    else:
                        self._hold(effect.destination, effect.message.opcode, data, now)
            elif isinstance(effect, RoutesChanged):
                out.extend(self._routes_changed(effect))
                out.extend(self._send_held(now))
            elif isinstance(effect, MobileAddressesChanged):
                out.extend(self._addresses_changed(effect))
            elif isinstance(effect, RouterAdded):
                self._router_added(effect.id)
            elif isinstance(effect, RouterLost):
                out.extend(self._router_lost(effect.id))
            else:
                log.critical("neighbour on link %s uses our router id %s", effect.link_id,
                             effect.id)
        return out

    def _hold(self, router_id: str, opcode: Opcode, data: bytes, now: float) -> None:
        """Keep a unicast control message for a router there is no route to
        yet: an LSR from a router this one has only just heard of is answered
        once the route to it is known, not at the requester's next retry
        (docs/networks.md#control-messages-ahead-of-their-route)."""
        held = self._held
        held.pop((router_id, opcode), None)
        held[(router_id, opcode)] = (now, data)
        if len(held) > HELD_MAX:
            del held[next(iter(held))]

    def _send_held(self, now: float) -> list[Effect]:
        if not self._held:
            return []
        out: list[Effect] = []
        for key, (since, data) in list(self._held.items()):
            if now - since > HELD_S:
                del self._held[key]
                continue
            hop = self._next_hop_link(key[0])
            if hop is not None:
                del self._held[key]
                out.append(SendFrame(link=hop, data=data))
        return out

    def _encode(self, message: object, to: str) -> bytes:
        return encode_control(message, to=to, ingress=self._own,  # type: ignore[arg-type]
                              trace=[self._own])

    def _relay_own(self, data: bytes, *, flood: bool) -> list[Effect]:
        targets = {hop.link_id: hop for hop in self._hops(None)}
        if flood:
            targets.update((hop.link_id, hop) for hop in self.by_peer.values())
        return [SendFrame(link=hop, data=data) for hop in targets.values()]

    def _routes_changed(self, effect: RoutesChanged) -> list[Effect]:
        self.routes = effect.routes
        self.by_peer = {}
        for peer, link_id in effect.neighbors.items():
            link = self.links.get(link_id)
            if link is not None:
                link.peer = peer
                self.by_peer[peer] = link
        log.info("routes: %s", ", ".join(
            f"{d} via {r.next_hop} cost {r.cost}" for d, r in sorted(self.routes.routes.items())
            if d != self.router_id) or "none")
        effects: list[Effect] = []
        for key in list(self.remote):
            record = self.records.get(key)
            if record is not None:
                effects.extend(self._retarget(record))
        return effects

    def _router_added(self, router_id: str) -> None:
        key = f"R{router_id}"
        self.remote.setdefault(key, set()).add(router_id)
        record = self._record_for(key, -1)
        if record is not None:
            self._retarget(record)

    def _router_lost(self, router_id: str) -> list[Effect]:
        return self._forget(f"R{router_id}", router_id)

    def _addresses_changed(self, effect: MobileAddressesChanged) -> list[Effect]:
        out: list[Effect] = []
        for key, hint in effect.added:
            self.remote.setdefault(key, set()).add(effect.router_id)
            record = self._record_for(key, hint)
            if record is not None:
                out.extend(self._retarget(record))
        for key in effect.removed:
            out.extend(self._forget(key, effect.router_id))
        return out

    def _forget(self, key: str, router_id: str) -> list[Effect]:
        routers = self.remote.get(key)
        if routers is None:
            return []
        routers.discard(router_id)
        if not routers:
            del self.remote[key]
        record = self.records.get(key)
        if record is None:
            return []
        out = self._retarget(record)
        if not record.remotes and not record.in_use:
            self._release_record(record)
        return out

    def _retarget(self, record: AddressRecord) -> list[Effect]:
        """Recompute the remote destinations of a record; credit effects when it
        gains its first or loses its last destination."""
        old = {t.router_id: t for t in record.remotes if type(t) is RemoteTarget}
        # An edge's downlink on this router stays first (docs/networks.md#edge-routers).
        local: list[UplinkTarget] = [t for t in record.remotes if type(t) is UplinkTarget]
        # Routers reached over one next hop share its count of this address.
        loads = {t.link.link_id: t.hop for t in old.values()}
        targets: list[RemoteTarget] = []
        for router_id in sorted(self.remote.get(record.key, ())):
            route = self.routes.routes.get(router_id)
            hop = self._next_hop_link(router_id) if route is not None else None
            if hop is None or route is None:
                continue
            target = old.get(router_id)
            if target is None or target.link is not hop or target.cost != route.cost:
                shared = loads.get(hop.link_id)
                if shared is None:
                    shared = loads[hop.link_id] = HopLoad()
                target = RemoteTarget(router_id, hop, route.cost, shared)
            targets.append(target)
        record.remotes = [*local, *targets]
        if local:
            record.closest_remotes = list(local)
        elif targets:
            lowest = min(t.cost for t in targets)
            record.closest_remotes = [t for t in targets if t.cost == lowest]
        else:
            record.closest_remotes = []
        return senders_changed(record)

    def valid_origin(self, target: RemoteTarget, origin: str | None) -> bool:
        return origin is None or origin == self.router_id or self.routes.is_valid_origin(
            target.router_id, origin)


__all__ = ["FROM_HINT", "HINTS", "Network"]
