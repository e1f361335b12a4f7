"""Mobile-address synchronisation: MAU and MAR (docs/networks.md#mobile-addresses;
ROUTER_MA).

Owns: the local advertised key set and ``mobile_seq``, batching local
changes into one differential MAU per tick, absolute MAUs in reply to MARs,
and applying remote MAUs to the keys attributed to each router (held in the
tracker's ``RouterNode.addresses``), with sequence checking and MARs.

Must not: decide which local addresses are advertised (the caller reports
the first/last local destination of ``M``/``C``/``D``/``E``/``F``/``H``
keys), create address records (it reports ``MobileAddressesChanged``),
send RAs itself (the caller sends one right after a differential MAU), or
read the clock.
"""

from __future__ import annotations

import logging

import attrs

from router.core.routing.effects import ALL, Effect, MobileAddressesChanged, SendControl
from router.core.routing.linkstate import NodeTracker, RouterNode
from router.core.routing.logs import RouterLogger
from router.core.routing.messages import MobileAddressRequest, MobileAddressUpdate

__all__ = ["MobileSync"]

log = logging.getLogger(__name__)

NO_HINT = -1
"""The hint reported when a MAU's hints list is missing or does not match its keys."""


@attrs.define
class MobileSync:
    """This router's advertised keys, and the sync of every other router's keys."""

    router_id: str
    mobile_seq: int = 0
    local: dict[str, int] = attrs.field(factory=dict)
    published: dict[str, int] = attrs.field(factory=dict)
    warned: set[tuple[str, str]] = attrs.field(factory=set)
    log: RouterLogger = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.log = RouterLogger(log, self.router_id)

    def _warn_once(self, router_id: str, cause: str, fmt: str, *args: object) -> None:
        if (router_id, cause) not in self.warned:
            self.warned.add((router_id, cause))
            self.log.warning(fmt, *args)

    # --- local side ---------------------------------------------------------

    def address_added(self, key: str, hint: int) -> None:
        """``key`` gained its first local destination; ``hint`` is its treatment."""
        self.local.setdefault(key, hint)

    def address_removed(self, key: str) -> None:
        """``key`` lost its last local destination."""
        self.local.pop(key, None)

    def tick(self) -> list[Effect]:
        """At the 1 s sync tick: a differential MAU to all routers if the set changed.

        A key added and removed (or removed and re-added) since the last tick
        cancels out. The caller sends an RA with the new ``mobile_seq`` right after.
        """
        added = [key for key in self.local if key not in self.published]
        deleted = [key for key in self.published if key not in self.local]
        if not added and not deleted:
            return []
        self.mobile_seq += 1
        self.published = dict(self.local)
        message = MobileAddressUpdate(
            id=self.router_id, mobile_seq=self.mobile_seq, add=added, delete=deleted,
            hints=[self.local[key] for key in added],
        )
        self.log.debug("new mobile sequence %d: %d added, %d deleted",
                       self.mobile_seq, len(added), len(deleted))
        return [SendControl(message=message, destination=ALL)]

    def mar_received(self, msg: MobileAddressRequest, node: RouterNode | None) -> list[Effect]:
        """MAR: if the requester is behind, send it an absolute MAU."""
        if node is None:
            self._warn_once(msg.id, "unknown-mar",
                            "Received MAR from an unknown router with router id %s", msg.id)
            return []
        self.log.debug("received MAR from %s, have_seq=%d", msg.id, msg.have_seq)
        if msg.have_seq >= self.mobile_seq:
            return []
        reply = MobileAddressUpdate(
            id=self.router_id, mobile_seq=self.mobile_seq, exist=list(self.published),
            hints=list(self.published.values()),
        )
        return [SendControl(message=reply, destination=msg.id)]

    # --- remote side --------------------------------------------------------

    def request_updates(self, tracker: NodeTracker) -> list[Effect]:
        """MARs to reachable routers whose RA showed a newer ``mobile_seq`` than ours."""
        effects: list[Effect] = []
        for node in tracker.nodes.values():
            if not node.need_mobile_request or not tracker.is_reachable(node):
                continue
            node.need_mobile_request = False
            # A differential MAU may have caught us up since the RA.
            if node.mobile_seq < node.advertised_mobile_seq:
                effects.append(self._mar(node))
        return effects

    def _mar(self, node: RouterNode) -> SendControl:
        self.log.debug("send MAR to %s, have_seq=%d", node.id, node.mobile_seq)
        request = MobileAddressRequest(id=self.router_id, have_seq=node.mobile_seq)
        return SendControl(message=request, destination=node.id)

    def mau_received(self, msg: MobileAddressUpdate, node: RouterNode | None) -> list[Effect]:
        """MAU: update the keys attributed to the sender (docs/networks.md#mobile-addresses).

        A differential MAU that is not the next in sequence is ignored and
        answered with one MAR (until a usable MAU arrives).
        """
        if node is None:
            self._warn_once(msg.id, "unknown-mau",
                            "Received MAU from an unknown router with router id %s", msg.id)
            return []
        absolute = msg.exist is not None
        if absolute and (msg.add or msg.delete):
            self._warn_once(msg.id, "malformed-mau", "Received malformed MAU from %s", msg.id)
            return []
        if not absolute and node.mobile_seq != msg.mobile_seq - 1:
            if node.mobile_requested:
                return []
            node.mobile_requested = True
            self.log.debug("MAU from %s out of sequence: have %d, got %d",
                           msg.id, node.mobile_seq, msg.mobile_seq)
            return [self._mar(node)]
        node.mobile_requested = False
        node.mobile_seq = msg.mobile_seq
        keys = msg.exist if msg.exist is not None else msg.add
        hints = msg.hints if len(msg.hints) == len(keys) else (NO_HINT,) * len(keys)
        before = node.addresses
        after = {} if absolute else dict(before)
        for key, hint in zip(keys, hints, strict=True):
            after.setdefault(key, before.get(key, hint))
        for key in msg.delete:
            after.pop(key, None)
        node.addresses = after
        added = tuple((key, hint) for key, hint in after.items() if key not in before)
        removed = tuple(key for key in before if key not in after)
        self.log.debug("received %s MAU from %s, mobile_seq=%d",
                       "absolute" if absolute else "differential", msg.id, msg.mobile_seq)
        if not added and not removed:
            return []
        return [MobileAddressesChanged(router_id=msg.id, added=added, removed=removed)]
