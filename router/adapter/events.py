"""Dispatching proton's events, and finishing each wake-up's work.

Owns the loop over the collector every connection shares: a delivery goes
to the forwarder, the relay or the settlement of its link (per message,
on raw pointers and integer event types), a flow to the sender or relay,
and endpoint events to the parts that open connections and attach links.
After the events, one wake-up also serves management requests, tops up
credit once, closes links that broke the size limit, writes every
transport with output, and tears down connections whose transport has
ended (what they held is settled, the core is told, a connector tries
again).  It decides nothing about routing
(docs/architecture.md#a-messages-walk-through-the-code).
"""

from __future__ import annotations

import logging
from typing import Any, Final

import router
from router.adapter.admin.node import ManagementNode
from router.adapter.connections.connectors import Connectors
from router.adapter.connections.state import Conn
from router.adapter.connections.transports import Transports
from router.adapter.effects import Effects
from router.adapter.endpoints.attaching import Attaching
from router.adapter.endpoints.links import Links
from router.adapter.endpoints.opening import Opening
from router.adapter.endpoints.ownlinks import OwnLinks
from router.adapter.forwarding.accel import SETTLED, event_arrays, next_event
from router.adapter.forwarding.forwarder import Forwarder
from router.adapter.forwarding.outcomes import settle_with
from router.adapter.forwarding.relay import Relay
from router.adapter.pending import Pending
from router.adapter.pn import lib, to_str
from router.core import InLink, OutLink, RoutedEnd, Router, describe_counters
from router.core.policy import Grant, Policy
from router.core.settlement import RELEASED

log = logging.getLogger(__name__)
policy_log = log.getChild("policy")

PN_DELIVERY: Final = lib.PN_DELIVERY
PN_LINK_FLOW: Final = lib.PN_LINK_FLOW
PN_CONNECTION_REMOTE_CLOSE: Final = lib.PN_CONNECTION_REMOTE_CLOSE
PN_CONNECTION_REMOTE_OPEN: Final = lib.PN_CONNECTION_REMOTE_OPEN
PN_LINK_REMOTE_CLOSE: Final = lib.PN_LINK_REMOTE_CLOSE
PN_LINK_REMOTE_DETACH: Final = lib.PN_LINK_REMOTE_DETACH
PN_LINK_REMOTE_OPEN: Final = lib.PN_LINK_REMOTE_OPEN
PN_LOCAL_ACTIVE: Final = lib.PN_LOCAL_ACTIVE
PN_SESSION_REMOTE_CLOSE: Final = lib.PN_SESSION_REMOTE_CLOSE
PN_SESSION_REMOTE_OPEN: Final = lib.PN_SESSION_REMOTE_OPEN
PN_TRANSPORT_CLOSED: Final = lib.PN_TRANSPORT_CLOSED
PN_TRANSPORT_ERROR: Final = lib.PN_TRANSPORT_ERROR


