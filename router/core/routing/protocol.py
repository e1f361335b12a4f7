"""The inter-router routing protocol engine: one sans-IO object per router (docs/networks.md).

Owns ``RoutingProtocol``, the input surface the adapter drives: inter-router
connections coming and going, decoded control messages, local address
changes, and ``tick(now)``/``next_deadline()``. It runs the 1 s protocol tick
in qdrouterd's order (HELLO, periodic RA, node tracker, MARs, mobile sync),
drops messages at a protocol version above ours (warning once per sender),
and returns every decision as effects.

Must not: read the clock, do I/O, decode bytes (the adapter calls
``codec.decode_control`` and handles ``PeerProtocolError``), forward
messages (the adapter floods ``ALL`` and routes unicast along
``RoutesChanged``, docs/networks.md#forwarding-control-messages), or keep an
outbox: each input returns its effects.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, assert_never

import attrs

from router.core.routing.effects import ALL, Effect, SendControl
from router.core.routing.hello import TIME_SLACK_S, HelloProtocol
from router.core.routing.linkstate import Neighbor, NodeRecord, NodeTracker
from router.core.routing.logs import RouterLogger
from router.core.routing.messages import (
    PROTOCOL_VERSION,
    ControlMessage,
    Hello,
    LinkState,
    LinkStateRequest,
    LinkStateUpdate,
    MobileAddressRequest,
    MobileAddressUpdate,
    RouterAdvertisement,
)
from router.core.routing.mobile import MobileSync
from router.core.routing.paths import Routes

__all__ = ["TICK_INTERVAL_S", "RoutingProtocol"]

log = logging.getLogger(__name__)

TICK_INTERVAL_S: Final = 1.0
# A tick this much later than due means the router itself was held (a
# long stall of its own loop): the time it could not listen is not counted
# against its neighbours' HELLOs or the link states they sent.
STALL_EXCUSED_S: Final = 0.5
"""The protocol tick of qdrouterd's engine and mobile-sync module."""


@attrs.frozen(kw_only=True)
class ProtocolTimers:
    """The routing protocol's intervals, as the ``router`` section gives them
    (``helloIntervalSeconds`` and the rest; docs/networks.md#timers)."""

    hello_interval_s: float = 1.0
    hello_max_age_s: float = 3.0
    ra_interval_s: float = 30.0
    ra_interval_flux_s: float = 4.0
    remote_ls_max_age_s: float = 60.0
    #: How soon a change of this router's own addresses is sent (None: at
    #: the next tick, as qdrouterd).  A router's workers send theirs within
    #: this, so that the others know a consumer about as soon as one router
    #: would (docs/scaling.md#workers).
    mobile_batch_s: float | None = None


