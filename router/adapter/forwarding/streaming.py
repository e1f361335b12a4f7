"""Messages forwarded while they still arrive (docs/routing.md#large-messages).

Owns a streamed message once its copies have started: passing each new
frame's bytes to every copy being written, ending or aborting the copies
when the message ends or is aborted, and holding back the producer's
connection while a copy is too far behind (``HIGH_WATER``), reading it
again once every copy is within ``LOW_WATER``.  Starting a stream is the
forwarder's (it routes the message's first bytes); starting, resuming and
ending each copy is ``router.adapter.forwarding.sending``'s.  Memory stays bounded:
a copy that cannot keep up stops its producer, it never buffers the message.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

from addressing import Role
from router.adapter.forwarding.dispositions import Dispositions
from router.adapter.forwarding.outcomes import LOST_UNSETTLED, Outcomes, whole
from router.adapter.forwarding.sending import Sender, StreamingLinks
from router.adapter.pending import Counters, Pending, ReceiveBuffer
from router.adapter.pn import lib
from router.core import Connection, Fanout, InLink, OutLink, Stream, Transfer

pn_delivery_pending: Final = lib.pn_delivery_pending
pn_delivery_partial: Final = lib.pn_delivery_partial
pn_delivery_aborted: Final = lib.pn_delivery_aborted
pn_delivery_settled: Final = lib.pn_delivery_settled
pn_delivery_settle: Final = lib.pn_delivery_settle
pn_link_recv: Final = lib.pn_link_recv
pn_link_send: Final = lib.pn_link_send
pn_link_advance: Final = lib.pn_link_advance
pn_link_current: Final = lib.pn_link_current

#: A multi-frame message gathered to this many bytes while more is still
#: arriving is forwarded frame by frame from then on (a ``Stream``).
STREAM_AT: Final = 131072
#: Bytes a streamed copy may fall behind (not yet framed toward its consumer,
#: or kept for a copy still waiting for credit) before the producer's
#: connection stops being read; reading resumes below ``LOW_WATER``.
HIGH_WATER: Final = 1 << 20
LOW_WATER: Final = 1 << 18
#: Connections never held for a copy behind: between routers.
UNHELD: Final = (Role.INTER_ROUTER, Role.EDGE)


class Streams:
    """The streamed messages under way.

    Args:
        pending: the wake-up's shared work.
        outcomes: settlement (it keeps the streams by incoming link).
        dispositions: what a copy lost with its consumer means for its producer.
        sender: ends and resumes the copies.
        buffer: what incoming bytes are read into.
        counters: the router-wide counts.
        trunks: the streaming links between routers, free again when a copy ends.
    """

    def __init__(self, pending: Pending, outcomes: Outcomes, dispositions: Dispositions,
                 sender: Sender, buffer: ReceiveBuffer, counters: Counters,
                 trunks: StreamingLinks | None = None) -> None:
        self.outcomes = outcomes
        self.dispositions = dispositions
        self.sender = sender
        self.trunks = trunks
        self.buffer = buffer
        self.counters = counters
        self.dirty = pending.output
        self.credit_dirty = pending.credit
        #: Streams whose producer's connection is not read now, and the
        #: connections the engine is to read again (``Conn.holds`` counts).
        self.paused: list[Stream] = []
        self.resumed: list[Any] = []

    def started(self, stream: Stream) -> None:
        """``stream``'s first bytes were routed: its copies are under way."""
        il = stream.in_link
        if self.outcomes.streams.get(il) is stream and self._behind(stream, HIGH_WATER):
            self._pause(stream)

    def more(self, stream: Stream, d: Any, il: InLink) -> None:
        """More of a streamed message: pass its bytes to every copy being written."""
        lptr = il.handle
        buffer = self.buffer
        n = pn_delivery_pending(d)
        if n:
            if n > buffer.size:
                buffer.grow(n)
            n = pn_link_recv(lptr, buffer.cbuf, n)
            if n > 0:
                stream.size += n
                if stream.size > il.max_size:
                    self.abort(stream)
                    self.outcomes.oversized(d, il)
                    return
                if stream.waiting:
                    stream.backlog += buffer.view[:n]
                self._send(stream, buffer.cbuf, n)
        if pn_delivery_partial(d):
            if not stream.paused and self._behind(stream, HIGH_WATER):
                self._pause(stream)
            return
        if pn_delivery_aborted(d):
            self.abort(stream)
            pn_delivery_settle(d)  # proton settled it on the remote side
            self.credit_dirty.add(il)
            return
        # The last frame is in.
        stream.complete = True
        del self.outcomes.streams[il]
        whole(il)
        pn_link_advance(lptr)
        if stream.paused:
            self._resume(stream)
        active = stream.active
        stream.active = {}
        for ol, (od, ref, owed) in active.items():
            self.sender.stream_copy_end(ol, od, ref, owed)
            self._unbusy(ol)
        self.credit_dirty.add(il)
        if stream.settle:
            pn_delivery_settle(d)
        elif pn_delivery_settled(d):
            if d in il.unsettled:
                self.outcomes.producer_settled(d, il)  # settled at its last frame
            else:
                pn_delivery_settle(d)  # pre-settled from its first frame

    def _send(self, stream: Stream, buf: Any, n: int) -> None:
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
                self.sender.stream_copy_end(ol, od, ref, owed)
                self._unbusy(ol)

    def _unbusy(self, ol: OutLink) -> None:
        """``ol`` no longer writes a streamed copy: its credit and queue move on
        (a streaming link is free for the next stream)."""
        sender = self.sender
        if sender.busy.pop(ol, None) is not None and ol.handle is not None:
            sender.outgoing_flow(ol)
        if self.trunks is not None:
            self.trunks.release(ol)

    def abort(self, stream: Stream) -> None:
        """The producer aborted the message, sent too much, or left mid-message:
        every copy being written is aborted, waiting ones are dropped, and
        nothing is owed to the producer (an aborted transfer has no outcome)."""
        il = stream.in_link
        self.outcomes.streams.pop(il, None)
        whole(il)
        self.counters.streams_aborted += 1
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
        trunks = self.trunks
        for ol in stream.waiting:
            if ol.queue:  # an in-process consumer's queue holds nothing, and stays its own
                ol.queue = deque(item for item in ol.queue if item[0] is not stream)
            if trunks is not None:
                trunks.release(ol)
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
        """Whether a copy of ``stream`` is more than ``limit`` bytes behind in
        a way that holding its producer's connection helps.  Never for an
        inter-router or edge connection (as qdrouterd: holding it would stop
        every message on it, and the routing protocol too, and a streamed
        message waiting there for a link holds no producer's memory the
        router could spare); nor for bytes kept for a copy that waits for a
        link busy with a message from that same connection, which the hold
        would stop as well."""
        conn = stream.in_link.conn
        if conn.role in UNHELD:
            return False
        if len(stream.backlog) > limit:
            busy = self.sender.busy
            if not any(self._same_conn(busy.get(ol), conn) for ol in stream.waiting):
                return True
        for ol, (od, _ref, _owed) in stream.active.items():
            lptr = ol.handle
            if lptr is not None and pn_link_current(lptr) == od \
                    and pn_delivery_pending(od) > limit:
                return True
        return False

    @staticmethod
    def _same_conn(other: Stream | None, conn: Connection) -> bool:
        return other is not None and other.in_link.conn is conn

    def _pause(self, stream: Stream) -> None:
        """Stop reading the producer's connection until the copies catch up."""
        stream.paused = True
        self.paused.append(stream)
        self.counters.stream_pauses += 1
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

    def take_resumed(self) -> list[Any]:
        """The connections to read again, once each."""
        resumed, self.resumed = self.resumed, []
        return resumed

    def incoming_lost(self, il: InLink) -> None:
        """``il``'s producer left: a message it was streaming is aborted."""
        stream = self.outcomes.streams.get(il)
        if stream is not None:
            self.abort(stream)

    def outgoing_lost(self, ol: OutLink) -> None:
        """``ol``'s consumer left: a streamed copy it was writing is lost."""
        stream = self.sender.busy.pop(ol, None)
        if stream is not None:
            _od, ref, owed = stream.active.pop(ol)
            if owed and ref is not None:
                # Not in ``unsettled``: lost here as ``lose_outgoing`` loses those.
                self.dispositions.copy_lost(ref, None, LOST_UNSETTLED)


__all__ = ["HIGH_WATER", "LOW_WATER", "STREAM_AT", "Streams"]
