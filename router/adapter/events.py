"""Dispatching proton's events, and finishing each wake-up's work.

Owns the loop over the collector every connection shares: a delivery goes
to the forwarder (a producer's message, a consumer's disposition) or the
relay (per message, on raw pointers and integer event types), a flow to
the forwarder or relay, and the other events to the endpoints' set-up
(``router.adapter.endpoints.lifecycle``).  After the events, one wake-up
also serves management requests, forwards what exchanges took, tops up
credit once, closes links that broke the size limit, writes every
transport with output, and tears down connections whose transport has
ended.  It decides nothing about routing
(docs/architecture.md#a-messages-walk-through-the-code).
"""

from __future__ import annotations

import logging
from typing import Any, Final

from router.adapter.admin.node import ManagementNode
from router.adapter.connections.state import Conn
from router.adapter.connections.transports import Transports
from router.adapter.effects import Effects
from router.adapter.endpoints.lifecycle import EndpointEvents, Teardown
from router.adapter.endpoints.links import Links
from router.adapter.forwarding.accel import SETTLED, event_arrays, next_event
from router.adapter.forwarding.exchanges import ExchangeForwarding
from router.adapter.forwarding.forwarder import Forwarder
from router.adapter.forwarding.outcomes import settle_with
from router.adapter.forwarding.relay import Relay
from router.adapter.pending import Pending
from router.adapter.pn import lib, to_str
from router.core import InLink, OutLink, RoutedEnd
from router.core.settlement import RELEASED

log = logging.getLogger(__name__)

PN_DELIVERY: Final = lib.PN_DELIVERY
PN_LINK_FLOW: Final = lib.PN_LINK_FLOW


class Events:
    """The dispatcher and the end of each wake-up.

    Args:
        transports: the AMQP connections.
        pending: the wake-up's shared work.
        forwarder: the per-message path.
        relay: the link-routed per-delivery path.
        links: the link table.
        endpoints: every event that is not a delivery or a flow.
        teardown: connections ending, and links closed for their size.
        effects: carries out what the routing protocol's messages made the
            core answer (``Pending.effects``).
        management: the management node, if served.
        exchanges: forwards the messages exchanges took (docs/routing.md#exchanges).
        raise_internal_errors: an unexpected exception handling an event is
            logged and the router goes on serving; tests raise it instead.
    """

    def __init__(self, *, transports: Transports, pending: Pending, forwarder: Forwarder,
                 relay: Relay, links: Links, endpoints: EndpointEvents, teardown: Teardown,
                 effects: Effects, management: ManagementNode | None,
                 exchanges: ExchangeForwarding, raise_internal_errors: bool = False) -> None:
        self.transports = transports
        self.pending = pending
        self.forwarder = forwarder
        self.relay = relay
        self.links = links
        self.endpoints = endpoints
        self.teardown = teardown
        self.effects = effects
        self.management = management
        self.exchanges = exchanges
        #: What the exchanges took and have yet to forward (the core's list).
        self.exchanged = exchanges.exchanges.pending
        self.raise_internal_errors = raise_internal_errors
        self.dirty = pending.output
        self.collector = transports.collector
        #: What ``next_event`` tells about each event.
        self.ptrs, self.ints = event_arrays()

    # -- the end of a wake-up ------------------------------------------------------------

    def process(self) -> None:
        """Dispatch every pending event, top up credit, write all output.

        Writing can close a connection, and settling what it held changes
        others (released deliveries, drained senders): go round until nothing
        is left to dispatch or write, so none of it waits for the next wake-up.
        """
        fwd = self.forwarder
        pending = self.pending
        transports = self.transports
        while True:
            self.dispatch()
            management = self.management
            if management is not None and management.pending:
                management.serve()
            if self.exchanged:
                self.exchanges.serve()
            fwd.flush_credit()
            if pending.oversized:
                self.teardown.close_oversized()
            self.dispatch()
            if not transports.write_all() and not self._owed():
                return
            if transports.finished:
                self.teardown.tear_down_finished()
            for conn in fwd.producers_to_read():
                if not conn.closed:
                    transports.arm(conn)
            if not self.dirty and not lib.pn_collector_peek(self.collector) \
                    and not self._owed():
                return

    def _owed(self) -> bool:
        """Whether messages taken in the wake-up by the router's own consumers
        (management, exchanges) wait to be served."""
        management = self.management
        return bool(self.exchanged) or (management is not None and bool(management.pending))

    def dispatch(self) -> None:
        """Hand every event the collector holds to its part."""
        collector = self.collector
        ptrs = self.ptrs
        ints = self.ints
        links = self.links.table
        fwd = self.forwarder
        pending = self.pending
        t = next_event(collector, 0, ptrs, ints)
        while True:
            if not t:
                if pending.settle_later:
                    fwd.settle_deferred()
                    t = next_event(collector, 0, ptrs, ints)
                    continue
                if pending.effects:
                    self.effects.drain(pending)
                    t = next_event(collector, 0, ptrs, ints)
                    continue
                return
            try:
                if t == PN_DELIVERY:
                    d = ptrs[1]
                    link = links.get(ptrs[2])
                    if type(link) is InLink:
                        fwd.incoming(d, link, ints[0], ints[1])
                    elif type(link) is OutLink:
                        fwd.disposition(d, link, ints[1] & SETTLED, ints[2])
                    elif type(link) is RoutedEnd:
                        self.relay.relay(d, link, ints[0], ints[1], ints[2])
                    else:
                        self._orphan(d)
                        self.endpoints.touched(ptrs[0])
                elif t == PN_LINK_FLOW:
                    link = links.get(ptrs[2])
                    if type(link) is OutLink:
                        fwd.flow(link)
                    elif type(link) is InLink:
                        pending.credit.add(link)
                    elif type(link) is RoutedEnd:
                        self.relay.relay_flow(link)
                else:
                    if pending.settle_later:
                        fwd.settle_deferred()
                    self.endpoints.handle(t, ptrs[0])
            except Exception:
                log.exception("internal error handling proton event %s",
                              to_str(lib.pn_event_type_name(t)))
                if self.raise_internal_errors:
                    raise
            t = next_event(collector, 1, ptrs, ints)

    @staticmethod
    def _orphan(d: Any) -> None:
        """A delivery on a link the router no longer serves (it detached it, and
        the peer's transfers were already on their way): nothing forwarded it,
        so the producer is told RELEASED."""
        if lib.pn_link_is_receiver(lib.pn_delivery_link(d)) and not lib.pn_delivery_settled(d):
            log.debug("delivery on a link no longer served: released")
            settle_with(d, RELEASED)
        else:
            lib.pn_delivery_settle(d)

    def tear_down(self, conn: Conn) -> None:
        """The transport is done: release everything the connection held."""
        self.teardown.tear_down(conn)


__all__ = ["Events"]
