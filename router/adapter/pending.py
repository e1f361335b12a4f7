"""What one wake-up of the loop leaves to do once its events are handled.

Owns the shared records the per-message parts fill while proton's events
are dispatched: connections with output to write, senders whose credit is
to be topped up, consumers' deliveries to settle in one go, links whose
messages broke the policy's size limit, and the core effects a control
message produced.  The parts only add to them; the event dispatcher
(``router.adapter.events``) and the engine empty them, in that order, before
the loop sleeps again.  Nothing here decides anything.
"""

from __future__ import annotations

from typing import Any

from router.adapter.pn import ffi
from router.core import Effect, InLink, RoutedEnd


class Pending:
    """The work a wake-up has left (each collection is created once and
    only ever emptied in place, so a part may keep a reference to it)."""

    __slots__ = ("credit", "effects", "output", "oversized", "settle_later")

    def __init__(self) -> None:
        #: Adapter connections (``router.adapter.connections.state.Conn``) with output to write.
        #: A disposition or a settlement raises no PN_TRANSPORT event, so the
        #: parts that make one add the connection here.
        self.output: set[Any] = set()
        #: Senders whose credit is to be looked at (``Forwarder.flush_credit``).
        self.credit: set[InLink] = set()
        #: Consumers' deliveries they settled, settled here in one go once the
        #: events at hand are handled: settling each at once would wedge a
        #: PN_TRANSPORT event for the consumer's connection between the
        #: producer's update and settle, two events per message instead of
        #: none (proton drops an event that repeats the last one).
        self.settle_later: list[Any] = []
        #: Links that sent a message above their size limit, to be closed.
        self.oversized: list[InLink | RoutedEnd] = []
        #: Effects of the core's routing protocol (a control message's answers).
        self.effects: list[Effect] = []


class Counters:
    """Router-wide counts the per-message parts keep (the ``router`` entity's
    ``droppedPresettledDeliveries``, ``deliveriesRedirectedToFallback``,
    ``deliveriesRedelivered``, ``deliveriesStreamed``,
    ``deliveriesStreamedAborted``, ``streamingPauses``)."""

    __slots__ = ("dropped_presettled", "redelivered", "redirected", "stream_pauses", "streamed",
                 "streams_aborted")

    def __init__(self) -> None:
        self.dropped_presettled = 0
        self.redirected = 0
        self.redelivered = 0
        self.streamed = 0
        self.streams_aborted = 0
        self.stream_pauses = 0


class ReceiveBuffer:
    """The buffer incoming transfers are read into, grown on demand; shared
    by the parts that read message bytes (one thread, one read at a time)."""

    __slots__ = ("buf", "cbuf", "size", "view")

    def __init__(self, size: int = 65536) -> None:
        self.buf = bytearray(size)
        self.view = memoryview(self.buf)
        self.cbuf: Any = ffi.from_buffer(self.buf)
        self.size = size

    def grow(self, size: int) -> None:
        """Make room for at least ``size`` bytes."""
        self.buf = bytearray(max(size, 2 * len(self.buf)))
        self.view = memoryview(self.buf)
        self.cbuf = ffi.from_buffer(self.buf)
        self.size = len(self.buf)


__all__ = ["Counters", "Pending", "ReceiveBuffer"]