class Events:
    """The dispatcher and the end of each wake-up.

    Args:
        router: the routing core.
        transports: the AMQP connections.
        pending: the wake-up's shared work.
        forwarder: the per-message path.
        relay: the link-routed per-delivery path.
        links: the link table.
        own: the links the router attached itself.
        opening: connection and session opening.
        attaching: link attach and detach.
        effects: carries out the core's effects.
        connectors: told when a connector's connection is gone.
        policy: counts connections and closes what breaks its limits.
        management: the management node, if served.
    """

    def __init__(self, *, router: Router, transports: Transports, pending: Pending,
                 forwarder: Forwarder, relay: Relay, links: Links, own: OwnLinks,
                 opening: Opening, attaching: Attaching, effects: Effects,
                 connectors: Connectors, policy: Policy,
                 management: ManagementNode | None) -> None:
        self.router = router
        self.transports = transports
        self.pending = pending
        self.forwarder = forwarder
        self.outcomes = forwarder.outcomes
        self.sender = forwarder.sender
        self.relay = relay
        self.links = links
        self.own = own
        self.opening = opening
        self.attaching = attaching
        self.effects = effects
        self.connectors = connectors
        self.policy = policy
        self.management = management
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
            fwd.flush_credit()
            if pending.oversized:
                self._close_oversized()
            self.dispatch()
            if not transports.write_all():
                return
            if transports.finished:
                self._tear_down_finished()
            streams = fwd.streams
            if streams.paused:
                streams.check_paused()
            if streams.resumed:
                for conn in streams.take_resumed():
                    if not conn.closed:
                        transports.arm(conn)
            if not self.dirty and not lib.pn_collector_peek(self.collector):
                return

    def dispatch(self) -> None:
        """Hand every event the collector holds to its part."""
        collector = self.collector
        ptrs = self.ptrs
        ints = self.ints
        links = self.links.table
        fwd = self.forwarder
        outcomes = self.outcomes
        pending = self.pending
        t = next_event(collector, 0, ptrs, ints)
        while True:
            if not t:
                if pending.settle_later:
                    outcomes.settle_deferred()
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
                        outcomes.outgoing(d, link, ints[1] & SETTLED, ints[2])
                    elif type(link) is RoutedEnd:
                        self.relay.relay(d, link, ints[0], ints[1], ints[2])
                    else:
                        self._orphan(d)
                        self._touched(ptrs[0])
                elif t == PN_LINK_FLOW:
                    link = links.get(ptrs[2])
                    if type(link) is OutLink:
                        self.sender.outgoing_flow(link)
                    elif type(link) is InLink:
                        pending.credit.add(link)
                    elif type(link) is RoutedEnd:
                        self.relay.relay_flow(link)
                else:
                    if pending.settle_later:
                        outcomes.settle_deferred()
                    self._endpoint(t, ptrs[0])
            except Exception:
                log.exception("internal error handling proton event %s",
                              to_str(lib.pn_event_type_name(t)))
                if router.RAISE_INTERNAL_ERRORS:
                    raise
            t = next_event(collector, 1, ptrs, ints)

    # -- endpoint events ---------------------------------------------------------------

    def _touched(self, e: Any) -> None:
        """Mark the connection of an event as having output to write."""
        conn = self.transports.by_connection.get(lib.pn_event_connection(e))
        if conn is not None:
            self.dirty.add(conn)

    def _endpoint(self, t: int, e: Any) -> None:
        """A connection, session, link or transport event (set-up, not per message)."""
        self._touched(e)
        apply = self.effects.apply
        if t == PN_CONNECTION_REMOTE_OPEN:
            apply(self.opening.connection_opened(lib.pn_event_connection(e)))
        elif t == PN_SESSION_REMOTE_OPEN:
            self.opening.session_opened(lib.pn_event_session(e))
        elif t == PN_LINK_REMOTE_OPEN:
            apply(self.attaching.link_opened(lib.pn_event_link(e)))
        elif t in (PN_LINK_REMOTE_CLOSE, PN_LINK_REMOTE_DETACH):
            lptr = lib.pn_event_link(e)
            apply(self.attaching.link_lost(lptr, "Link detached"))
            self.attaching.answer_detach(lptr)
        elif t == PN_SESSION_REMOTE_CLOSE:
            ssn = lib.pn_event_session(e)
            for lptr in self.attaching.links_in(ssn):
                apply(self.attaching.link_lost(lptr, "Link lost", answerable=False))
            if lib.pn_session_state(ssn) & PN_LOCAL_ACTIVE:
                lib.pn_session_close(ssn)
        elif t == PN_CONNECTION_REMOTE_CLOSE:
            cptr = lib.pn_event_connection(e)
            if lib.pn_connection_state(cptr) & PN_LOCAL_ACTIVE:
                lib.pn_connection_close(cptr)
        elif t == PN_TRANSPORT_ERROR:
            self.opening.transport_failed(lib.pn_event_transport(e))
        elif t == PN_TRANSPORT_CLOSED:
            conn = self.transports.by_transport.get(lib.pn_event_transport(e))
            if conn is not None:
                self.dirty.add(conn)

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

    def _close_oversized(self) -> None:
        """Links that sent a message above the policy's size limit: the link
        and its connection are closed, as qdrouterd does
        (docs/security.md#policy)."""
        oversized = list(self.pending.oversized)
        self.pending.oversized.clear()
        for il in oversized:
            conn = il.conn.handle
            self.policy.oversized(conn.grant if isinstance(conn.grant, Grant) else None)
            policy_log.info("[C%d][L%d] DENY message larger than %d bytes on '%s'",
                            il.conn.conn_id, il.link_id, il.conn.max_message_size, conn.peer)
            lptr = il.handle
            if lptr is not None and lib.pn_link_state(lptr) & lib.PN_LOCAL_ACTIVE:
                # No error on the link itself, as qdrouterd closes it: the
                # rejected delivery says why, and so does the connection.
                lib.pn_link_close(lptr)
            if not conn.closed:
                self.transports.close_connection(conn, "Message size exceeded")

    # -- connections that ended ----------------------------------------------------------

    def _tear_down_finished(self) -> None:
        finished = list(self.transports.finished)
        self.transports.finished.clear()
        for conn in finished:
            self.tear_down(conn)

    def tear_down(self, conn: Conn) -> None:
        """The transport is done: release everything the connection held."""
        if conn.closed:
            return
        conn.closed = True
        core = conn.core
        links: list[InLink | OutLink | RoutedEnd] = [
            *core.in_links.values(), *core.out_links.values(), *core.routed.values()]
        for link in links:
            lptr = link.handle
            if lptr is not None:
                self.links.table.pop(lptr, None)
                self.links.forget(link)
                if log.isEnabledFor(logging.INFO):
                    log.info("[%r][L%d] Link closed due to connection loss: %s", core,
                             link.link_id, describe_counters(link))
        self.own.connection_lost(conn)
        if conn.connector is None:
            self.policy.socket_closed()
            grant = conn.grant
            if isinstance(grant, Grant):
                self.policy.closed(grant)
                counts = grant.counts
                if counts is not None and policy_log.isEnabledFor(logging.DEBUG):
                    policy_log.debug(
                        "[C%d] Connection '%s' closed with resources n_senders=%d, "
                        "n_receivers=%d; its vhost's sessions_denied=%d, senders_denied=%d, "
                        "receivers_denied=%d, max_message_size_denied=%d, "
                        "nConnections= %d", core.conn_id, conn.peer, grant.senders,
                        grant.receivers, counts.sessions_denied, counts.senders_denied,
                        counts.receivers_denied, counts.max_message_size_denied,
                        self.policy.current)
        self.effects.apply(self.router.connection_closed(core, self.transports.clock()))
        self.transports.release(conn)
        log.info("[C%d] Connection Closed", core.conn_id)
        connector = conn.connector
        if connector is not None and connector.conn is conn:
            self.connectors.connection_lost(connector, opened=conn.opened)


__all__ = ["Events"]
