"""A connection's endpoints beginning and ending, outside the per-message path.

Owns what the dispatcher (``router.adapter.events``) hands over that is not
a delivery or a flow: a peer's OPEN, BEGIN, ATTACH, DETACH, END and CLOSE,
and a transport's error or end (``EndpointEvents``); and releasing what a
connection held once its transport is done, or closing the links and
connections that broke the policy's message size limit (``Teardown``).
The decisions are the core's and policy's; what they answer is carried out
by ``apply``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from router.adapter.connections.connectors import Connectors
from router.adapter.connections.state import Conn
from router.adapter.connections.transports import Transports
from router.adapter.endpoints.attaching import Attaching
from router.adapter.endpoints.links import Departures
from router.adapter.endpoints.opening import Opening
from router.adapter.endpoints.ownlinks import OwnLinks
from router.adapter.pending import Pending
from router.adapter.pn import lib
from router.core import Effect, InLink, OutLink, RoutedEnd, Router, describe_counters
from router.core.policy import Grant, Policy

log = logging.getLogger(__name__)
policy_log = log.getChild("policy")

Apply = Callable[[list[Effect]], None]

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


class EndpointEvents:
    """The set-up events of every connection.

    Args:
        transports: the AMQP connections.
        opening: a peer's OPEN and BEGIN.
        attaching: a peer's ATTACH and DETACH, and a session's END.
        pending: the wake-up's shared work (an event's connection has output).
        apply: carries out what the core answers.
    """

    def __init__(self, transports: Transports, opening: Opening, attaching: Attaching,
                 pending: Pending, apply: Apply) -> None:
        self.transports = transports
        self.opening = opening
        self.attaching = attaching
        self.apply = apply
        self.dirty = pending.output

    def touched(self, e: Any) -> None:
        """Mark the connection of an event as having output to write."""
        conn = self.transports.by_connection.get(lib.pn_event_connection(e))
        if conn is not None:
            self.dirty.add(conn)

    def handle(self, t: int, e: Any) -> None:
        """A connection, session, link or transport event (set-up, not per message)."""
        self.touched(e)
        apply = self.apply
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


class Teardown:
    """Connections ending, and what they held released.

    Args:
        router: the routing core, told of each connection that closed.
        transports: the AMQP connections.
        departures: settles what each of a connection's links held.
        own: forgets the router's own links and sessions on it.
        policy: counts connections and sees oversized messages.
        connectors: told when a connector's connection is gone.
        pending: the wake-up's shared work (links that sent oversized messages).
        apply: carries out what the core answers.
    """

    def __init__(self, *, router: Router, transports: Transports, departures: Departures,
                 own: OwnLinks, policy: Policy, connectors: Connectors, pending: Pending,
                 apply: Apply) -> None:
        self.router = router
        self.transports = transports
        self.departures = departures
        self.own = own
        self.policy = policy
        self.connectors = connectors
        self.pending = pending
        self.apply = apply

    def close_oversized(self) -> None:
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

    def tear_down_finished(self) -> None:
        """Release every connection whose transport finished."""
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
                self.departures.drop(lptr, link)
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
        self.apply(self.router.connection_closed(core, self.transports.clock()))
        self.transports.release(conn)
        log.info("[C%d] Connection Closed", core.conn_id)
        connector = conn.connector
        if connector is not None and connector.conn is conn:
            self.connectors.connection_lost(connector, opened=conn.opened)


__all__ = ["EndpointEvents", "Teardown"]
