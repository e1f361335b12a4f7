"""Forwarding where other routers are involved: messages for addresses
remote routers have, messages that arrived from another router, messages
for a fallback destination, and the routing protocol's own messages
(docs/networks.md#messages-across-routers).

Owns choosing among local consumers and remote routers (valid origins,
trace exclusion, cost), the data link of a message's priority, the
annotations the next router reads, and the address a message on an
anonymous link goes to.  Remote destinations themselves are kept by
``router.core.network``; this module must not recompute them per message.
"""

from __future__ import annotations

import logging
from typing import Any

from addressing import Distribution, choose_balanced, choose_closest, effective_priority
from router.adapter.forwarding.outcomes import Outcomes
from router.adapter.forwarding.sending import Sender, local_copy
from router.adapter.pending import Counters, Pending
from router.core import (
    FALLBACK_PHASE,
    UNAVAILABLE,
    AddressRecord,
    InLink,
    MessageFormatError,
    MessageInfo,
    MessageReader,
    OutLink,
    RemoteTarget,
    Router,
    RouterAnnotations,
    Stream,
    UplinkTarget,
    annotate_upward,
)
from router.core.edges import EDGE_KEY
from router.core.policy import TARGET_DENIED
from router.core.settlement import ACCEPTED, REJECTED, RELEASED

log = logging.getLogger(__name__)

_MULTICAST = Distribution.MULTICAST
_CLOSEST = Distribution.CLOSEST

_NOWHERE: frozenset[str] = frozenset()


