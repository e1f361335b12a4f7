"""The per-message path: receive a delivery, pick its destinations, send the
copies, keep the senders' credit.

Owns every proton call made per message on the receiving and sending side,
on raw ``cproton_ffi`` pointers bound to local names; outcomes and
settlement are ``router.adapter.settling``'s, routing toward other routers
``router.adapter.remote``'s, link-routed links ``router.adapter.relay``'s
(all are base classes of ``Forwarder``).
Decisions come from the core (records maintained by ``router.core.Router``,
choice functions from ``addressing``, outcome rules from
``router.core.settlement``); this module must not make routing decisions of
its own beyond applying them, and must not allocate effect objects per
message.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from addressing import Distribution, choose_balanced
from router.adapter.pn import ffi, lib
from router.adapter.relay import Relay
from router.adapter.remote import RemoteForwarding
from router.core import (
    UNAVAILABLE,
    AddressRecord,
    AnnotationEncoder,
    Fanout,
    InLink,
    MessageFormatError,
    MessageInfo,
    OutLink,
    Router,
    RouterAnnotations,
    Transfer,
    decode_annotations,
    may_have_router_keys,
    scan,
    strip_router_annotations,
    user_id_of,
)
from router.core.settlement import ACCEPTED, REJECTED, RELEASED

log = logging.getLogger(__name__)

_MULTICAST = Distribution.MULTICAST
_CLOSEST = Distribution.CLOSEST

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


class Forwarder(RemoteForwarding, Relay):
    """Moves messages between links.

    Args:
        router: the routing core whose records are read.
        router_id: this router's id, for the annotations it adds.
    """

    def __init__(self, router: Router, router_id: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.router = router
        self.router_id = router_id
        self.clock = clock
        # Outgoing delivery tags: an 8-byte counter written into one buffer that
        # a preallocated pn_bytes_t points at (pn_delivery copies the tag).
        self._tag = ffi.new("uint64_t*")
        self._tag_bytes = ffi.new("pn_bytes_t*", (8, ffi.cast("char*", self._tag)))[0]
        self._next_tag = 0
        self._buf = bytearray(65536)
        self._view = memoryview(self._buf)
        self._cbuf = ffi.from_buffer(self._buf)
        self._size = len(self._buf)
        self._encoder = AnnotationEncoder(router_id)
        #: Links that sent a message above their size limit, for the engine to close.
        self.oversized: list[InLink] = []

    # -- receiving -----------------------------------------------------------

    def _grow(self, size: int) -> None:
        self._buf = bytearray(max(size, 2 * len(self._buf)))
        self._view = memoryview(self._buf)
        self._cbuf = ffi.from_buffer(self._buf)
        self._size = len(self._buf)

    def incoming(self, d: Any, il: InLink) -> None:
        """A PN_DELIVERY event on a router-incoming link."""
        n = pn_delivery_pending(d)
        if n == 0 or pn_delivery_partial(d) or il.partial is not None:
            # Rare: an update to a delivery already taken (nothing pending,
            # not readable), an empty transfer, or a multi-frame one.
            if not pn_delivery_readable(d):
                if pn_delivery_settled(d):
                    self._producer_settled(d, il)
                return
            self._incoming_in_pieces(d, il)
            return
        # proton marks an aborted transfer settled (and complete), so only a
        # settled one needs the abort check.
        settled = pn_delivery_settled(d)
        if settled and pn_delivery_aborted(d):
            self._incoming_in_pieces(d, il)
            return
        if n > il.max_size:
            self._oversized(d, il)
            return
        lptr = il.handle
        if n > self._size:
            self._grow(n)
        pn_link_recv(lptr, self._cbuf, n)
        data = self._view[:n].tobytes()
        pn_link_advance(lptr)
        il.delivered += 1
        if settled:
            il.presettled += 1
            pn_delivery_settle(d)
            self.route(None, il, data)
        else:
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
        if len(il.partial) > il.max_size:
            self._oversized(d, il)
            return
        if pn_delivery_partial(d):
            return
        data = bytes(il.partial)
        il.partial = None
        settled = pn_delivery_settled(d)
        pn_link_advance(lptr)
        il.delivered += 1
        if settled:
            il.presettled += 1
            pn_delivery_settle(d)
            d = None
        self.route(d, il, data)

    def _oversized(self, d: Any, il: InLink) -> None:
        """A message above the connection's policy size limit (reference 5.3
        step 1): rejected and settled; the engine then closes the link and
        the connection (``oversized``).  Nothing more is read on the link."""
        il.partial = None
        il.max_size = -1
        il.delivered += 1
        self._finish(d, il, REJECTED, "amqp:link:message-size-exceeded",
                     "Message size exceeded")
        self.oversized.append(il)

    def _user_id_allowed(self, d: Any, il: InLink, data: bytes) -> bool:
        """Policy without allowUserIdProxy (reference 5.3 step 3): a message
        whose user-id is neither empty nor the connection's user is rejected."""
        try:
            user_id = user_id_of(data, scan(data, read_to=False))
        except MessageFormatError as exc:
            log.warning("%r: message rejected: %s", il, exc)
            self._finish(d, il, REJECTED, "amqp:decode-error", "invalid message format")
            return False
        if user_id is None or user_id == il.user_id:
            return True
        log.debug("[%r][L%d] Message rejected due to user_id proxy violation. User:%s",
                  il.conn, il.link_id, (il.user_id or b"").decode(errors="replace"))
        self._finish(d, il, REJECTED, "amqp:unauthorized-access", "user_id proxy violation")
        return False

    def route(self, d: Any, il: InLink, data: bytes) -> None:
        """Forward one complete message; ``d`` is ``None`` when pre-settled."""
        record = il.record
        if record is None and il.control:
            self._control(il, data)
            return
        if il.user_id is not None and not self._user_id_allowed(d, il, data):
            return
        # A message is scanned at most once, and only when it has to be: it
        # carries router annotations, or its address or the network matter.
        info: MessageInfo | None = None
        ann: RouterAnnotations | None = None
        # Messages from another router nearly always carry router keys: scan at once.
        keys = il.transit or may_have_router_keys(data)
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
        if il.transit:
            self.credit_dirty.add(il)  # transit credit comes back on forwarding (5.2)
        if record.remotes:
            self._route_network(d, il, data, record, info, ann)
            return
        # Only local consumers: the last router of a network path, or one router.
        if ann is not None and self._looping(il, ann):
            self._no_destination(d, il)
            return
        consumers = record.consumers
        if not consumers:
            self._nowhere(d, il, data, record, info, ann)
            return
        dist = record.distribution
        if dist is _MULTICAST:
            if ann is not None:  # each copy stripped as its connection wants
                self._route_network(d, il, data, record, info, ann)
            else:
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
        if ann is not None:
            assert info is not None
            data, keys = self._local_copy(ol, data, info, ann)
        if ol.credit > 0 and not ol.queue:
            self._transmit(ol, data, ref, keys)
        else:
            self.send(ol, data, ref)

    # -- the network -------------------------------------------------------------

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

    def send(self, ol: OutLink, data: bytes, ref: Transfer | Fanout | None,
             keys: bool = True) -> None:
        """Send one copy on ``ol`` now if it has credit, else queue it
        (``keys`` as for ``_transmit``)."""
        if ol.credit > 0 and not ol.queue:
            self._transmit(ol, data, ref, keys)
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
        ol.delivered += 1
        self.dirty.add(conn.handle)
        if ref is None:
            ol.presettled += 1
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
                ol.dropped_presettled += 1
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
        record = ol.record
        if record is not None and record.demand_senders:
            self.credit_dirty.update(record.demand_senders)

    # -- outcomes and settlement -------------------------------------------------

    def flush_credit(self) -> None:
        """Top every touched sender's credit back up to its window (reference 5.2)."""
        dirty = self.credit_dirty
        if not dirty:
            return
        self.credit_dirty = set()
        if self.frozen:
            return
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
            if il.demand:
                grant = min(grant, self._demand(il) - pn_link_credit(lptr))
            if grant > 0:
                pn_link_flow(lptr, grant)
                self.dirty.add(il.conn.handle)

    @staticmethod
    def _demand(il: InLink) -> int:
        """The credit a demand sender may hold: its share of what the local
        consumers of its address can take now (``router.core.destinations``)."""
        record = il.record
        assert record is not None
        room = 0
        for ol in record.consumers:
            free = ol.credit - len(ol.queue)
            if free > 0:
                room += free
        senders = len(record.demand_senders)
        if senders > 1 and room:
            return max(1, room // senders)
        return room

