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
from typing import Any, Final

from addressing import Distribution, choose_balanced
from router.adapter.pn import ffi, lib
from router.adapter.relay import Relay
from router.adapter.remote import RemoteForwarding
from router.adapter.settling import LOST_UNSETTLED
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
    Stream,
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
pn_delivery: Final = lib.pn_delivery
pn_delivery_readable: Final = lib.pn_delivery_readable
pn_delivery_partial: Final = lib.pn_delivery_partial
pn_delivery_pending: Final = lib.pn_delivery_pending
pn_delivery_aborted: Final = lib.pn_delivery_aborted
pn_delivery_settled: Final = lib.pn_delivery_settled
pn_delivery_settle: Final = lib.pn_delivery_settle
pn_delivery_update: Final = lib.pn_delivery_update
pn_delivery_remote_state: Final = lib.pn_delivery_remote_state
pn_delivery_remote: Final = lib.pn_delivery_remote
pn_delivery_local: Final = lib.pn_delivery_local
pn_delivery_abort: Final = lib.pn_delivery_abort
pn_link_recv: Final = lib.pn_link_recv
pn_link_send: Final = lib.pn_link_send
pn_link_advance: Final = lib.pn_link_advance
pn_link_credit: Final = lib.pn_link_credit
pn_link_flow: Final = lib.pn_link_flow
pn_link_get_drain: Final = lib.pn_link_get_drain
pn_link_drained: Final = lib.pn_link_drained
pn_link_set_drain: Final = lib.pn_link_set_drain
pn_link_current: Final = lib.pn_link_current

