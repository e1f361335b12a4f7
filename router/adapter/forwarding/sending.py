"""Sending copies on router-outgoing links: now when the link has credit,
else in its queue; the annotations each copy carries; a consumer's credit
moving the queue on.

Owns the outgoing side of the per-message path: delivery tags, the
router annotations a copy gets on its way out (stripped for a client
connection that does not keep them, this router added to the trace for
one that does; docs/routing.md#message-annotations), pre-settled copies
shed from a full queue, and starting, resuming and ending a streamed
copy (a message forwarded while it still arrives,
``router.adapter.forwarding.streaming``).  What a copy's outcome means for its
producer is ``router.adapter.forwarding.outcomes``'s.  It must not choose
destinations, and must not allocate effect objects per message.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final, Protocol

from router.adapter.forwarding.accel import send_copy
from router.adapter.forwarding.message_log import log_message
from router.adapter.forwarding.outcomes import Outcomes, copy_disposition
from router.adapter.pending import Counters, Pending
from router.adapter.pn import ffi, lib
from router.core import (
    AnnotationEncoder,
    Connection,
    Fanout,
    MessageInfo,
    MessageReader,
    OutLink,
    RouterAnnotations,
    Stream,
    Transfer,
    may_have_router_keys,
)
from router.core.exchanges import ExchangeQueue
from router.core.settlement import ACCEPTED, REJECTED, RELEASED

# Bound once: every attribute lookup on ``lib`` costs on the hot path.
pn_delivery: Final = lib.pn_delivery
pn_delivery_settle: Final = lib.pn_delivery_settle
pn_link_send: Final = lib.pn_link_send
pn_link_advance: Final = lib.pn_link_advance
pn_link_credit: Final = lib.pn_link_credit
pn_link_get_drain: Final = lib.pn_link_get_drain
pn_link_drained: Final = lib.pn_link_drained
pn_link_current: Final = lib.pn_link_current

Ref = Transfer | Fanout | None


class StreamingLinks(Protocol):
    """Links of their own for streamed copies to other routers
    (``router.adapter.endpoints.trunks.Trunks``)."""

    def wanted(self, ol: OutLink) -> bool: ...

    def take(self, conn: Connection) -> OutLink | None: ...

    def release(self, ol: OutLink) -> None: ...

    def lost(self, ol: OutLink) -> None: ...


def local_copy(ol: OutLink, data: bytes, info: MessageInfo, ann: RouterAnnotations | None,
               reader: MessageReader) -> tuple[bytes, bool]:
    """The bytes for a local consumer of a message that may carry router
    annotations: stripped here from the scan already made, so that the
    send does not scan the message again; ``False`` says no keys remain.
    A copy of a message that entered the network at another router is
    counted for the consumer's ingress histogram (``OutLink.ingress``)."""
    if ann is None:
        return data, False
    origin = ann.origin
    if origin is not None:
        counts = ol.ingress
        if counts is None:
            ol.ingress = counts = {}
        counts[origin] = counts.get(origin, 0) + 1
    if ol.conn.strip_out:
        return reader.strip_router_annotations(data, info), False
    return data, True