class NetworkForwarding:
    """The network half of the forwarder.

    Args:
        router: the routing core (its network and address lookup).
        pending: the wake-up's shared work (the protocol's effects go there).
        outcomes: the router's own outcomes.
        sender: sends the copies.
        counters: the router-wide counts.
        reader: this router's reading of messages (its memos).
    """

    def __init__(self, router: Router, pending: Pending, outcomes: Outcomes, sender: Sender,
                 counters: Counters, reader: MessageReader) -> None:
        self.router = router
        self.reader = reader
        self.outcomes = outcomes
        self.sender = sender
        self.encoder = sender.encoder
        self.counters = counters
        self.credit_dirty = pending.credit
        self.effects = pending.effects

    def looping(self, il: InLink, ann: RouterAnnotations) -> bool:
        """The loop guard (docs/networks.md#the-loop-guard): more hops in the trace
        than the network's radius allows."""
        network = self.router.network
        trace = ann.trace
        if network is None or trace is None or len(trace) <= network.routes.radius + 1:
            return False
        log.debug("%r: released by the loop guard, trace %s", il, trace)
        return True

    def control(self, d: Any, il: InLink, data: bytes, now: float) -> None:
        """A message on a router-control link (the routing protocol's) or on
        an edge service's link (address tracking, heartbeats, lookups); what
        it makes the router do is carried out once the event is handled. An
        unsettled one (``d``) is accepted, or rejected when a service refuses
        it (docs/networks.md#edge-routers)."""
        self.credit_dirty.add(il)
        if il.router_link is None:
            taken, effects = self.router.service_received(il, data, now)
            if d is not None:
                self.outcomes.finish(d, il, ACCEPTED if taken else REJECTED)
            self.effects.extend(effects)
            return
        if d is not None:
            self.outcomes.finish(d, il, ACCEPTED)
        network = self.router.network
        if network is None:
            return
        self.effects.extend(network.control_received(il.router_link, data, now))

    def anonymous_record(self, d: Any, il: InLink, info: MessageInfo,
                         ann: RouterAnnotations | None) -> AddressRecord | None:
        """The record a message on an anonymous link goes to
        (docs/routing.md#anonymous-senders)."""
        to = info.to
        phase = 0
        if ann is not None and ann.to is not None:
            to = ann.to
            phase = ann.phase or 0
        if not to:
            self.outcomes.finish(d, il, REJECTED, "amqp:precondition-failed",
                                 "Routing failure: no address present")
            return None
        allowed = il.target_allowed
        if allowed is not None and not allowed(to):
            log.debug("%r: message to %r rejected: policy violation on target", il, to)
            self.outcomes.finish(d, il, REJECTED, "amqp:unauthorized-access",
                                 TARGET_DENIED)
            return None
        found = self.router.lookup(to, phase)
        if found is UNAVAILABLE:
            self.outcomes.finish(d, il, REJECTED, "amqp:not-found",
                                 "Deliveries cannot be sent to an unavailable address")
            return None
        if found is None:
            log.debug("%r: no route to %r, released", il, to)
            self.outcomes.finish(d, il, RELEASED)
            return None
        assert isinstance(found, AddressRecord)
        return found

    def nowhere(self, d: Any, il: InLink, data: bytes, record: AddressRecord,
                info: MessageInfo | None, ann: RouterAnnotations | None,
                stream: Stream | None = None) -> None:
        """The address has no destination for the message
        (docs/routing.md#when-nothing-can-receive): its
        fallback takes it, unless the message came from a fallback link
        (docs/routing.md#fallback), else it is released (dropped when pre-settled)."""
        if self.router.uplink is not None and il.record is None and not il.transit:
            # An edge router: what an anonymous sender sends where the edge
            # has no destination goes up the uplink (docs/networks.md#edge-routers).
            beyond = self.router.records.get(EDGE_KEY)
            if beyond is not None and beyond is not record and beyond.remotes:
                self._upward(d, il, data, beyond, info, ann, stream)
                return
        fallback = record.fallback
        if fallback is None or il.fallback or not fallback.has_destination:
            self.outcomes.no_destination(d, il)
            return
        self.counters.redirected += 1
        record.redirected += 1
        self.route(d, il, data, fallback, info, ann, FALLBACK_PHASE, stream)

    def route(self, d: Any, il: InLink, data: bytes, record: AddressRecord,
              info: MessageInfo | None, ann: RouterAnnotations | None,
              phase_override: int | None = None, stream: Stream | None = None) -> None:
        """Forward where remote routers are involved: a message for an address
        other routers have, or one that arrived from another router
        (docs/networks.md#messages-across-routers); also a message redirected to
        a fallback destination (``phase_override``, docs/routing.md#fallback).
        ``stream`` as for ``Forwarder.route``."""
        network = self.router.network
        if info is None:
            info = self._scanned(d, il, data)
            if info is None:
                return
        if self.router.uplink is not None:
            self._edge(d, il, data, record, info, ann, phase_override, stream)
            return
        remotes = record.remotes
        if remotes and type(remotes[0]) is UplinkTarget:
            self._down(d, il, data, record, info, ann, remotes[0].link, stream)
            return
        if ann is not None:
            if self.looping(il, ann):
                self.outcomes.no_destination(d, il)
                return
            origin = ann.origin
            visited = ann.visited
        else:
            origin = None
            visited = _NOWHERE
        priority = effective_priority(record.priority, info.priority)
        to, phase = addressed(il, ann, phase_override)
        consumers = record.consumers
        if il.transit and il.router_link is None:
            consumers = self._elsewhere(il, consumers)
        dist = record.distribution
        if dist is _MULTICAST:
            hops: dict[int, OutLink] = {}
            for target in record.remotes:
                rlink = target.link
                if rlink.peer in visited or rlink.link_id in hops:
                    continue
                if network is not None and not network.valid_origin(target, origin):
                    continue
                out = rlink.data_link(priority)
                if out is not None:
                    hops[rlink.link_id] = out
            if not consumers and not hops:
                self.nowhere(d, il, data, record, info, ann, stream)
                return
            annotated = self.encoder.annotate(data, info, ann, to=to, phase=phase) if hops \
                else data
            copies = [(ol, *local_copy(ol, data, info, ann, self.reader)) for ol in consumers]
            copies += [(ol, annotated, False) for ol in hops.values()]
            record.transit += len(hops)
            self._fan_out(d, il, copies, stream)
            return
        chosen: OutLink | RemoteTarget | None
        if dist is _CLOSEST:
            if consumers:
                chosen = choose_closest(consumers)
            else:
                chosen = None
                closest = record.closest_remotes
                for i, target in enumerate(closest):
                    if target.link.peer not in visited:
                        chosen = target
                        closest.append(closest.pop(i))
                        break
        else:
            remotes = [t for t in record.remotes if t.link.peer not in visited
                       and (network is None or network.valid_origin(t, origin))]
            chosen = choose_balanced(consumers, remotes)
        if chosen is None:
            self.nowhere(d, il, data, record, info, ann, stream)
            return
        ref = self.outcomes.transfer(d, il, data, record, ann, phase_override, stream)
        if isinstance(chosen, OutLink):
            if consumers is not record.consumers and len(record.consumers) > 1:
                _rotate(record.consumers, chosen)
            payload, keys = local_copy(chosen, data, info, ann, self.reader)
            self.sender.send(chosen, payload, ref, keys, stream)
            return
        out = chosen.link.data_link(priority)
        if out is None:
            if ref is not None:
                del il.unsettled[d]
            self.outcomes.no_destination(d, il)
            return
        if ref is not None:
            hop = chosen.hop
            ref.target = hop
            hop.outstanding += 1
        record.transit += 1
        self.sender.send(out, self.encoder.annotate(data, info, ann, to=to, phase=phase), ref,
                         True, stream)

    def _fan_out(self, d: Any, il: InLink, copies: list[tuple[OutLink, bytes, bool]],
                 stream: Stream | None) -> None:
        """Send the copies of one multicast message, ``(link, bytes, keys)``
        each; an unsettled one is settled once every copy is."""
        f = self.outcomes.fanout(d, il, len(copies))
        for ol, payload, keys in copies:
            self.sender.send(ol, payload, f, keys, stream)

    @staticmethod
    def _elsewhere(il: InLink, consumers: list[OutLink]) -> list[OutLink]:
        """The consumers not on the edge connection ``il`` is on: a message
        from an edge never goes back over it (docs/networks.md#edge-routers)."""
        conn = il.conn
        for ol in consumers:
            if ol.conn is conn:
                return [c for c in consumers if c.conn is not conn]
        return consumers

    def _down(self, d: Any, il: InLink, data: bytes, record: AddressRecord, info: MessageInfo,
              ann: RouterAnnotations | None, down: OutLink, stream: Stream | None) -> None:
        """Send a message for ``_edge/<id>/...`` down the downlink of an edge
        attached here, addressed (``x-opt-qd.to``) as its producer's link is,
        since the downlink is anonymous at the edge (docs/networks.md#edge-routers)."""
        if il.transit and il.router_link is None and down.conn is il.conn:
            # never back to the edge it came from
            self.nowhere(d, il, data, record, info, ann, stream)
            return
        to, phase = addressed(il, ann, None)
        ref = self.outcomes.transfer(d, il, data, record, ann, None, stream)
        record.transit += 1
        self.sender.send(down, self.encoder.annotate(data, info, ann, to=to, phase=phase), ref,
                         False, stream)

    # -- an edge router ---------------------------------------------------------------

    def _edge(self, d: Any, il: InLink, data: bytes, record: AddressRecord, info: MessageInfo,
              ann: RouterAnnotations | None, phase_override: int | None,
              stream: Stream | None) -> None:
        """Forward on an edge router (docs/networks.md#edge-routers): among the
        consumers on the edge and the uplink, which is the way to every
        destination beyond it.  A message that came down the uplink never
        goes back up; an anonymous sender's multicast copy goes up the
        anonymous uplink link when the address has no uplink link of its own."""
        consumers = record.consumers
        from_uplink = il.transit
        remotes: list[UplinkTarget] = [] if from_uplink else record.remotes
        dist = record.distribution
        if dist is _MULTICAST:
            up: OutLink | None = remotes[0].link if remotes else None
            if up is None and il.record is None and not from_uplink:
                beyond = self.router.records.get(EDGE_KEY)
                if beyond is not None and beyond.remotes:
                    up = beyond.remotes[0].link
            if not consumers and up is None:
                self.nowhere(d, il, data, record, info, ann, stream)
                return
            copies = [(ol, *local_copy(ol, data, info, ann, self.reader)) for ol in consumers]
            if up is not None:
                copies.append((up, self.upward_copy(il, data, info, ann, phase_override),
                               False))
            self._fan_out(d, il, copies, stream)
            return
        chosen: OutLink | UplinkTarget | None
        if dist is _CLOSEST:
            chosen = choose_closest(consumers) if consumers else \
                (remotes[0] if remotes else None)
        else:
            chosen = choose_balanced(consumers, remotes)
        if chosen is None:
            self.nowhere(d, il, data, record, info, ann, stream)
            return
        ref = self.outcomes.transfer(d, il, data, record, ann, phase_override, stream)
        if isinstance(chosen, OutLink):
            payload, keys = local_copy(chosen, data, info, ann, self.reader)
            self.sender.send(chosen, payload, ref, keys, stream)
            return
        self.sender.send(chosen.link, self.upward_copy(il, data, info, ann, phase_override),
                         ref, False, stream)

    def _upward(self, d: Any, il: InLink, data: bytes, beyond: AddressRecord,
                info: MessageInfo | None, ann: RouterAnnotations | None,
                stream: Stream | None) -> None:
        """Send an anonymous sender's message up the anonymous uplink link."""
        if info is None:
            info = self._scanned(d, il, data)
            if info is None:
                return
        self._edge(d, il, data, beyond, info, ann, None, stream)

    def _scanned(self, d: Any, il: InLink, data: bytes) -> MessageInfo | None:
        """What ``data`` says of itself, or None when it is not a message
        (then rejected)."""
        try:
            return self.reader.scan(data)
        except MessageFormatError as exc:
            self.outcomes.finish(d, il, REJECTED, exc.condition, "invalid message format")
            return None

    @staticmethod
    def upward_copy(il: InLink, data: bytes, info: MessageInfo,
                     ann: RouterAnnotations | None, phase_override: int | None) -> bytes:
        """The copy that goes up the uplink: addressed (``x-opt-qd.to``) as the
        producer's link is, or as it arrived, with no ingress or trace; a
        streamed message keeps its marker (a carried TCP connection)."""
        to, phase = addressed(il, ann, phase_override)
        return annotate_upward(data, info, to=to, phase=phase,
                               stream=ann.stream if ann is not None else None)


def addressed(il: InLink, ann: RouterAnnotations | None,
              phase_override: int | None) -> tuple[str | None, int | None]:
    """``x-opt-qd.to`` and the phase a copy to another router carries
    (docs/networks.md#messages-across-routers): the producer's link's
    address and phase, or the message's as it arrived; a fallback's phase
    (``phase_override``) wins."""
    if il.record is not None:
        to: str | None = il.address
        phase = il.phase or None
    else:
        to = ann.to if ann is not None else None
        phase = ann.phase if ann is not None else None
    if phase_override is not None:
        phase = phase_override
    return to, phase


def _rotate(consumers: list[OutLink], chosen: OutLink) -> None:
    """Move ``chosen`` to the end of ``consumers`` (the round-robin order)."""
    if consumers[-1] is not chosen and chosen in consumers:
        consumers.remove(chosen)
        consumers.append(chosen)


__all__ = ["NetworkForwarding", "addressed"]