class RoutingProtocol:
    """HELLO, link-state and mobile-address protocol of one interior router.

    Args:
        router_id: this router's id.
        instance: this router's boot time in integer seconds since the epoch,
            fixed for the life of the process (a restart is a new instance).
        hello_interval_s, hello_max_age_s, ra_interval_s, ra_interval_flux_s,
        remote_ls_max_age_s: the timers of docs/networks.md#timers (qdrouterd's
            ``helloIntervalSeconds`` ...). Flux mode lasts while the last
            topology change is at most ``2 * ra_interval_flux_s`` old.
        max_routers: the size of the router mask (qdrouterd: 128).
        mobile_batch_s: send local address changes within this, not at the
            next tick (``ProtocolTimers.mobile_batch_s``).

    Every input returns the list of effects to carry out, in order. The
    first ``tick`` is due at once; then one per second.
    """

    def __init__(
        self,
        router_id: str,
        instance: int,
        *,
        hello_interval_s: float = 1.0,
        hello_max_age_s: float = 3.0,
        ra_interval_s: float = 30.0,
        ra_interval_flux_s: float = 4.0,
        remote_ls_max_age_s: float = 60.0,
        max_routers: int = 128,
        mobile_batch_s: float | None = None,
    ) -> None:
        self._id = router_id
        self._instance = instance
        self._ra_interval_s = ra_interval_s
        self._ra_interval_flux_s = ra_interval_flux_s
        self._links: dict[int, int] = {}  # connected inter-router link id -> cost
        self._hello = HelloProtocol(router_id, instance, hello_interval_s, hello_max_age_s)
        self._nodes = NodeTracker(router_id, instance, hello_max_age_s, remote_ls_max_age_s,
                                  2 * ra_interval_flux_s, max_routers=max_routers)
        self._mobile = MobileSync(router_id)
        self._next_tick = float("-inf")
        self._mobile_batch_s = mobile_batch_s
        # When changed local addresses are due out before the next tick.
        self._mobile_due: float | None = None
        self._last_ra: float | None = None
        self._incompatible: set[str] = set()
        self._warned: set[tuple[str, str]] = set()
        self._log = RouterLogger(log, router_id)

    def __repr__(self) -> str:
        return f"RoutingProtocol({self._id!r}, instance={self._instance})"

    # --- inputs -------------------------------------------------------------

    def neighbor_connected(self, link_id: int, cost: int, now: float,
                           peer: str | None = None) -> list[Effect]:
        """The control link of inter-router connection ``link_id`` is up.

        Args:
            link_id: the connection's mask bit, as the adapter numbers it.
            cost: the connection's effective cost (max of both ends' ``cost``).
            now: the current time.
            peer: the router at the other end as its OPEN named it, if known.

        Returns:
            A HELLO on that link at once if ``peer`` is a router known
            already (coming back after a cut or a restart), so that the
            network heals within round trips; else none: a new router's
            first HELLO goes out on the next tick, as with qdrouterd
            (docs/networks.md#link-state-and-paths).
        """
        self._log.debug("inter-router link %d up, cost %d", link_id, cost)
        self._links[link_id] = cost
        if peer is not None and peer in self._nodes.nodes:
            return [self._hello.greet(link_id)]
        return []

    def neighbor_disconnected(self, link_id: int, now: float) -> list[Effect]:
        """The control link of connection ``link_id`` is gone: its neighbour is
        lost now, and the routes that went through it with it."""
        self._log.debug("inter-router link %d down", link_id)
        self._links.pop(link_id, None)
        self._nodes.link_lost(link_id)
        return self._settled([], now)

    def control_received(
        self, msg: ControlMessage, link_id: int | None, now: float
    ) -> list[Effect]:
        """Handle a decoded control message.

        Args:
            msg: the message.
            link_id: the connection it arrived on (required for HELLO).
            now: the current time.
        """
        if msg.pv > PROTOCOL_VERSION:
            if msg.id not in self._incompatible:
                self._incompatible.add(msg.id)
                self._log.warning("Received %s at protocol version %d from %s.  Ignoring.",
                                  msg.opcode.value, msg.pv, msg.id)
            return []
        if isinstance(msg, Hello):
            return self._hello_received(msg, link_id, now)
        if msg.id == self._id:
            return []  # our own flooded RA/MAU coming back, or a duplicate id
        self._log.debug("RCVD %r", msg)
        if isinstance(msg, RouterAdvertisement):
            return self._settled(self._nodes.ra_received(msg, now), now)
        if isinstance(msg, LinkStateUpdate):
            return self._settled(self._nodes.lsu_received(msg, now), now)
        if isinstance(msg, LinkStateRequest):
            return self._nodes.lsr_received(msg, now)
        if isinstance(msg, MobileAddressUpdate):
            return self._mobile.mau_received(msg, self._nodes.nodes.get(msg.id))
        if isinstance(msg, MobileAddressRequest):
            return self._mobile.mar_received(msg, self._nodes.nodes.get(msg.id))
        assert_never(msg)

    def _settled(self, effects: list[Effect], now: float) -> list[Effect]:
        """``effects`` followed by what the change they came with needs now: new
        routes, LSRs to routers just reachable, an RA for a new link state
        (docs/networks.md#link-state-and-paths). MARs stay on the tick: the
        MAU that an RA announces usually arrives just after it."""
        settled, send_ra = self._nodes.settle(now)
        effects.extend(settled)
        if send_ra:
            effects.append(self._ra(now))
        return effects

    def _hello_received(self, msg: Hello, link_id: int | None, now: float) -> list[Effect]:
        cost = None if link_id is None else self._links.get(link_id)
        if link_id is None or cost is None:
            if (msg.id, "hello-link") not in self._warned:
                self._warned.add((msg.id, "hello-link"))
                self._log.warning("HELLO from %s on unknown inter-router link %s; ignored",
                                  msg.id, link_id)
            return []
        bidirectional, effects = self._hello.hello_received(msg, link_id, now)
        if bidirectional:
            effects.extend(self._nodes.neighbor_refresh(msg.id, msg.pv, msg.instance, link_id,
                                                        cost, now))
            return self._settled(effects, now)
        return effects

    def neighbor_heard(self, link_id: int, now: float) -> None:
        """Frames of any kind came on inter-router connection ``link_id`` since
        the last tick (the adapter counts them; no HELLO need be among them).

        A neighbour's late HELLO is excused while its connection still brings
        frames, up to ``LATE_HELLO_FACTOR`` times ``hello_max_age_s``: a
        router short of CPU, or a HELLO queued behind a backlog of
        transfers, is slow, not gone (docs/networks.md#timers).
        """
        router_id = self._nodes.heard(link_id, now)
        if router_id is not None:
            self._hello.heard(router_id, now)

    def local_address_added(self, key: str, hint: int, now: float) -> list[Effect]:
        """Key ``key`` (``M0orders``, ``Ca.b`` ...) gained its first local destination.

        Args:
            key: the address key.
            hint: its treatment (0 flood ... 5 unavailable), sent as the MAU hint.
            now: the current time.

        Returns:
            No effects: changes are sent in one MAU at the next tick.
        """
        self._mobile.address_added(key, hint)
        self._mobile_changed(now)
        return []

    def local_address_removed(self, key: str, now: float) -> list[Effect]:
        """Key ``key`` lost its last local destination (sent at the next tick)."""
        self._mobile.address_removed(key)
        self._mobile_changed(now)
        return []

    def _mobile_changed(self, now: float) -> None:
        if self._mobile_batch_s is not None and self._mobile_due is None:
            self._mobile_due = now + self._mobile_batch_s

    def next_deadline(self) -> float | None:
        """When ``tick`` is next due (initially at once, then every second,
        and sooner when local address changes are due out)."""
        due = self._mobile_due
        return self._next_tick if due is None or due > self._next_tick else due

    def tick(self, now: float) -> list[Effect]:
        """Run the protocol tick if it is due; otherwise send local address
        changes if they are due; otherwise do nothing."""
        if now < self._next_tick - TIME_SLACK_S:
            due = self._mobile_due
            if due is None or now < due - TIME_SLACK_S:
                return []
            self._mobile_due = None
            mau = self._mobile.tick()
            return [*mau, self._ra(now)] if mau else []
        self._mobile_due = None
        held = now - self._next_tick
        if STALL_EXCUSED_S < held < float("inf"):
            self._log.warning("this router's loop was held %.1fs past its tick: the neighbours' "
                              "HELLOs are aged without it", held)
            self._hello.excuse(held)
            self._nodes.excuse(held)
        following = self._next_tick + TICK_INTERVAL_S
        self._next_tick = following if following > now else now + TICK_INTERVAL_S
        effects = self._hello.tick(now, sorted(self._links))
        interval = self._ra_interval_flux_s if self._nodes.in_flux(now) else self._ra_interval_s
        if self._last_ra is None or now - self._last_ra >= interval - TIME_SLACK_S:
            effects.append(self._ra(now))
        node_effects, send_ra = self._nodes.tick(now)
        effects.extend(node_effects)
        effects.extend(self._mobile.request_updates(self._nodes))
        if send_ra:
            effects.append(self._ra(now))
        mau = self._mobile.tick()
        if mau:
            effects.extend(mau)
            effects.append(self._ra(now))
        return effects

    def _ra(self, now: float) -> SendControl:
        self._last_ra = now
        message = RouterAdvertisement(id=self._id, instance=self._instance,
                                      ls_seq=self._nodes.ls_seq, mobile_seq=self._mobile.mobile_seq)
        self._log.debug("SENT %r", message)
        return SendControl(message=message, destination=ALL)

    # --- read-only state ----------------------------------------------------

    @property
    def router_id(self) -> str:
        """This router's id."""
        return self._id

    @property
    def instance(self) -> int:
        """This router's instance (boot time)."""
        return self._instance

    @property
    def ls_seq(self) -> int:
        """The sequence number of our link state."""
        return self._nodes.ls_seq

    @property
    def mobile_seq(self) -> int:
        """The sequence number of our advertised address set."""
        return self._mobile.mobile_seq

    @property
    def link_state(self) -> LinkState:
        """Our link state: each established neighbour and its link cost."""
        return self._nodes.link_state()

    @property
    def routes(self) -> Routes:
        """The routes last computed (as in the last ``RoutesChanged``)."""
        return self._nodes.routes

    @property
    def neighbors(self) -> Mapping[str, Neighbor]:
        """Established neighbours by router id."""
        peers = self._nodes.peers
        return MappingProxyType({
            router_id: Neighbor(id=router_id, link_id=link_id, cost=peers.get(router_id, 0))
            for router_id, link_id in self._nodes.neighbors().items()
        })

    @property
    def links(self) -> Mapping[int, int]:
        """Connected inter-router links (link id -> cost), established or not."""
        return MappingProxyType(dict(self._links))

    @property
    def last_topology_change(self) -> float | None:
        """When the topology last changed (a ``now`` value), or None."""
        return self._nodes.last_topology_change

    def in_flux(self, now: float) -> bool:
        """Whether RAs currently go out every ``ra_interval_flux_s``."""
        return self._nodes.in_flux(now)

    @property
    def local_addresses(self) -> Mapping[str, int]:
        """Keys we advertise (including changes not yet sent), with hints."""
        return MappingProxyType(dict(self._mobile.local))

    @property
    def remote_addresses(self) -> Mapping[str, Mapping[str, int]]:
        """Keys attributed to each known router, with hints (routers without keys omitted)."""
        return MappingProxyType({
            node.id: MappingProxyType(dict(node.addresses))
            for node in self._nodes.nodes.values() if node.addresses
        })

    def node_table(self) -> tuple[NodeRecord, ...]:
        """Every known router, this one first (management ``router.node``)."""
        return self._nodes.node_table(self._mobile.mobile_seq)