class Sender:
    """Puts copies on the wire.

    Args:
        router_id: this router's id, for the annotations it adds.
        pending: the wake-up's shared work.
        outcomes: settles what the router settles itself.
        counters: the router-wide counts.
        reader: this router's reading of messages (its memos).
        trunks: where streamed copies to other routers go instead of the link
            they share with other messages (None: on that link).
    """

    def __init__(self, router_id: str, pending: Pending, outcomes: Outcomes,
                 counters: Counters, reader: MessageReader,
                 trunks: StreamingLinks | None = None) -> None:
        self.reader = reader
        self.outcomes = outcomes
        self.counters = counters
        self.dirty = pending.output
        self.credit_dirty = pending.credit
        self.encoder = AnnotationEncoder(router_id)
        # Outgoing delivery tags: an 8-byte counter written into one buffer that
        # a preallocated pn_bytes_t points at (pn_delivery copies the tag).
        self._tag = ffi.new("uint64_t*")
        self._tag_bytes = ffi.new("pn_bytes_t*", (8, ffi.cast("char*", self._tag)))[0]
        self._next_tag = 0
        #: Out links busy writing a streamed copy: nothing else goes on them.
        self.busy: dict[OutLink, Stream] = {}
        self.trunks = trunks

    def send(self, ol: OutLink, data: bytes, ref: Ref, keys: bool = True,
             stream: Stream | None = None) -> None:
        """Send one copy on ``ol`` now if it has credit, else queue it
        (``keys`` and ``stream`` as for ``transmit``)."""
        if ol.credit > 0 and not ol.queue:
            self.transmit(ol, data, ref, keys, stream)
            return
        if stream is not None:
            self._stream_wait(stream, ol, data, ref)
            return
        if ref is None and len(ol.queue) >= ol.capacity:
            self._drop_queued_presettled(ol)
        ol.queue.append((data, ref))

    def _delivery(self, lptr: Any) -> Any:
        """A new outgoing delivery on ``lptr`` with the next tag."""
        self._next_tag += 1
        self._tag[0] = self._next_tag
        return pn_delivery(lptr, self._tag_bytes)

    def transmit(self, ol: OutLink, data: bytes, ref: Ref, keys: bool = True,
                 stream: Stream | None = None) -> None:
        """Send one copy now; ``keys`` False promises ``data`` has no router
        annotations (so a stripping connection needs no rewrite).  With a
        ``stream`` (a message routed while it still arrives, its first bytes
        in ``data``) the copy starts streaming instead."""
        if stream is not None:
            self._stream_copy(stream, ol, data, ref, keys)
            return
        conn = ol.conn
        if not ol.prepared and (not conn.strip_out or (keys and may_have_router_keys(data))):
            data = self.egress_annotations(ol, data)
        self._next_tag += 1
        od = send_copy(ol.handle, self._next_tag, data, len(data))
        ol.credit -= 1
        ol.delivered += 1
        if ol.logged:
            log_message(ol, data, True)
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
                self.outcomes.finish(d, ref.in_link, ACCEPTED)
            else:
                ref.out_delivery = od
                ref.out_link = ol
                ol.unsettled[od] = ref
                if ref.state:
                    copy_disposition(od, d, ref.state)
        else:
            assert isinstance(ref, Fanout)
            if ref.in_delivery is None or ol.presettle:
                pn_delivery_settle(od)
                self.outcomes.copy_done(ref, ACCEPTED if ol.presettle else RELEASED)
            else:
                ref.copies[od] = ol
                ol.unsettled[od] = ref
                if ref.state:
                    copy_disposition(od, ref.in_delivery, ref.state)

    def egress_annotations(self, ol: OutLink, data: bytes) -> bytes:
        """The message as sent to ``ol``: router keys stripped, or this router's
        ingress and trace added where the connection keeps annotations."""
        reader = self.reader
        info = reader.scan(data)
        if ol.conn.strip_out:
            return reader.strip_router_annotations(data, info)
        annotations = reader.decode_annotations(data, info) if info.router_keys else None
        to = annotations.to if annotations is not None else None
        phase = annotations.phase if annotations is not None else None
        return self.encoder.annotate(data, info, annotations, to=to, phase=phase)

    def _drop_queued_presettled(self, ol: OutLink) -> None:
        """A full queue sheds its pre-settled copies but the head
        (docs/routing.md#sending-to-consumers)."""
        head = ol.queue.popleft()
        kept: deque[tuple[bytes | Stream, Ref]] = deque([head])
        for item in ol.queue:
            if item[1] is None and type(item[0]) is bytes:
                self.counters.dropped_presettled += 1
                ol.dropped_presettled += 1
                ol.presettled += 1  # routed to it pre-settled, as qdrouterd counts
            else:
                kept.append(item)
        ol.queue = kept

    def outgoing_flow(self, ol: OutLink) -> None:
        """PN_LINK_FLOW on a router-outgoing link: the consumer gave credit."""
        if self.busy and ol in self.busy:
            return  # a streamed copy is being written: credit is read when it ends
        lptr = ol.handle
        ol.credit = pn_link_credit(lptr)
        ol.withheld = ol.credit <= 0 and ol.delivered == ol.flow_mark
        ol.flow_mark = ol.delivered
        if ol.starved_since is not None and ol.credit > 0:
            # A spell without credit ends here, however short, as qdrouterd
            # counts it (router.core.watch measures the next from its sweep).
            ol.starved_since = None
            ol.starved = False
        queue = ol.queue
        while ol.credit > 0 and queue:
            data, ref = queue.popleft()
            if isinstance(data, Stream):
                self._stream_resume_copy(data, ol, ref)
            else:
                self.transmit(ol, data, ref)
        if not queue and pn_link_get_drain(lptr):
            pn_link_drained(lptr)
            ol.credit = 0
            ol.withheld = True
            ol.flow_mark = ol.delivered
            self.dirty.add(ol.conn.handle)
        record = ol.record
        if record is not None and record.demand_senders:
            self.credit_dirty.update(record.demand_senders)

    # -- streamed copies -------------------------------------------------------------

    def _trunk(self, ol: OutLink, data: bytes) -> tuple[OutLink, bytes]:
        """The link a streamed copy for ``ol`` goes on, and its bytes: a
        streaming link of its own when ``ol`` leads to another router that
        takes them (``router.adapter.endpoints.trunks``), the copy then addressed, as
        it goes on an anonymous link; else ``ol`` itself."""
        trunks = self.trunks
        if trunks is None or not trunks.wanted(ol):
            return ol, data
        link = trunks.take(ol.conn)
        if link is None:
            return ol, data
        if not ol.prepared:
            info = self.reader.scan(data)
            annotations = self.reader.decode_annotations(data, info) \
                if info.router_keys else None
            to = annotations.to if annotations is not None else None
            phase = annotations.phase if annotations is not None else None
            record = ol.record
            if to is None:
                to = ol.address
                key = record.key if record is not None else ""
                if phase is None and key[:1] == "M" and key[1:2].isdigit() and key[1] != "0":
                    phase = int(key[1])
            data = self.encoder.annotate(data, info, annotations, to=to, phase=phase)
        return link, data

    def _stream_copy(self, stream: Stream, ol: OutLink, data: bytes, ref: Ref,
                     keys: bool = True) -> None:
        """Start a streamed copy on ``ol`` (it has credit): its first bytes, and
        any that arrived while it waited; the link is busy until it ends."""
        if self.trunks is not None:
            trunk, data = self._trunk(ol, data)
            if trunk is not ol:
                if trunk.credit <= 0 or trunk.queue:
                    self._stream_wait(stream, trunk, data, ref)
                    return
                ol = trunk
        conn = ol.conn
        if not ol.prepared and (not conn.strip_out or (keys and may_have_router_keys(data))):
            data = self.egress_annotations(ol, data)
        lptr = ol.handle
        od = self._delivery(lptr)
        pn_link_send(lptr, data, len(data))
        backlog = stream.backlog
        if backlog:
            pn_link_send(lptr, ffi.from_buffer(backlog), len(backlog))
        ol.credit -= 1
        ol.delivered += 1
        if ol.logged:
            log_message(ol, data, True)
        self.dirty.add(conn.handle)
        # Whether the router settles the copy itself once it is sent, as
        # ``transmit`` does at once for a whole message; else the consumer's
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
                if ref.state:
                    copy_disposition(od, ref.in_delivery, ref.state)
        else:
            assert isinstance(ref, Fanout)
            if ref.in_delivery is not None and not ol.presettle:
                ref.copies[od] = ol
                ol.unsettled[od] = ref
                owed = False
                if ref.state:
                    copy_disposition(od, ref.in_delivery, ref.state)
        if stream.complete:
            self.stream_copy_end(ol, od, ref, owed)
            if self.trunks is not None:
                self.trunks.release(ol)  # a streaming link is free for the next stream
            return
        stream.active[ol] = (od, ref, owed)
        self.busy[ol] = stream
        ol.credit = 0  # nothing else goes on the link until the copy ends

    def stream_copy_end(self, ol: OutLink, od: Any, ref: Ref, owed: bool) -> None:
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
                self.outcomes.finish(d, ref.in_link, ACCEPTED)
        else:
            assert isinstance(ref, Fanout)
            self.outcomes.copy_done(ref, ACCEPTED if ol.presettle else RELEASED)

    def _stream_wait(self, stream: Stream, ol: OutLink, data: bytes, ref: Ref) -> None:
        """A streamed copy for a link without credit waits in its queue, its
        first bytes kept; from now on the bytes that arrive are kept too."""
        if self.trunks is not None:
            trunk, data = self._trunk(ol, data)
            if trunk is not ol and trunk.credit > 0 and not trunk.queue:
                self._stream_copy(stream, trunk, data, ref)
                return
            ol = trunk
        if ol.handle is None and type(ol.queue) is not ExchangeQueue:
            # An in-process consumer takes whole messages only, but for an
            # exchange, which forwards the copies as the message arrives.
            self._stream_refused(ref)
            return
        stream.waiting.append(ol)
        stream.heads[ol] = data
        ol.queue.append((stream, ref))

    def _stream_refused(self, ref: Ref) -> None:
        if ref is None:
            return
        if type(ref) is Transfer:
            d = ref.in_delivery
            if d is not None:
                ref.in_delivery = None
                ref.in_link.unsettled.pop(d, None)
                self.outcomes.finish(d, ref.in_link, REJECTED, "amqp:not-implemented",
                                     "message too large for an in-process consumer")
            return
        assert isinstance(ref, Fanout)
        self.outcomes.copy_done(ref, REJECTED)

    def _stream_resume_copy(self, stream: Stream, ol: OutLink, ref: Ref) -> None:
        """A waiting streamed copy reached the head of its link's queue with credit."""
        stream.waiting.remove(ol)
        head = stream.heads.pop(ol)
        self._stream_copy(stream, ol, head, ref)
        if not stream.waiting:
            stream.backlog = bytearray()


__all__ = ["Ref", "Sender", "local_copy"]
