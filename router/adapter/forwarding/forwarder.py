"""The per-message path: receive a delivery, pick its destinations, keep the
senders' credit.

Owns reading each complete message off its link (or its first bytes, once
a message still arriving is large enough to stream), the local forwarding
decision (anycast to one consumer, multicast to all), and topping senders'
credit back up once per wake-up.  It is composed of the parts that do the
rest: ``sending`` puts copies on the wire, ``outcomes`` settles the
producer's side and ``dispositions`` the consumer's (``redelivery``
forwarding a held message again), ``network`` forwards where other routers
are involved, ``streaming`` carries a streamed message's later frames.  Decisions come from the core
(records maintained by ``router.core.Router``, choice functions from
``addressing``); this module must not make routing decisions of its own
beyond applying them, and must not allocate effect objects per message.

The parts call each other through plain references: compiled with mypyc
(``setup.py``), a call into a composed part costs what a call into a base
class did (docs/performance.md#the-compiled-build).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from addressing import Distribution, choose_balanced, choose_closest
from router.adapter.forwarding.accel import ABORTED, PARTIAL, SETTLED, STATE, recv_whole
from router.adapter.forwarding.dispositions import Dispositions
from router.adapter.forwarding.message_log import log_message
from router.adapter.forwarding.network import NetworkForwarding
from router.adapter.forwarding.outcomes import Outcomes, copy_disposition, whole
from router.adapter.forwarding.redelivery import Redelivery
from router.adapter.forwarding.sending import Sender, StreamingLinks, local_copy
from router.adapter.forwarding.streaming import HIGH_WATER, STREAM_AT, Streams
from router.adapter.pending import Counters, Pending, ReceiveBuffer
from router.adapter.pn import lib
from router.core import (
    Connection,
    ConnectionId,
    Fanout,
    InLink,
    LinkId,
    MessageFormatError,
    MessageInfo,
    MessageReader,
    OutLink,
    Router,
    RouterAnnotations,
    Stream,
    Transfer,
    may_have_router_keys,
    user_id_of,
)
from router.core.message import NO_ANNOTATIONS, scan
from router.core.settlement import REJECTED, TERMINAL_STATES
from router.core.tcpstream import STREAM_MARK

log = logging.getLogger(__name__)

_MULTICAST = Distribution.MULTICAST
#: Transfers that take the slower way in (``_incoming_in_pieces``).
_UNUSUAL: Final = PARTIAL | STATE
#: The streaming marker is looked for this far into a message's first bytes.
MARK_WITHIN: Final = 4096
#: What ``producers_to_read`` answers when no producer is held (never changed).
_NONE: Final[list[Any]] = []
_CLOSEST = Distribution.CLOSEST

# Bound once: every attribute lookup on ``lib`` costs on the hot path.
pn_delivery_readable: Final = lib.pn_delivery_readable
pn_delivery_partial: Final = lib.pn_delivery_partial
pn_delivery_pending: Final = lib.pn_delivery_pending
pn_delivery_aborted: Final = lib.pn_delivery_aborted
pn_delivery_settled: Final = lib.pn_delivery_settled
pn_delivery_settle: Final = lib.pn_delivery_settle
pn_delivery_remote_state: Final = lib.pn_delivery_remote_state
pn_link_recv: Final = lib.pn_link_recv
pn_link_advance: Final = lib.pn_link_advance
pn_link_credit: Final = lib.pn_link_credit
pn_link_flow: Final = lib.pn_link_flow


class Forwarder:
    """Moves messages between links.

    Args:
        router: the routing core whose records are read.
        router_id: this router's id, for the annotations it adds.
        pending: the wake-up's shared work.
        clock: monotonic clock (seconds), for the routing protocol's messages.
        trunks: the streaming links between routers (None: a streamed copy
            goes on the link it shares with other messages).
    """

    def __init__(self, router: Router, router_id: str, pending: Pending,
                 clock: Callable[[], float], trunks: StreamingLinks | None = None) -> None:
        self.router = router
        self.clock = clock
        self.trunks = trunks
        self.credit_dirty = pending.credit
        self.dirty = pending.output
        self.counters = Counters()
        self.buffer = ReceiveBuffer()
        self.reader = MessageReader()
        self.outcomes = Outcomes(pending, self.counters)
        self.sender = Sender(router_id, pending, self.outcomes, self.counters, self.reader, trunks)
        self.network = NetworkForwarding(router, pending, self.outcomes, self.sender,
                                         self.counters, self.reader)
        self.redelivery = Redelivery(router, self.sender, self.network, self.counters,
                                     self.reader)
        self.dispositions = Dispositions(self.outcomes, self.redelivery, pending)
        self.streams = Streams(pending, self.outcomes, self.dispositions, self.sender,
                               self.buffer, self.counters, trunks)
        #: Set when the router shuts down: no more credit is granted.
        self.frozen = False
        #: An edge router (its uplink is fixed when the core is made).
        self.edge = router.uplink is not None
        #: Messages the router makes itself (replies to an edge's lookups)
        #: enter routing on this link, pre-settled.
        self.own = InLink(LinkId(0), Connection(ConnectionId(0), strip_in=False,
                                                strip_out=False, container_id=router_id),
                          name="$router", address=None, record=None)

    def route_own(self, data: bytes) -> None:
        """Route a message the router makes itself."""
        self.route(None, self.own, data)

    # -- receiving -----------------------------------------------------------

    def incoming(self, d: Any, il: InLink, n: int, flags: int) -> None:
        """A PN_DELIVERY event on a router-incoming link, with its pending
        bytes and flags as ``accel.next_event`` found them."""
        if n == 0 or flags & _UNUSUAL or il.partial is not None:
            # Rare: an update to a delivery already taken (nothing pending,
            # not readable), an empty transfer, a multi-frame one, or one
            # whose transfer carries a state.
            if not pn_delivery_readable(d):
                if flags & SETTLED:
                    self.outcomes.producer_settled(d, il)
                return
            self._incoming_in_pieces(d, il)
            return
        if flags & ABORTED:
            self._incoming_in_pieces(d, il)
            return
        if n > il.max_size:
            self.outcomes.oversized(d, il)
            return
        buffer = self.buffer
        if n > buffer.size:
            buffer.grow(n)
        recv_whole(il.handle, buffer.cbuf, n)
        data = buffer.view[:n].tobytes()
        il.delivered += 1
        if il.logged:
            log_message(il, data, False)
        if flags & SETTLED:
            il.presettled += 1
            pn_delivery_settle(d)
            self.route(None, il, data)
        else:
            self.route(d, il, data)

    def _incoming_in_pieces(self, d: Any, il: InLink) -> None:
        """A multi-frame or aborted transfer: gather it until it is complete,
        or until it is large enough to stream (``STREAM_AT``)."""
        streams = self.outcomes.streams
        if streams:
            stream = streams.get(il)
            if stream is not None:
                self.streams.more(stream, d, il)
                return
        if pn_delivery_aborted(d):
            # Nothing was forwarded yet (messages are forwarded once complete),
            # so an aborted transfer just goes away; no outcome is due
            # (AMQP 1.0 section 2.6.12).
            whole(il)
            pn_delivery_settle(d)
            self.credit_dirty.add(il)
            return
        lptr = il.handle
        buffer = self.buffer
        n = pn_delivery_pending(d)
        if n > buffer.size:
            buffer.grow(n)
        if n:
            n = pn_link_recv(lptr, buffer.cbuf, n)
        if il.partial is None:
            il.partial = bytearray()
            il.conn.partials += 1
        if n > 0:
            il.partial += buffer.view[:n]
        if len(il.partial) > il.max_size:
            self.outcomes.oversized(d, il)
            return
        if pn_delivery_partial(d):
            if not il.control and (len(il.partial) >= STREAM_AT or _stream_marked(il.partial)):
                self._stream_begin(d, il)
            return
        data = bytes(il.partial)
        whole(il)
        settled = pn_delivery_settled(d)
        pn_link_advance(lptr)
        il.delivered += 1
        if il.logged:
            log_message(il, data, False)
        if settled:
            il.presettled += 1
            pn_delivery_settle(d)
            d = None
        self.route(d, il, data)
        if d is not None:
            self._pass_state(d, il)

    def _stream_begin(self, d: Any, il: InLink) -> None:
        """A message still arriving has grown to ``STREAM_AT``: route it on what
        has come so far (every section up to the body is in it) and send its
        copies frame by frame from now on."""
        assert il.partial is not None
        head = bytes(il.partial)
        il.partial = bytearray()  # marks the link as mid-message (see flush_credit)
        settled = bool(pn_delivery_settled(d))
        stream = Stream(d, il, len(head))
        self.outcomes.streams[il] = stream
        self.counters.streamed += 1
        il.delivered += 1
        if il.logged:
            log_message(il, head, False)
        if settled:
            il.presettled += 1
        self.route(None if settled else d, il, head, stream)
        if not settled:
            self._pass_state(d, il)
        self.streams.started(stream)

    def _pass_state(self, d: Any, il: InLink) -> None:
        """A producer's transfer carried a state (DISPATCH-1703: an extension
        state and its data; docs/routing.md#settlement-and-dispositions): its
        copies carry it too, those sent already and those that wait."""
        state = pn_delivery_remote_state(d)
        if not state or state in TERMINAL_STATES:
            return
        ref = il.unsettled.get(d)
        if ref is None:
            return
        ref.state = state
        if type(ref) is Transfer:
            if ref.out_delivery is not None:
                copy_disposition(ref.out_delivery, d, state)
                if ref.out_link is not None:
                    self.dirty.add(ref.out_link.conn.handle)
            return
        assert isinstance(ref, Fanout)
        for od, ol in ref.copies.items():
            copy_disposition(od, d, state)
            self.dirty.add(ol.conn.handle)

    def _user_id_allowed(self, d: Any, il: InLink, data: bytes) -> bool:
        """Policy without allowUserIdProxy (docs/routing.md#receiving-a-message): a
        message whose user-id is neither empty nor the connection's user is
        rejected."""
        try:
            user_id = user_id_of(data, self.reader.scan(data, read_to=False))
        except MessageFormatError as exc:
            log.warning("%r: message rejected: %s", il, exc)
            self.outcomes.finish(d, il, REJECTED, "amqp:decode-error", "invalid message format")
            return False
        if user_id is None or user_id == il.user_id:
            return True
        log.debug("[%r][L%d] Message rejected due to user_id proxy violation. User:%s",
                  il.conn, il.link_id, (il.user_id or b"").decode(errors="replace"))
        self.outcomes.finish(d, il, REJECTED, "amqp:unauthorized-access",
                             "user_id proxy violation")
        return False

    # -- routing ---------------------------------------------------------------

    def route(self, d: Any, il: InLink, data: bytes, stream: Stream | None = None) -> None:
        """Forward one message; ``d`` is ``None`` when pre-settled.  With a
        ``stream`` the message is still arriving (``data`` is its first
        bytes, every section up to the body) and its copies stream."""
        record = il.record
        if record is None and il.control:
            self.network.control(d, il, data, self.clock())
            return
        if il.user_id is not None and not self._user_id_allowed(d, il, data):
            return
        # A message is scanned at most once, and only when it has to be: it
        # carries router annotations, or its address or the network matter.
        info: MessageInfo | None = None
        ann: RouterAnnotations | None = None
        # Messages from another router nearly always carry router keys: scan at once.
        keys = il.transit or may_have_router_keys(data)
        reader = self.reader
        if keys:
            try:
                info = reader.scan(data)
                if not info.router_keys:
                    keys = False
                elif il.conn.strip_in:
                    data = reader.strip_router_annotations(data, info)
                    info = None
                    keys = False
                else:
                    ann = reader.decode_annotations(data, info)
            except MessageFormatError as exc:
                log.warning("%r: message rejected - invalid MA section: %s", il, exc)
                description = "invalid message format" \
                    if exc.condition == "amqp:decode-error" else str(exc)
                self.outcomes.finish(d, il, REJECTED, exc.condition, description)
                return
        if record is None:
            if info is None:
                try:
                    info = reader.scan(data)
                except MessageFormatError as exc:
                    log.warning("%r: message rejected: %s", il, exc)
                    self.outcomes.finish(d, il, REJECTED, "amqp:decode-error",
                                         "invalid message format")
                    return
            if il.conn.tenant is not None and (ann is None or ann.to is None) and info.to:
                # A multi-tenant producer's ``to`` is in its vhost's namespace;
                # routers further on read it from x-opt-qd.to.
                to = self.router.in_tenant(il.conn, info.to)
                if to != info.to:
                    ann = (ann if ann is not None else NO_ANNOTATIONS)._replace(to=to)
            record = self.network.anonymous_record(d, il, info, ann)
            if record is None:
                return
        if il.transit:
            # Transit credit comes back on forwarding (docs/routing.md#credit).
            self.credit_dirty.add(il)
            if il.router_link is None:
                # From an edge connection: never sent back over it
                # (docs/networks.md#edge-routers).
                self.network.route(d, il, data, record, info, ann, None, stream)
                return
        if record.remotes:
            self.network.route(d, il, data, record, info, ann, None, stream)
            return
        # Only local consumers: the last router of a network path, or one router.
        if ann is not None and self.network.looping(il, ann):
            self.outcomes.no_destination(d, il)
            return
        consumers = record.consumers
        if not consumers:
            self.network.nowhere(d, il, data, record, info, ann, stream)
            return
        dist = record.distribution
        if dist is _MULTICAST:
            if ann is not None or (self.edge and il.record is None):
                # Each copy stripped as its connection wants; on an edge router
                # an anonymous sender's multicast also goes up the uplink
                # (docs/networks.md#edge-routers).
                self.network.route(d, il, data, record, info, ann, None, stream)
            else:
                self._multicast(d, il, data, consumers, keys, stream)
            return
        if len(consumers) == 1:
            ol = consumers[0]  # what either choice returns, without asking
        else:
            chosen = choose_closest(consumers) if dist is _CLOSEST \
                else choose_balanced(consumers)
            assert chosen is not None
            ol = chosen
        ref = self.outcomes.transfer(d, il, data, record, ann, None, stream)
        if ann is not None:
            assert info is not None
            data, keys = local_copy(ol, data, info, ann, reader)
        sender = self.sender
        if ol.credit > 0 and not ol.queue:
            sender.transmit(ol, data, ref, keys, stream)
        else:
            sender.send(ol, data, ref, True, stream)

    def _multicast(self, d: Any, il: InLink, data: bytes, consumers: list[OutLink],
                   keys: bool, stream: Stream | None) -> None:
        """One copy to each local consumer; ``keys`` as ``route`` found it, so
        that no copy scans the message again for router annotations."""
        # A method of a compiled class called through a local bound method is
        # a Python-level call; through the object it is a direct C call.
        sender = self.sender
        f = self.outcomes.fanout(d, il, len(consumers))
        for ol in list(consumers):
            sender.send(ol, data, f, keys, stream)

    # -- for the router's own parts -----------------------------------------------

    def send_own(self, ol: OutLink, data: bytes) -> None:
        """Send a message the router makes itself (the routing protocol's, an
        edge service's), pre-settled, on ``ol``."""
        self.sender.send(ol, data, None)

    def consumed(self, ref: Transfer | Fanout | None, state: int) -> None:
        """An in-process consumer (the management agent) took its copy with ``state``."""
        self.outcomes.consumed(ref, state)

    def block(self, il: InLink, drain: bool) -> None:
        """The sender's address lost its last destination (docs/routing.md#credit)."""
        self.outcomes.block(il, drain)

    def unblock(self, il: InLink) -> None:
        """The sender's address has a destination again."""
        self.outcomes.unblock(il)

    # -- what the dispatcher hands over besides a producer's message ---------------

    def disposition(self, od: Any, ol: OutLink, settled: int, state: int) -> None:
        """A PN_DELIVERY event on a router-outgoing link: the consumer's
        disposition, settled or not, and its state (``accel.next_event``)."""
        self.dispositions.outgoing(od, ol, settled, state)

    def flow(self, ol: OutLink) -> None:
        """PN_LINK_FLOW on a router-outgoing link: the consumer gave credit."""
        self.sender.outgoing_flow(ol)

    def settle_deferred(self) -> None:
        """Settle the consumers' deliveries put off by their dispositions
        (``Pending.settle_later``), in one go."""
        self.outcomes.settle_deferred()

    def producers_to_read(self) -> list[Any]:
        """The connections of producers held while a streamed copy was too far
        behind that may be read again now (docs/routing.md#large-messages)."""
        streams = self.streams
        if streams.paused:
            streams.check_paused()
        return streams.take_resumed() if streams.resumed else _NONE

    # -- credit -------------------------------------------------------------------

    def flush_credit(self) -> None:
        """Top every touched sender's credit back up to its window
        (docs/routing.md#credit)."""
        dirty = self.credit_dirty
        if not dirty:
            return
        touched = list(dirty)
        dirty.clear()
        if self.frozen:
            return
        for il in touched:
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

    # -- links going away -------------------------------------------------------

    def lose_incoming(self, il: InLink) -> None:
        """A producer's link went away (docs/routing.md#when-a-link-or-connection-goes)."""
        if self.outcomes.streams:
            self.streams.incoming_lost(il)
        self.outcomes.lose_incoming(il)

    def lose_outgoing(self, ol: OutLink) -> None:
        """A consumer's link went away (docs/routing.md#when-a-link-or-connection-goes)."""
        if self.sender.busy:
            self.streams.outgoing_lost(ol)
        self.dispositions.lose_outgoing(ol)
        if self.trunks is not None:
            self.trunks.lost(ol)


def _stream_marked(partial: bytearray) -> bool:
    """Whether a message still arriving carries the streaming marker
    (``x-opt-qd.stream``, a carried TCP connection: docs/tcp.md) and its
    properties are in whole (or its body has begun), so that it is forwarded
    now rather than once ``STREAM_AT`` bytes are in: its bytes must not wait
    for more.  qdrouterd 1.18 sends a carried connection's first transfer
    with no body at all, and a service that speaks first waits for it."""
    at = partial.find(STREAM_MARK, 0, MARK_WITHIN)
    if at < 0:
        return False
    if partial.find(b"\x00\x53\x75", at) >= 0:
        return True
    try:
        return scan(partial).properties >= 0
    except MessageFormatError:
        return False  # a section not in whole yet


__all__ = ["HIGH_WATER", "STREAM_AT", "Forwarder"]
