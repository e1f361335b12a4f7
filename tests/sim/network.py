"""An in-memory network of ``RoutingProtocol`` cores on a fake clock.

Like h11's ``ConnectionPair`` and aioquic's ``roundtrip``: every control
message goes through the real codec (``encode_control`` then
``decode_envelope``) and is forwarded the way qdrouterd forwards control
traffic (docs/networks.md#forwarding-control-messages), using each router's
own view of the network as its last ``RoutesChanged`` gave it:

* HELLO goes over one connection to the router at its other end;
* RA (``Tqdrouter``) is flooded over every connection that is the next hop
  of some known router, except connections to routers already in the
  trace, and handed to every router's engine but the originator's;
* differential MAU (``Tqdrouter.ma``) is multicast: a copy toward remote
  router R only if the ingress router is a valid origin for R there
  (as Hop does, docs/networks.md#forwarding-control-messages), one copy per
  connection; with ``multicast_valid_origins=False`` it is flooded like an
  RA, as qdrouterd 1.x actually does (docs/compatibility.md#multicast-across-routers);
* LSR, LSU, MAR and absolute MAU (``R<id>``) follow next hops to their target;
* the loop guard drops a message whose trace is longer than radius + 1.

Messages are delivered at once, in FIFO order, until the network is quiet;
time only moves between ticks. Routers start at their own phase so ticks
interleave as they would in real life.
"""

from __future__ import annotations

import collections
import random
from collections.abc import Callable, Iterable

import attrs

