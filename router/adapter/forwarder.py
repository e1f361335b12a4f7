"""The per-message path: receive a delivery, pick its destinations, send the
copies, carry outcomes and settlement back, keep the senders' credit.

Owns every proton call made per message, on raw ``cproton_ffi`` pointers
bound to local names.  Decisions come from the core (records maintained by
``router.core.Router``, choice functions from ``addressing``, outcome rules
from ``router.core.settlement``); this module must not make routing
decisions of its own beyond applying them, and must not allocate effect
objects per message.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from addressing import Distribution, choose_balanced
from router.adapter.pn import NULL, ffi, lib
from router.core import (
    UNAVAILABLE,
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
    decode_annotations,
    fold_multicast,
    may_have_router_keys,
    scan,
    strip_router_annotations,
)
from router.core.records import DEFAULT_PRIORITY
from router.core.settlement import ACCEPTED, MODIFIED, REJECTED, RELEASED, TERMINAL_STATES

log = logging.getLogger(__name__)

_MULTICAST = Distribution.MULTICAST
_CLOSEST = Distribution.CLOSEST
_ROUTER_KEY = b"x-opt-qd."

# Bound once: every attribute lookup on ``lib`` costs on the hot path.
pn_delivery = lib.pn_delivery
pn_delivery_readable = lib.pn_delivery_readable
pn_delivery_partial = lib.pn_delivery_partial
pn_delivery_pending = lib.pn_delivery_pending
pn_delivery_aborted = lib.pn_delivery_aborted
pn_delivery_settled = lib.pn_delivery_settled
pn_delivery_settle = lib.pn_delivery_settle
pn_delivery_update = lib.pn_delivery_update
pn_delivery_remote_state = lib.pn_delivery_remote_state
pn_delivery_remote = lib.pn_delivery_remote
pn_delivery_local = lib.pn_delivery_local
pn_delivery_abort = lib.pn_delivery_abort
pn_link_recv = lib.pn_link_recv
pn_link_send = lib.pn_link_send
pn_link_advance = lib.pn_link_advance
pn_link_credit = lib.pn_link_credit
pn_link_flow = lib.pn_link_flow
pn_link_get_drain = lib.pn_link_get_drain
pn_link_drained = lib.pn_link_drained
pn_link_set_drain = lib.pn_link_set_drain


def _router_of(annotation: str | None) -> str | None:
    """``"0/R1"`` (an ingress or trace entry) -> ``"R1"``."""
    if annotation is None:
        return None
    return annotation[2:] if annotation.startswith("0/") else annotation


def copy_disposition(dst: Any, src: Any, state: int) -> None:
    """Copy a consumer's delivery state, with its details, onto the producer's
    delivery (reference 6.1): rejected error, modified fields, received
    position, and the raw data of any other state (e.g. transactional)."""
    local = pn_delivery_local(dst)
    remote = pn_delivery_remote(src)
    if state == REJECTED:
        rc = lib.pn_disposition_condition(remote)
        if lib.pn_condition_is_set(rc):
            lc = lib.pn_disposition_condition(local)
            lib.pn_condition_set_name(lc, lib.pn_condition_get_name(rc))
            desc = lib.pn_condition_get_description(rc)
            if desc != NULL:
                lib.pn_condition_set_description(lc, desc)
            lib.pn_data_copy(lib.pn_condition_info(lc), lib.pn_condition_info(rc))
    elif state == MODIFIED:
        lib.pn_disposition_set_failed(local, lib.pn_disposition_is_failed(remote))
        lib.pn_disposition_set_undeliverable(local, lib.pn_disposition_is_undeliverable(remote))
        lib.pn_data_copy(lib.pn_disposition_annotations(local),
                         lib.pn_disposition_annotations(remote))
    elif state == 0x23:  # received
        lib.pn_disposition_set_section_number(local,
                                              lib.pn_disposition_get_section_number(remote))
        lib.pn_disposition_set_section_offset(local,
                                              lib.pn_disposition_get_section_offset(remote))
    elif state not in TERMINAL_STATES:
        lib.pn_data_copy(lib.pn_disposition_data(local), lib.pn_disposition_data(remote))
    pn_delivery_update(dst, state)


class Forwarder:
    """Moves messages between links.

    Args:
        router: the routing core whose records are read.
        router_id: this router's id, for the annotations it adds.
    """

    def __init__(self, router: Router, router_id: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.router = router
        self.router_id = router_id
        self.clock = clock
        self.credit_dirty: set[InLink] = set()
        # Adapter connections (``Connection.handle``) that have output to write.
        self.dirty: set[Any] = set()
        # Outgoing delivery tags: an 8-byte counter written into one buffer that
        # a preallocated pn_bytes_t points at (pn_delivery copies the tag).
        self._tag = ffi.new("uint64_t*")
        self._tag_bytes = ffi.new("pn_bytes_t*", (8, ffi.cast("char*", self._tag)))[0]
        self._next_tag = 0
        self._buf = bytearray(65536)
        self._view = memoryview(self._buf)
        self._cbuf = ffi.from_buffer(self._buf)
        self._size = len(self._buf)
        self.dropped_presettled = 0
        self._encoder = AnnotationEncoder(router_id)

    # -- receiving -----------------------------------------------------------

    def _grow(self, size: int) -> None:
        self._buf = bytearray(max(size, 2 * len(self._buf)))
        self._view = memoryview(self._buf)
        self._cbuf = ffi.from_buffer(self._buf)
        self._size = len(self._buf)

    def incoming(self, d: Any, il: InLink) -> None:
        """A PN_DELIVERY event on a router-incoming link."""
        n = pn_delivery_pending(d)
        if n == 0 or pn_delivery_partial(d) or pn_delivery_aborted(d) or il.partial is not None:
            # Rare: an update to a delivery already taken (nothing pending,
            # not readable), an empty transfer, or a multi-frame/aborted one.
            if not pn_delivery_readable(d):
                if pn_delivery_settled(d):
                    self._producer_settled(d, il)
                return
            self._incoming_in_pieces(d, il)
            return
        lptr = il.handle
        if n > self._size:
            self._grow(n)
        pn_link_recv(lptr, self._cbuf, n)
        data = self._view[:n].tobytes()
        if pn_delivery_settled(d):
            pn_link_advance(lptr)
            pn_delivery_settle(d)
            self.route(None, il, data)
        else:
            pn_link_advance(lptr)
            self.route(d, il, data)

    def _incoming_in_pieces(self, d: Any, il: InLink) -> None:
        """A multi-frame or aborted transfer: gather it until it is complete."""
        if pn_delivery_aborted(d):
            # Nothing was forwarded yet (messages are forwarded once complete),
            # so an aborted transfer just goes away; no outcome is due (6.5).
            il.partial = None
            pn_delivery_settle(d)
            self.credit_dirty.add(il)
            return
        lptr = il.handle
        n = pn_delivery_pending(d)
        if n > self._size:
            self._grow(n)
        if n:
            n = pn_link_recv(lptr, self._cbuf, n)
        if il.partial is None:
            il.partial = bytearray()
        if n > 0:
            il.partial += self._view[:n]
        if pn_delivery_partial(d):
            return
        data = bytes(il.partial)
        il.partial = None
        settled = pn_delivery_settled(d)
        pn_link_advance(lptr)
        if settled:
            pn_delivery_settle(d)
            d = None
        self.route(d, il, data)

    def route(self, d: Any, il: InLink, data: bytes) -> None:
        """Forward one complete message; ``d`` is ``None`` when pre-settled."""
        record = il.record
        if record is None and il.control:
            self._control(il, data)
            return
        # A message is scanned at most once, and only when it has to be: it
        # carries router annotations, or its address or the network matter.
        info: MessageInfo | None = None
        ann: RouterAnnotations | None = None
        keys = may_have_router_keys(data)
        if keys:
            try:
                info = scan(data)
                if not info.router_keys:
                    keys = False
                elif il.conn.strip_in:
                    data = strip_router_annotations(data, info)
                    info = None
                    keys = False
                else:
                    ann = decode_annotations(data, info)
            except MessageFormatError as exc:
                log.warning("%r: message rejected - invalid MA section: %s", il, exc)
                description = "invalid message format" \
                    if exc.condition == "amqp:decode-error" else str(exc)
                self._finish(d, il, REJECTED, exc.condition, description)
                return
        if record is None:
            if info is None:
                try:
                    info = scan(data)
                except MessageFormatError as exc:
                    log.warning("%r: message rejected: %s", il, exc)
                    self._finish(d, il, REJECTED, "amqp:decode-error", "invalid message format")
                    return
            record = self._anonymous_record(d, il, info, ann)
            if record is None:
                return
        if record.remotes or il.transit:
            self._route_network(d, il, data, record, info, ann)
            return
        consumers = record.consumers
        if not consumers:
            self._no_destination(d, il)
            return
        dist = record.distribution
        if dist is _MULTICAST:
            self._multicast(d, il, data, consumers)
            return
        if len(consumers) == 1:
            ol = consumers[0]
        elif dist is _CLOSEST:
            ol = consumers[0]
            consumers.append(consumers.pop(0))
        else:
            best = choose_balanced(consumers)
            assert best is not None
            ol = best
        if d is None:
            self.credit_dirty.add(il)
            ref: Transfer | None = None
        else:
            ref = Transfer(d, il)
            il.unsettled[d] = ref
        if ol.credit > 0 and not ol.queue:
            self._transmit(ol, data, ref, keys)
        else:
            self.send(ol, data, ref)

    # -- the network -------------------------------------------------------------

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
                self.block(effect.link)

    def _route_network(self, d: Any, il: InLink, data: bytes, record: AddressRecord,
                       info: MessageInfo | None, ann: RouterAnnotations | None) -> None:
        """Forward where remote routers are involved: a message for an address
        other routers have, or one that arrived from another router
        (reference 5.3 steps 6-8, 5.4)."""
        network = self.router.network
        assert network is not None
        if il.transit:
            self.credit_dirty.add(il)  # transit credit comes back on forwarding (5.2)
        if info is None:
            try:
                info = scan(data)
            except MessageFormatError as exc:
                self._finish(d, il, REJECTED, exc.condition, "invalid message format")
                return
        trace = ann.trace if ann is not None and ann.trace else ()
        if len(trace) > network.routes.radius + 1:
            log.debug("%r: released by the loop guard, trace %s", il, trace)
            self._no_destination(d, il)
            return
        origin = _router_of(ann.ingress) if ann is not None else None
        visited = {_router_of(t) for t in trace}
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
        consumers = record.consumers
        dist = record.distribution
        if dist is _MULTICAST:
            hops: dict[int, OutLink] = {}
            for target in record.remotes:
                rlink = target.link
                if rlink.peer in visited or rlink.link_id in hops:
                    continue
                if not network.valid_origin(target, origin):
                    continue
                out = rlink.data_link(priority)
                if out is not None:
                    hops[rlink.link_id] = out
            if not consumers and not hops:
                self._no_destination(d, il)
                return
            annotated = self._encoder.annotate(data, info, ann, to=to, phase=phase) if hops \
                else data
            copies = [(ol, data) for ol in consumers] + [(ol, annotated) for ol in hops.values()]
            if d is None:
                self.credit_dirty.add(il)
                for ol, payload in copies:
                    self.send(ol, payload, None)
                return
            f = Fanout(d, il)
            f.pending = len(copies)
            il.unsettled[d] = f
            for ol, payload in copies:
                self.send(ol, payload, f)
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
            remotes = [t for t in record.remotes
                       if t.link.peer not in visited and network.valid_origin(t, origin)]
            chosen = choose_balanced(consumers, remotes)
        if chosen is None:
            self._no_destination(d, il)
            return
        ref: Transfer | None = None
        if d is not None:
            ref = Transfer(d, il)
            il.unsettled[d] = ref
        else:
            self.credit_dirty.add(il)
        if isinstance(chosen, OutLink):
            self.send(chosen, data, ref)
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
        self.send(out, self._encoder.annotate(data, info, ann, to=to, phase=phase), ref)

    def _egress_annotations(self, ol: OutLink, data: bytes) -> bytes:
        """The message as sent to ``ol``: router keys stripped, or this router's
        ingress and trace added where the connection keeps annotations (5.7)."""
        info = scan(data)
        if ol.conn.strip_out:
            return strip_router_annotations(data, info)
        annotations = decode_annotations(data, info) if info.router_keys else None
        to = annotations.to if annotations is not None else None
        phase = annotations.phase if annotations is not None else None
        return self._encoder.annotate(data, info, annotations, to=to, phase=phase)

    def _anonymous_record(self, d: Any, il: InLink, info: MessageInfo,
                          ann: RouterAnnotations | None) -> AddressRecord | None:
        """The record a message on an anonymous link goes to (reference 5.3 step 8)."""
        to = info.to
        phase = 0
        if ann is not None and ann.to is not None:
            to = ann.to
            phase = ann.phase or 0
        if not to:
            self._finish(d, il, REJECTED, "amqp:precondition-failed",
                         "Routing failure: no address present")
            return None
        found = self.router.lookup(to, phase)
        if found is UNAVAILABLE:
            self._finish(d, il, REJECTED, "amqp:not-found",
                         "Deliveries cannot be sent to an unavailable address")
            return None
        if found is None:
            self._finish(d, il, RELEASED)
            return None
        assert isinstance(found, AddressRecord)
        return found

    def _no_destination(self, d: Any, il: InLink) -> None:
        """Nothing can receive (reference 5.5): release, or drop if pre-settled."""
        if d is None:
            self.dropped_presettled += 1
            self.credit_dirty.add(il)
        else:
            self._finish(d, il, RELEASED)

    def _finish(self, d: Any, il: InLink, state: int, condition: str | None = None,
                description: str | None = None) -> None:
        """Give a delivery the router's own outcome and settle it."""
        self.credit_dirty.add(il)
        if d is None:
            return
        if condition is not None:
            cond = lib.pn_disposition_condition(pn_delivery_local(d))
            lib.pn_condition_set_name(cond, condition.encode())
            if description:
                lib.pn_condition_set_description(cond, description.encode())
        elif state == MODIFIED:
            lib.pn_disposition_set_failed(pn_delivery_local(d), True)
        pn_delivery_update(d, state)
        pn_delivery_settle(d)
        self.dirty.add(il.conn.handle)

    def _multicast(self, d: Any, il: InLink, data: bytes, consumers: list[OutLink]) -> None:
        if d is None:
            self.credit_dirty.add(il)
            for ol in consumers:
                self.send(ol, data, None)
            return
        f = Fanout(d, il)
        f.pending = len(consumers)
        il.unsettled[d] = f
        for ol in list(consumers):
            self.send(ol, data, f)

    # -- sending ---------------------------------------------------------------

    def send(self, ol: OutLink, data: bytes, ref: Transfer | Fanout | None) -> None:
        """Send one copy on ``ol`` now if it has credit, else queue it."""
        if ol.credit > 0 and not ol.queue:
            self._transmit(ol, data, ref)
            return
        if ref is None and len(ol.queue) >= ol.capacity:
            self._drop_queued_presettled(ol)
        ol.queue.append((data, ref))

    def _transmit(self, ol: OutLink, data: bytes, ref: Transfer | Fanout | None,
                  keys: bool = True) -> None:
        """Send one copy now; ``keys`` False promises ``data`` has no router
        annotations (so a stripping connection needs no rewrite)."""
        conn = ol.conn
        if not ol.prepared and (not conn.strip_out or (keys and may_have_router_keys(data))):
            data = self._egress_annotations(ol, data)
        lptr = ol.handle
        self._next_tag += 1
        self._tag[0] = self._next_tag
        od = pn_delivery(lptr, self._tag_bytes)
        pn_link_send(lptr, data, len(data))
        pn_link_advance(lptr)
        ol.credit -= 1
        self.dirty.add(conn.handle)
        if ref is None:
            pn_delivery_settle(od)
        elif type(ref) is Transfer:
            d = ref.in_delivery
            if d is None:  # the producer settled or left meanwhile
                pn_delivery_settle(od)
            elif ol.presettle:
                pn_delivery_settle(od)
                ref.in_link.unsettled.pop(d, None)
                self._finish(d, ref.in_link, ACCEPTED)
            else:
                ref.out_delivery = od
                ref.out_link = ol
                ol.unsettled[od] = ref
        else:
            assert isinstance(ref, Fanout)
            if ref.in_delivery is None or ol.presettle:
                pn_delivery_settle(od)
                self._copy_done(ref, None, ACCEPTED if ol.presettle else RELEASED)
            else:
                ref.copies[od] = ol
                ol.unsettled[od] = ref

    def _drop_queued_presettled(self, ol: OutLink) -> None:
        """Reference 5.6: a full queue sheds its pre-settled copies but the head."""
        head = ol.queue.popleft()
        kept: deque[tuple[bytes, Transfer | Fanout | None]] = deque([head])
        for item in ol.queue:
            if item[1] is None:
                self.dropped_presettled += 1
            else:
                kept.append(item)
        ol.queue = kept

    def outgoing_flow(self, ol: OutLink) -> None:
        """PN_LINK_FLOW on a router-outgoing link: the consumer gave credit."""
        lptr = ol.handle
        ol.credit = pn_link_credit(lptr)
        queue = ol.queue
        while ol.credit > 0 and queue:
            data, ref = queue.popleft()
            self._transmit(ol, data, ref)
        if not queue and pn_link_get_drain(lptr):
            pn_link_drained(lptr)
            ol.credit = 0
            self.dirty.add(ol.conn.handle)

    # -- outcomes and settlement -------------------------------------------------

    def outgoing(self, od: Any, ol: OutLink) -> None:
        """A PN_DELIVERY event on a router-outgoing link: the consumer's disposition."""
        ref = ol.unsettled.get(od)
        settled = pn_delivery_settled(od)
        if ref is None:
            if settled:
                pn_delivery_settle(od)
            return
        state = pn_delivery_remote_state(od)
        if type(ref) is Transfer:
            d = ref.in_delivery
            if d is not None and state:
                if state in (ACCEPTED, RELEASED):
                    pn_delivery_update(d, state)
                else:
                    copy_disposition(d, od, state)
            if settled:
                del ol.unsettled[od]
                pn_delivery_settle(od)
                if ref.target is not None:
                    ref.target.outstanding -= 1
                    ref.target = None
                if d is not None:
                    pn_delivery_settle(d)
                    il = ref.in_link
                    del il.unsettled[d]
                    self.credit_dirty.add(il)
            if d is not None:
                self.dirty.add(ref.in_link.conn.handle)
            return
        assert isinstance(ref, Fanout)
        if settled:
            del ol.unsettled[od]
            ref.copies.pop(od, None)
            pn_delivery_settle(od)
            if ref.terminal is not None and od in ref.terminal:
                ref.terminal.discard(od)
                self._copy_done(ref, None, None)
            else:
                self._copy_done(ref, None, state or ACCEPTED)
        elif state in TERMINAL_STATES:
            if ref.terminal is None:
                ref.terminal = set()
            if od not in ref.terminal:
                ref.terminal.add(od)
                self._copy_reported(ref, state)

    def _copy_reported(self, f: Fanout, state: int) -> None:
        """A copy gave a terminal outcome without settling (consumer in settle
        mode "second").  Once every unsettled copy has, the producer is told
        the folded outcome so it can settle (reference 6.2)."""
        f.outcome = fold_multicast(f.outcome, state)
        f.reported += 1
        self._maybe_report(f)

    def _maybe_report(self, f: Fanout) -> None:
        d = f.in_delivery
        if d is not None and f.reported and f.reported == f.pending and f.outcome is not None:
            pn_delivery_update(d, f.outcome)
            self.dirty.add(f.in_link.conn.handle)

    def _copy_done(self, f: Fanout, _od: Any, state: int | None) -> None:
        """One multicast copy settled, with ``state`` unless already reported."""
        if state is not None:
            f.outcome = fold_multicast(f.outcome, state)
        else:
            f.reported -= 1
        f.pending -= 1
        if f.pending > 0:
            self._maybe_report(f)
            return
        d = f.in_delivery
        if d is None:
            return
        il = f.in_link
        f.in_delivery = None
        il.unsettled.pop(d, None)
        outcome = f.outcome if f.outcome is not None else RELEASED
        self._finish(d, il, outcome)

    def _producer_settled(self, d: Any, il: InLink) -> None:
        """The producer settled first: pass the settlement on (reference 6.1, 6.2)."""
        ref = il.unsettled.pop(d, None)
        if ref is not None:
            state = pn_delivery_remote_state(d)
            ref.in_delivery = None
            if type(ref) is Transfer:
                if ref.target is not None:
                    ref.target.outstanding -= 1
                    ref.target = None
                od = ref.out_delivery
                if od is not None and ref.out_link is not None:
                    ref.out_link.unsettled.pop(od, None)
                    if state:
                        pn_delivery_update(od, state)
                    pn_delivery_settle(od)
                    self.dirty.add(ref.out_link.conn.handle)
            else:
                assert isinstance(ref, Fanout)
                for od, ol in ref.copies.items():
                    ol.unsettled.pop(od, None)
                    if state:
                        pn_delivery_update(od, state)
                    pn_delivery_settle(od)
                    self.dirty.add(ol.conn.handle)
                ref.copies.clear()
        pn_delivery_settle(d)
        self.dirty.add(il.conn.handle)
        self.credit_dirty.add(il)

    # -- links going away ----------------------------------------------------------

    def lose_outgoing(self, ol: OutLink) -> None:
        """A consumer went away: every copy still routed to it ends (reference 6.4)."""
        queue, unsettled = ol.queue, ol.unsettled
        ol.queue = deque()
        ol.unsettled = {}
        for _data, ref in queue:
            if ref is not None:
                self._copy_lost(ref, None, RELEASED)
        for od, ref in unsettled.items():
            self._copy_lost(ref, od, MODIFIED)
            pn_delivery_settle(od)

    def _copy_lost(self, ref: Transfer | Fanout, od: Any, state: int) -> None:
        if type(ref) is Transfer:
            if ref.target is not None:
                ref.target.outstanding -= 1
                ref.target = None
            d = ref.in_delivery
            if d is not None:
                ref.in_delivery = None
                ref.in_link.unsettled.pop(d, None)
                self._finish(d, ref.in_link, state)
            return
        assert isinstance(ref, Fanout)
        if od is not None:
            ref.copies.pop(od, None)
        if ref.terminal is not None and od in ref.terminal:
            ref.terminal.discard(od)
            self._copy_done(ref, od, None)
        else:
            self._copy_done(ref, od, state)

    def lose_incoming(self, il: InLink) -> None:
        """A producer went away (reference 6.4): anycast copies carry on unlinked;
        multicast copies are settled MODIFIED toward their consumers."""
        unsettled = il.unsettled
        il.unsettled = {}
        il.partial = None
        for ref in unsettled.values():
            ref.in_delivery = None
            if type(ref) is Fanout:
                for od, ol in ref.copies.items():
                    ol.unsettled.pop(od, None)
                    lib.pn_disposition_set_failed(pn_delivery_local(od), True)
                    pn_delivery_update(od, MODIFIED)
                    pn_delivery_settle(od)
                    self.dirty.add(ol.conn.handle)
                ref.copies.clear()
        self.credit_dirty.discard(il)

    # -- credit ---------------------------------------------------------------------

    def flush_credit(self) -> None:
        """Top every touched sender's credit back up to its window (reference 5.2)."""
        dirty = self.credit_dirty
        if not dirty:
            return
        self.credit_dirty = set()
        for il in dirty:
            if il.blocked or il.handle is None:
                continue
            lptr = il.handle
            if il.transit:
                grant = il.window - pn_link_credit(lptr)
            else:
                grant = il.window - len(il.unsettled) - pn_link_credit(lptr)
            if il.partial is not None:
                grant -= 1
            if grant > 0:
                pn_link_flow(lptr, grant)
                self.dirty.add(il.conn.handle)

    def block(self, il: InLink) -> None:
        """The sender's address lost its last destination: drain its credit."""
        lib.pn_link_drain(il.handle, 0)
        self.dirty.add(il.conn.handle)

    def unblock(self, il: InLink) -> None:
        """The sender's address has a destination again."""
        pn_link_set_drain(il.handle, False)
        self.credit_dirty.add(il)
