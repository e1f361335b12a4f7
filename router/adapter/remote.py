"""Forwarding where other routers are involved (reference 5.3 steps 6-8,
5.4, 9.7): messages for addresses remote routers have, messages that
arrived from another router, and the routing protocol's own messages.

Owns choosing among local consumers and remote routers (valid origins,
trace exclusion, cost), the data link of a message's priority, and the
annotations the next router reads.  Remote destinations themselves are kept
by ``router.core.network``; this module must not recompute them per message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from addressing import Distribution, choose_balanced
from router.adapter.settling import Settling
from router.core import (
    FALLBACK_PHASE,
    AddressRecord,
    AnnotationEncoder,
    BlockSender,
    Effect,
    Fanout,
    InLink,
    MessageFormatError,
    MessageInfo,
    OutLink,
    RemoteTarget,
    Router,
    RouterAnnotations,
    SendFrame,
    Transfer,
    UnblockSender,
    scan,
    strip_router_annotations,
)
from router.core.records import DEFAULT_PRIORITY
from router.core.settlement import REJECTED

log = logging.getLogger(__name__)

_MULTICAST = Distribution.MULTICAST
_CLOSEST = Distribution.CLOSEST


_NOWHERE: frozenset[str] = frozenset()


class RemoteForwarding(Settling):
    """The network half of the forwarder (see ``Forwarder``)."""

    router: Router
    clock: Callable[[], float]
    _encoder: AnnotationEncoder

    def send(self, ol: OutLink, data: bytes, ref: Transfer | Fanout | None,
             keys: bool = True) -> None:
        raise NotImplementedError

    @staticmethod
    def _local_copy(ol: OutLink, data: bytes, info: MessageInfo,
                    ann: RouterAnnotations | None) -> tuple[bytes, bool]:
        """The bytes for a local consumer of a message that may carry router
        annotations: stripped here from the scan already made, so that the
        send does not scan the message again; ``False`` says no keys remain."""
        if ann is None:
            return data, False
        if ol.conn.strip_out:
            return strip_router_annotations(data, info), False
        return data, True

    def _looping(self, il: InLink, ann: RouterAnnotations) -> bool:
        """The loop guard (reference 5.3 step 7): more hops in the trace than
        the network's radius allows."""
        network = self.router.network
        trace = ann.trace
        if network is None or trace is None or len(trace) <= network.routes.radius + 1:
            return False
        log.debug("%r: released by the loop guard, trace %s", il, trace)
        return True

    def _control(self, il: InLink, data: bytes) -> None:
        """A message on a router-control link: the routing protocol's."""
        self.credit_dirty.add(il)
        network = self.router.network
        if network is None or il.router_link is None:
            return
        self.apply(network.control_received(il.router_link, data, self.clock()))

    def apply(self, effects: list[Effect]) -> None:
        """Carry out the core's effects: credit changes and control frames."""
        for effect in effects:
            if isinstance(effect, SendFrame):
                out = effect.link.control
                if out is not None and out.handle is not None:
                    self.send(out, effect.data, None)
            elif isinstance(effect, UnblockSender):
                if effect.link.handle is not None:
                    self.unblock(effect.link)
            elif isinstance(effect, BlockSender) and effect.link.handle is not None:
                self.block(effect.link, effect.drain)

    def _nowhere(self, d: Any, il: InLink, data: bytes, record: AddressRecord,
                  info: MessageInfo | None, ann: RouterAnnotations | None) -> None:
        """The address has no destination for the message (reference 5.5): its
        fallback takes it, unless the message came from a fallback link
        (reference 4.7), else it is released (dropped when pre-settled)."""
        fallback = record.fallback
        if fallback is None or il.fallback or not fallback.has_destination:
            self._no_destination(d, il)
            return
        self.redirected += 1
        record.redirected += 1
        self._route_network(d, il, data, fallback, info, ann, FALLBACK_PHASE)

    def _route_network(self, d: Any, il: InLink, data: bytes, record: AddressRecord,
                       info: MessageInfo | None, ann: RouterAnnotations | None,
                       phase_override: int | None = None) -> None:
        """Forward where remote routers are involved: a message for an address
        other routers have, or one that arrived from another router
        (reference 5.3 steps 6-8, 5.4); also a message redirected to a
        fallback destination (``phase_override``, reference 4.7)."""
        network = self.router.network
        if info is None:
            try:
                info = scan(data)
            except MessageFormatError as exc:
                self._finish(d, il, REJECTED, exc.condition, "invalid message format")
                return
        if ann is not None:
            if self._looping(il, ann):
                self._no_destination(d, il)
                return
            origin = ann.origin
            visited = ann.visited
        else:
            origin = None
            visited = _NOWHERE
        if record.priority is not None:
            priority = record.priority
        elif info.priority is not None:
            priority = min(info.priority, 9)
        else:
            priority = DEFAULT_PRIORITY
        if il.record is not None:
            to = il.address
            phase = il.phase or None
        else:
            to = ann.to if ann is not None else None
            phase = ann.phase if ann is not None else None
        if phase_override is not None:
            phase = phase_override
        consumers = record.consumers
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
                self._nowhere(d, il, data, record, info, ann)
                return
            annotated = self._encoder.annotate(data, info, ann, to=to, phase=phase) if hops \
                else data
            copies = [(ol, *self._local_copy(ol, data, info, ann)) for ol in consumers]
            copies += [(ol, annotated, False) for ol in hops.values()]
            record.transit += len(hops)
            if d is None:
                self.credit_dirty.add(il)
                for ol, payload, keys in copies:
                    self.send(ol, payload, None, keys)
                return
            f = Fanout(d, il)
            f.pending = len(copies)
            il.unsettled[d] = f
            for ol, payload, keys in copies:
                self.send(ol, payload, f, keys)
            return
        chosen: OutLink | RemoteTarget | None
        if dist is _CLOSEST:
            if consumers:
                chosen = consumers[0]
                consumers.append(consumers.pop(0))
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
            self._nowhere(d, il, data, record, info, ann)
            return
        ref: Transfer | None = None
        if d is not None:
            ref = Transfer(d, il)
            il.unsettled[d] = ref
        else:
            self.credit_dirty.add(il)
        if isinstance(chosen, OutLink):
            payload, keys = self._local_copy(chosen, data, info, ann)
            self.send(chosen, payload, ref, keys)
            return
        out = chosen.link.data_link(priority)
        if out is None:
            if ref is not None:
                del il.unsettled[d]
            self._no_destination(d, il)
            return
        if ref is not None:
            ref.target = chosen
            chosen.outstanding += 1
        record.transit += 1
        self.send(out, self._encoder.annotate(data, info, ann, to=to, phase=phase), ref)