from addressing import routing_key
from router.core.routing import (
    HELLO_ADDRESS,
    ControlMessage,
    Effect,
    MobileAddressesChanged,
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

__all__ = ["Frame", "Link", "Network", "SimRouter"]

# A network that keeps forwarding this many frames without going quiet is storming.
MAX_FRAMES_PER_DRAIN = 200_000


def topo(router_id: str) -> str:
    """The trace/ingress form of a router id."""
    return f"0/{router_id}"


@attrs.define(eq=False)
class Link:
    """An inter-router connection between ``a`` and ``b`` (each side numbers it)."""

    a: str
    b: str
    cost: int
    a_link: int
    b_link: int
    up: bool = True

    def other(self, router_id: str) -> tuple[str, int]:
        """(the far router, its link id) seen from ``router_id``."""
        return (self.b, self.b_link) if router_id == self.a else (self.a, self.a_link)


@attrs.define(eq=False)
class SimRouter:
    """One router: its protocol core and what its effects told the adapter."""

    id: str
    protocol: RoutingProtocol
    start_at: float
    links: dict[int, Link] = attrs.field(factory=dict)
    routes: Routes | None = None
    neighbors: dict[str, int] = attrs.field(factory=dict)
    known: set[str] = attrs.field(factory=set)
    remote_keys: dict[str, dict[str, int]] = attrs.field(factory=dict)
    effects: list[Effect] = attrs.field(factory=list)
    timeline: list[tuple[float, Effect]] = attrs.field(factory=list)

    @property
    def deadline(self) -> float:
        due = self.protocol.next_deadline()
        return self.start_at if due is None else max(due, self.start_at)

    def free_link_id(self) -> int:
        return next(i for i in range(1, 129) if i not in self.links)


@attrs.frozen
class Frame:
    """Encoded bytes in flight to ``router`` over its connection ``link_id``."""

    router: str
    link_id: int
    link: Link
    data: bytes


@attrs.frozen
class Sent:
    """One control message put on a connection (for counting)."""

    time: float
    sender: str
    opcode: str


class Network:
    """Routers, links, a fake clock, and the control-traffic forwarding of
    docs/networks.md#forwarding-control-messages."""

    def __init__(
        self, *, seed: int = 0, ra_interval_s: float = 30.0, ra_interval_flux_s: float = 4.0,
        remote_ls_max_age_s: float = 60.0, multicast_valid_origins: bool = True,
    ) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self.ra_interval_s = ra_interval_s
        self.ra_interval_flux_s = ra_interval_flux_s
        self.remote_ls_max_age_s = remote_ls_max_age_s
        self.multicast_valid_origins = multicast_valid_origins
        self.instances = 1000
        self.routers: dict[str, SimRouter] = {}
        self.queue: collections.deque[Frame] = collections.deque()
        self.sent: list[Sent] = []
        self.dropped: collections.Counter[str] = collections.Counter()

    # --- building the network ------------------------------------------------

    def add_router(self, router_id: str, instance: int | None = None) -> SimRouter:
        """Start a router now, its first tick within the next second."""
        if instance is None:
            self.instances += 1
            instance = self.instances
        protocol = RoutingProtocol(
            router_id, instance, ra_interval_s=self.ra_interval_s,
            ra_interval_flux_s=self.ra_interval_flux_s,
            remote_ls_max_age_s=self.remote_ls_max_age_s,
        )
        router = SimRouter(router_id, protocol, start_at=self.now + self.rng.random())
        self.routers[router_id] = router
        return router

    def connect(self, a: str, b: str, cost: int = 1) -> Link:
        """Open an inter-router connection (its control link comes up at both ends)."""
        ra, rb = self.routers[a], self.routers[b]
        link = Link(a, b, cost, ra.free_link_id(), rb.free_link_id())
        ra.links[link.a_link] = link
        rb.links[link.b_link] = link
        # Each end knows the other's id from its OPEN, as the adapter does.
        self._apply(ra, ra.protocol.neighbor_connected(link.a_link, cost, self.now, peer=b))
        self._apply(rb, rb.protocol.neighbor_connected(link.b_link, cost, self.now, peer=a))
        self.drain()
        return link

    def disconnect(self, a: str, b: str) -> None:
        """Close the connection between ``a`` and ``b``; frames in flight on it are lost."""
        link = self.link(a, b)
        link.up = False
        for router_id, link_id in ((link.a, link.a_link), (link.b, link.b_link)):
            router = self.routers[router_id]
            del router.links[link_id]
            self._apply(router, router.protocol.neighbor_disconnected(link_id, self.now))
        self.drain()

    def remove_router(self, router_id: str) -> list[tuple[str, int]]:
        """Stop a router: close its connections; returns (peer, cost) of each."""
        router = self.routers[router_id]
        peers = [(link.other(router_id)[0], link.cost) for link in list(router.links.values())]
        for peer, _ in peers:
            self.disconnect(router_id, peer)
        del self.routers[router_id]
        return peers

    def restart(self, router_id: str, instance: int, new_id: str | None = None) -> SimRouter:
        """Stop a router and start it again (a new instance, perhaps a new id) on the
        same connections, re-advertising its local addresses."""
        keys = dict(self.routers[router_id].protocol.local_addresses)
        peers = self.remove_router(router_id)
        router = self.add_router(new_id or router_id, instance)
        for key, hint in keys.items():
            router.protocol.local_address_added(key, hint, self.now)
        for peer, cost in peers:
            self.connect(router.id, peer, cost)
        return router

    def link(self, a: str, b: str) -> Link:
        """The connection between ``a`` and ``b``."""
        for link in self.routers[a].links.values():
            if link.other(a)[0] == b:
                return link
        raise KeyError(f"no link {a}-{b}")

    def add_address(self, router_id: str, key: str, hint: int = 2) -> None:
        """A local destination for ``key`` appeared on ``router_id``."""
        router = self.routers[router_id]
        self._apply(router, router.protocol.local_address_added(key, hint, self.now))

    def remove_address(self, router_id: str, key: str) -> None:
        """The last local destination for ``key`` on ``router_id`` went away."""
        router = self.routers[router_id]
        self._apply(router, router.protocol.local_address_removed(key, self.now))

    # --- time ------------------------------------------------------------------

    def run(self, seconds: float) -> None:
        """Advance the clock by ``seconds``, ticking routers when due."""
        end = self.now + seconds
        while self.routers:
            due = min(router.deadline for router in self.routers.values())
            if due > end:
                break
            self.now = max(self.now, due)
            for router in sorted(self.routers.values(), key=lambda r: r.id):
                if router.id in self.routers and router.deadline <= self.now:
                    self._apply(router, router.protocol.tick(self.now))
                    self.drain()
        self.now = end

    def run_until(
        self, condition: Callable[[], bool], timeout_s: float, step_s: float = 1.0
    ) -> float:
        """Run until ``condition()`` holds; returns the simulated seconds it took.

        Raises:
            AssertionError: still false after ``timeout_s``.
        """
        start = self.now
        while not condition():
            if self.now - start >= timeout_s:
                raise AssertionError(f"condition still false after {timeout_s:g}s")
            self.run(step_s)
        return self.now - start

    # --- effects and forwarding -----------------------------------------------

    def _apply(self, router: SimRouter, effects: Iterable[Effect]) -> None:
        for effect in effects:
            router.effects.append(effect)
            router.timeline.append((self.now, effect))
            if isinstance(effect, SendHello):
                link = router.links[effect.link_id]
                data = encode_control(effect.message, to=effect.to, ingress=topo(router.id),
                                      trace=[topo(router.id)])
                self._send(router, link, data, effect.message.opcode.value)
            elif isinstance(effect, SendControl):
                self._forward(router, effect.to, effect.message, ingress=router.id, trace=())
            elif isinstance(effect, RoutesChanged):
                router.routes = effect.routes
                router.neighbors = dict(effect.neighbors)
            elif isinstance(effect, RouterAdded):
                assert effect.id not in router.known, effect
                router.known.add(effect.id)
            elif isinstance(effect, RouterLost):
                router.known.discard(effect.id)
                assert effect.id not in router.remote_keys, effect
            elif isinstance(effect, MobileAddressesChanged):
                keys = router.remote_keys.setdefault(effect.router_id, {})
                for key in effect.removed:
                    del keys[key]
                for key, hint in effect.added:
                    assert key not in keys, effect
                    keys[key] = hint
                if not keys:
                    del router.remote_keys[effect.router_id]

    def _send(self, router: SimRouter, link: Link, data: bytes, opcode: str) -> None:
        far, far_link = link.other(router.id)
        self.sent.append(Sent(self.now, router.id, opcode))
        self.queue.append(Frame(far, far_link, link, data))

    def _forward(
        self, router: SimRouter, to: str, message: ControlMessage, *, ingress: str,
        trace: tuple[str, ...],
    ) -> None:
        """Route a control message from ``ingress`` onward at ``router``
        (docs/networks.md#forwarding-control-messages)."""
        key = routing_key(to, router_id=router.id)
        opcode = message.opcode.value
        data = encode_control(message, to=to, ingress=topo(ingress),
                              trace=[*trace, topo(router.id)])
        routes = router.routes
        excluded = {router.neighbors.get(entry.removeprefix("0/")) for entry in trace}
        if key[0] == "R":
            target = key[1:]
            hop = target if target in router.neighbors else (
                routes.next_hop(target) if routes else None)
            link_id = router.neighbors.get(hop) if hop else None
            if link_id is None:
                self.dropped["no route"] += 1
                return
            self._send(router, router.links[link_id], data, opcode)
            return
        if key[0] != "T" or routes is None:
            self.dropped["unroutable"] += 1
            return
        if key == "Tqdrouter" or (not self.multicast_valid_origins and (
                ingress == router.id or ingress in routes.routes)):
            # flood; qdrouterd also multicasts this way
            # (docs/compatibility.md#multicast-across-routers)
            hops = {route.next_hop for route in routes.routes.values()}
        elif ingress != router.id and ingress not in routes.routes:
            hops = set()  # multicast from an unknown origin: no remote copies
        else:
            hops = {route.next_hop for dest, route in routes.routes.items()
                    if routes.is_valid_origin(dest, ingress)}
        links = {router.neighbors[hop] for hop in hops if hop in router.neighbors} - excluded
        for link_id in sorted(links):
            self._send(router, router.links[link_id], data, opcode)

    def _receive(self, frame: Frame) -> None:
        router = self.routers.get(frame.router)
        if router is None or not frame.link.up:
            self.dropped["link down"] += 1
            return
        envelope = decode_envelope(frame.data)
        message = envelope.message
        assert envelope.to is not None and envelope.ingress is not None
        if envelope.to == HELLO_ADDRESS:
            self._apply(router, router.protocol.control_received(message, frame.link_id, self.now))
            return
        radius = router.routes.radius if router.routes else 0
        if len(envelope.trace) > radius + 1:
            self.dropped["loop guard"] += 1
            return
        key = routing_key(envelope.to, router_id=router.id)
        if key[0] in "LT":  # for this router's engine
            self._apply(router, router.protocol.control_received(message, frame.link_id, self.now))
        if key[0] in "RT":
            self._forward(router, envelope.to, message,
                          ingress=envelope.ingress.removeprefix("0/"), trace=envelope.trace)

    def drain(self) -> None:
        """Deliver frames until none are left."""
        delivered = 0
        while self.queue:
            delivered += 1
            if delivered > MAX_FRAMES_PER_DRAIN:
                raise AssertionError("control traffic storm: the network never went quiet")
            self._receive(self.queue.popleft())

    # --- what the network should converge to -------------------------------------

    def true_link_states(self) -> dict[str, dict[str, int]]:
        """Each router's real neighbours and link costs."""
        return {
            router.id: {link.other(router.id)[0]: link.cost for link in router.links.values()}
            for router in self.routers.values()
        }

    def expected_routes(self, router_id: str) -> Routes:
        """The routes ``router_id`` should have once converged."""
        return compute_routes(self.true_link_states(), router_id)

    def mismatches(self) -> list[str]:
        """What still differs from the converged state (empty when converged)."""
        problems = []
        truth = self.true_link_states()
        for router in self.routers.values():
            expected = compute_routes(truth, router.id)
            if router.routes != expected:
                problems.append(f"{router.id}: routes differ")
                continue
            if router.protocol.routes != router.routes:
                problems.append(f"{router.id}: RoutesChanged not up to date")
            if set(router.neighbors) != set(truth[router.id]):
                problems.append(f"{router.id}: neighbours {sorted(router.neighbors)}")
            wanted = {
                peer: dict(self.routers[peer].protocol.local_addresses)
                for peer in expected.routes if self.routers[peer].protocol.local_addresses
            }
            # Keys of unreachable routers linger until their link state expires
            # (docs/networks.md#mobile-addresses); they are not forwarded to, so they do
            # not count here.
            reachable = {k: v for k, v in router.remote_keys.items() if k in expected.routes}
            if reachable != wanted:
                problems.append(f"{router.id}: addresses {reachable} != {wanted}")
            if router.remote_keys != {k: dict(v) for k, v in
                                      router.protocol.remote_addresses.items()}:
                problems.append(f"{router.id}: MobileAddressesChanged disagree with state")
        return problems

    def converged(self) -> bool:
        """Every router's routes and address view match the real network."""
        return not self.mismatches()

    def counts(self, since: float) -> collections.Counter[str]:
        """Control messages put on connections since ``since``, by opcode."""
        return collections.Counter(s.opcode for s in self.sent if s.time >= since)