#: A multi-frame message gathered to this many bytes while more is still
#: arriving is forwarded frame by frame from then on (a ``Stream``).
STREAM_AT: Final = 131072
#: Bytes a streamed copy may fall behind (not yet framed toward its consumer,
#: or kept for a copy still waiting for credit) before the producer's
#: connection stops being read; reading resumes below ``LOW_WATER``.
HIGH_WATER: Final = 1 << 20
LOW_WATER: Final = 1 << 18


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
        # The message being routed while it streams (``route`` then starts
        # streamed copies instead of whole ones).
        self._stream: Stream | None = None
        #: Streams whose producer's connection is not read now, and the
        #: connections the engine is to read again (``Conn.holds`` counts).
        self.paused: list[Stream] = []
        self.resumed: list[Any] = []
        #: Counters: messages streamed, of them aborted, and pauses.
        self.streamed = 0
        self.streams_aborted = 0
        self.stream_pauses = 0

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
        """A multi-frame or aborted transfer: gather it until it is complete,
        or until it is large enough to stream (``STREAM_AT``)."""
        if self.streams:
            stream = self.streams.get(il)
            if stream is not None:
                self._stream_more(stream, d, il)
                return
        if pn_delivery_aborted(d):
            # Nothing was forwarded yet (messages are forwarded once complete),
            # so an aborted transfer just goes away; no outcome is due (6.5).
            self._whole(il)
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
            il.conn.partials += 1
        if n > 0:
            il.partial += self._view[:n]
        if len(il.partial) > il.max_size:
            self._oversized(d, il)
            return
        if pn_delivery_partial(d):
            if len(il.partial) >= STREAM_AT and not il.control:
                self._stream_begin(d, il)
            return
        data = bytes(il.partial)
        self._whole(il)
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
        self._whole(il)
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
                self._multicast(d, il, data, consumers, keys)
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

    def _multicast(self, d: Any, il: InLink, data: bytes, consumers: list[OutLink],
                   keys: bool) -> None:
        """One copy to each local consumer; ``keys`` as ``route`` found it, so
        that no copy scans the message again for router annotations."""
        if d is None:
            self.credit_dirty.add(il)
            for ol in consumers:
                self.send(ol, data, None, keys)
            return
        f = Fanout(d, il)
        f.pending = len(consumers)
        il.unsettled[d] = f
        for ol in list(consumers):
            self.send(ol, data, f, keys)

    # -- sending ---------------------------------------------------------------

    def send(self, ol: OutLink, data: bytes, ref: Transfer | Fanout | None,
             keys: bool = True) -> None:
        """Send one copy on ``ol`` now if it has credit, else queue it
        (``keys`` as for ``_transmit``)."""
        if ol.credit > 0 and not ol.queue:
            self._transmit(ol, data, ref, keys)
            return
        stream = self._stream
        if stream is not None:
            self._stream_wait(stream, ol, data, ref)
            return
        if ref is None and len(ol.queue) >= ol.capacity:
            self._drop_queued_presettled(ol)
        ol.queue.append((data, ref))

    def _transmit(self, ol: OutLink, data: bytes, ref: Transfer | Fanout | None,
                  keys: bool = True) -> None:
        """Send one copy now; ``keys`` False promises ``data`` has no router
        annotations (so a stripping connection needs no rewrite)."""
        stream = self._stream
        if stream is not None:
            self._stream_copy(stream, ol, data, ref, keys)
            return
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
        kept: deque[tuple[bytes | Stream, Transfer | Fanout | None]] = deque([head])
        for item in ol.queue:
            if item[1] is None and type(item[0]) is bytes:
                self.dropped_presettled += 1
                ol.dropped_presettled += 1
            else:
                kept.append(item)
        ol.queue = kept

    def outgoing_flow(self, ol: OutLink) -> None:
        """PN_LINK_FLOW on a router-outgoing link: the consumer gave credit."""
        if self.busy and ol in self.busy:
            return  # a streamed copy is being written: credit is read when it ends
        lptr = ol.handle
        ol.credit = pn_link_credit(lptr)
        queue = ol.queue
        while ol.credit > 0 and queue:
            data, ref = queue.popleft()
            if isinstance(data, Stream):
                self._stream_resume_copy(data, ol, ref)
            else:
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


    # -- streamed messages ---------------------------------------------------------

    def _stream_begin(self, d: Any, il: InLink) -> None:
        """A message still arriving has grown to ``STREAM_AT``: route it on what
        has come so far (every section up to the body is in it) and send its
        copies frame by frame from now on."""
        assert il.partial is not None
        head = bytes(il.partial)
        il.partial = bytearray()  # marks the link as mid-message (see flush_credit)
        settled = bool(pn_delivery_settled(d))
        stream = Stream(d, il, len(head))
        self.streams[il] = stream
        self.streamed += 1
        il.delivered += 1
        if settled:
            il.presettled += 1
        self._stream = stream
        try:
            self.route(None if settled else d, il, head)
        finally:
            self._stream = None
        if self.streams.get(il) is stream and self._behind(stream, HIGH_WATER):
            self._pause(stream)

    def _stream_copy(self, stream: Stream, ol: OutLink, data: bytes,
                     ref: Transfer | Fanout | None, keys: bool = True) -> None:
        """Start a streamed copy on ``ol`` (it has credit): its first bytes, and
        any that arrived while it waited; the link is busy until it ends."""
        conn = ol.conn
        if not ol.prepared and (not conn.strip_out or (keys and may_have_router_keys(data))):
            data = self._egress_annotations(ol, data)
        lptr = ol.handle
        self._next_tag += 1
        self._tag[0] = self._next_tag
        od = pn_delivery(lptr, self._tag_bytes)
        pn_link_send(lptr, data, len(data))
        backlog = stream.backlog
        if backlog:
            pn_link_send(lptr, ffi.from_buffer(backlog), len(backlog))
        ol.credit -= 1
        ol.delivered += 1
        self.dirty.add(conn.handle)
        # Whether the router settles the copy itself once it is sent, as
        # ``_transmit`` does at once for a whole message; else the consumer's
        # outcome settles it through ``unsettled``.
        owed = True
        if ref is None:
            ol.presettled += 1
        elif type(ref) is Transfer:
            if ref.in_delivery is not None and not ol.presettle:
                ref.out_delivery = od
                ref.out_link = ol
                ol.unsettled[od] = ref
                owed = False
        else:
            assert isinstance(ref, Fanout)
            if ref.in_delivery is not None and not ol.presettle:
                ref.copies[od] = ol
                ol.unsettled[od] = ref
                owed = False
        if stream.complete:
            self._stream_copy_end(ol, od, ref, owed)
            return
        stream.active[ol] = (od, ref, owed)
        self.busy[ol] = stream
        ol.credit = 0  # nothing else goes on the link until the copy ends

    def _stream_copy_end(self, ol: OutLink, od: Any, ref: Transfer | Fanout | None,
                         owed: bool) -> None:
        """A streamed copy ends: its delivery is complete (unless someone
        settled it early) and, where ``owed``, settled by the router."""
        lptr = ol.handle
        ours = lptr is not None and pn_link_current(lptr) == od
        if ours:
            pn_link_advance(lptr)
            self.dirty.add(ol.conn.handle)
        if not owed:
            return
        if ours:
            pn_delivery_settle(od)
        if ref is None:
            return
        if type(ref) is Transfer:
            d = ref.in_delivery
            if d is not None and ol.presettle:
                ref.in_link.unsettled.pop(d, None)
                self._finish(d, ref.in_link, ACCEPTED)
        else:
            assert isinstance(ref, Fanout)
            self._copy_done(ref, None, ACCEPTED if ol.presettle else RELEASED)

    def _stream_wait(self, stream: Stream, ol: OutLink, data: bytes,
                     ref: Transfer | Fanout | None) -> None:
        """A streamed copy for a link without credit waits in its queue, its
        first bytes kept; from now on the bytes that arrive are kept too."""
        if ol.handle is None:
            # An in-process consumer (management) takes whole messages only.
            self._stream_refused(ref)
            return
        stream.waiting.append(ol)
        stream.heads[ol] = data
        ol.queue.append((stream, ref))

    def _stream_refused(self, ref: Transfer | Fanout | None) -> None:
        if ref is None:
            return
        if type(ref) is Transfer:
            d = ref.in_delivery
            if d is not None:
                ref.in_delivery = None
                ref.in_link.unsettled.pop(d, None)
                self._finish(d, ref.in_link, REJECTED, "amqp:not-implemented",
                             "message too large for an in-process consumer")
            return
        assert isinstance(ref, Fanout)
        self._copy_done(ref, None, REJECTED)

    def _stream_resume_copy(self, stream: Stream, ol: OutLink,
                            ref: Transfer | Fanout | None) -> None:
        """A waiting streamed copy reached the head of its link's queue with credit."""
        stream.waiting.remove(ol)
        head = stream.heads.pop(ol)
        self._stream_copy(stream, ol, head, ref)
        if not stream.waiting:
            stream.backlog = bytearray()

    def _stream_more(self, stream: Stream, d: Any, il: InLink) -> None:
        """More of a streamed message: pass its bytes to every copy being written."""
        lptr = il.handle
        n = pn_delivery_pending(d)
        if n:
            if n > self._size:
                self._grow(n)
            n = pn_link_recv(lptr, self._cbuf, n)
            if n > 0:
                stream.size += n
                if stream.size > il.max_size:
                    self._stream_abort(stream)
                    self._oversized(d, il)
                    return
                if stream.waiting:
                    stream.backlog += self._view[:n]
                self._stream_send(stream, self._cbuf, n)
        if pn_delivery_partial(d):
            if not stream.paused and self._behind(stream, HIGH_WATER):
                self._pause(stream)
            return
        if pn_delivery_aborted(d):
            self._stream_abort(stream)
            pn_delivery_settle(d)  # proton settled it on the remote side
            self.credit_dirty.add(il)
            return
        # The last frame is in.
        stream.complete = True
        del self.streams[il]
        self._whole(il)
        pn_link_advance(lptr)
        if stream.paused:
            self._resume(stream)
        active = stream.active
        stream.active = {}
        for ol, (od, ref, owed) in active.items():
            self._stream_copy_end(ol, od, ref, owed)
            self._unbusy(ol)
        self.credit_dirty.add(il)
        if stream.settle:
            pn_delivery_settle(d)
        elif pn_delivery_settled(d):
            if d in il.unsettled:
                self._producer_settled(d, il)  # the producer settled at its last frame
            else:
                pn_delivery_settle(d)  # pre-settled from its first frame

    def _stream_send(self, stream: Stream, buf: Any, n: int) -> None:
        """Append ``n`` bytes of ``buf`` to every copy still being written; a copy
        whose delivery ended early (settled by its consumer or its producer)
        is dropped."""
        gone: list[OutLink] | None = None
        for ol, (od, _ref, _owed) in stream.active.items():
            lptr = ol.handle
            if lptr is not None and pn_link_current(lptr) == od:
                pn_link_send(lptr, buf, n)
                self.dirty.add(ol.conn.handle)
            else:
                if gone is None:
                    gone = []
                gone.append(ol)
        if gone is not None:
            for ol in gone:
                od, ref, owed = stream.active.pop(ol)
                self._stream_copy_end(ol, od, ref, owed)
                self._unbusy(ol)

    def _unbusy(self, ol: OutLink) -> None:
        """``ol`` no longer writes a streamed copy: its credit and queue move on."""
        if self.busy.pop(ol, None) is not None and ol.handle is not None:
            self.outgoing_flow(ol)

    def _stream_abort(self, stream: Stream) -> None:
        """The producer aborted the message, sent too much, or left mid-message:
        every copy being written is aborted, waiting ones are dropped, and
        nothing is owed to the producer (an aborted transfer has no outcome)."""
        il = stream.in_link
        self.streams.pop(il, None)
        self._whole(il)
        self.streams_aborted += 1
        if stream.paused:
            self._resume(stream)
        active = stream.active
        stream.active = {}
        for ol, (od, ref, _owed) in active.items():
            lptr = ol.handle
            if lptr is not None and pn_link_current(lptr) == od:
                lib.pn_delivery_abort(od)
                self.dirty.add(ol.conn.handle)
            if ref is not None:
                ol.unsettled.pop(od, None)
            self._unbusy(ol)
        for ol in stream.waiting:
            ol.queue = deque(item for item in ol.queue if item[0] is not stream)
        stream.waiting = []
        stream.heads = {}
        stream.backlog = bytearray()
        ref = il.unsettled.pop(stream.in_delivery, None)
        if ref is not None:
            ref.in_delivery = None
            if type(ref) is Transfer:
                if ref.target is not None:
                    ref.target.outstanding -= 1
                    ref.target = None
            else:
                assert isinstance(ref, Fanout)
                ref.copies.clear()

    def _behind(self, stream: Stream, limit: int) -> bool:
        """Whether a copy of ``stream`` is more than ``limit`` bytes behind."""
        if len(stream.backlog) > limit:
            return True
        for ol, (od, _ref, _owed) in stream.active.items():
            lptr = ol.handle
            if lptr is not None and pn_link_current(lptr) == od \
                    and pn_delivery_pending(od) > limit:
                return True
        return False

    def _pause(self, stream: Stream) -> None:
        """Stop reading the producer's connection until the copies catch up."""
        stream.paused = True
        self.paused.append(stream)
        self.stream_pauses += 1
        conn = stream.in_link.conn.handle
        conn.holds += 1

    def _resume(self, stream: Stream) -> None:
        stream.paused = False
        self.paused.remove(stream)
        conn = stream.in_link.conn.handle
        conn.holds -= 1
        if not conn.holds:
            self.resumed.append(conn)

    def check_paused(self) -> None:
        """Read the producers of paused streams again once their copies are
        within ``LOW_WATER`` (called after output was written)."""
        for stream in list(self.paused):
            if not self._behind(stream, LOW_WATER):
                self._resume(stream)

    def lose_incoming(self, il: InLink) -> None:
        if self.streams:
            stream = self.streams.get(il)
            if stream is not None:
                self._stream_abort(stream)
        super().lose_incoming(il)

    def lose_outgoing(self, ol: OutLink) -> None:
        if self.busy:
            stream = self.busy.pop(ol, None)
            if stream is not None:
                _od, ref, owed = stream.active.pop(ol)
                if owed and ref is not None:
                    # Not in ``unsettled``: lost here as ``lose_outgoing`` loses those.
                    self._copy_lost(ref, None, LOST_UNSETTLED)
        super().lose_outgoing(ol)
