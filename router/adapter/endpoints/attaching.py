"""A peer's links coming and going: attach, detach, and the end of a session.

Owns what a link's endpoint events mean for the router: an attach of the
peer's (checked by vhost policy, then decided by the core through
``router.adapter.endpoints.termini.attach``), the peer's answer to a link the
router attached itself (an inter-router link, an auto-link, a link-routed
far end), and a detach or a session's end (what the link held is settled,
the core is told).  It returns the core's effects for the caller to carry
out and decides nothing itself.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from linkroute import Detach
from router.adapter.connections.state import Conn
from router.adapter.endpoints.links import Departures, Links
from router.adapter.endpoints.ownlinks import OwnLinks
from router.adapter.endpoints.termini import (
    attach,
    capabilities,
    close_link,
    dynamic_route_address,
    facing_address,
    refuse_link,
    resumable,
    router_link,
)
from router.adapter.pending import Pending
from router.adapter.pn import lib, to_str
from router.core import (
    Effect,
    InLink,
    LookupAnswered,
    OutLink,
    Role,
    RoutedEnd,
    Router,
    describe_counters,
)
from router.core.policy import LINK_DENIED, Denied, Grant, Policy
from router.core.records import NO_SIZE_LIMIT

log = logging.getLogger(__name__)
policy_log = log.getChild("policy")


def remote_detach(lptr: Any) -> Detach:
    """The peer's detach of a link (or the end of its session) as passed on."""
    cond = lib.pn_link_remote_condition(lptr)
    closed = bool(lib.pn_link_state(lptr) & lib.PN_REMOTE_CLOSED)
    if not lib.pn_condition_is_set(cond):
        cond = lib.pn_session_remote_condition(lib.pn_link_session(lptr))
        if lib.pn_session_state(lib.pn_link_session(lptr)) & lib.PN_REMOTE_CLOSED:
            closed = True
    if not lib.pn_condition_is_set(cond):
        return Detach(closed=closed)
    return Detach(condition=to_str(lib.pn_condition_get_name(cond)),
                  description=to_str(lib.pn_condition_get_description(cond)),
                  closed=closed)


def detach_error(lptr: Any) -> str:
    """Why the peer detached a link, as qdrouterd's ``lastError`` gives it:
    the error's description, else its condition ("" without an error)."""
    detach = remote_detach(lptr)
    if detach.condition is None:
        return ""
    return detach.description or detach.condition


class Attaching:
    """Link endpoint events.

    Args:
        router: the routing core.
        links: the link table.
        departures: settles what a link that goes held.
        own: the links the router attached itself.
        policy: who may attach what.
        pending: the wake-up's shared work (senders whose credit to look at).
        by_connection: the adapter connection of a proton connection.
        clock: monotonic clock (seconds).
        flowed: reads the credit a consumer gave (for an attach held while
            its credit arrived).
    """

    def __init__(self, router: Router, links: Links, departures: Departures, own: OwnLinks,
                 policy: Policy,
                 pending: Pending, by_connection: dict[Any, Conn],
                 clock: Callable[[], float],
                 flowed: Callable[[OutLink], None] | None = None) -> None:
        self.router = router
        self.links = links
        self.departures = departures
        self.own = own
        self.policy = policy
        self.credit_dirty = pending.credit
        self.by_connection = by_connection
        self.clock = clock
        self.flowed = flowed
        #: Client attaches an edge router holds while its interior is asked
        #: whether they are link-routed.
        self.parked: dict[Any, Conn] = {}

    def _conn_of(self, lptr: Any) -> Conn | None:
        return self.by_connection.get(lib.pn_session_connection(lib.pn_link_session(lptr)))

    def link_opened(self, lptr: Any) -> list[Effect]:
        """The peer attached a link, or answered one of the router's."""
        conn = self._conn_of(lptr)
        if conn is None:
            return []
        now = self.clock()
        link: InLink | OutLink | RoutedEnd | None
        routed = self.links.table.get(lptr)
        if type(routed) is RoutedEnd:
            return self.own.routed_answered(routed, lptr)
        if routed is not None:
            # The peer answered one of the router's own links (an uplink's).
            assert not isinstance(routed, RoutedEnd)
            remote = lib.pn_link_remote_target(lptr) if lib.pn_link_is_sender(lptr) \
                else lib.pn_link_remote_source(lptr)
            return self.router.own_link_answered(routed,
                                                 to_str(lib.pn_terminus_get_address(remote)))
        autolink = self.own.attaching.pop(lptr, None)
        if autolink is not None:
            link, effects = self.own.autolink_answered(autolink, lptr, now)
        elif lib.pn_link_state(lptr) & lib.PN_LOCAL_ACTIVE:
            # The peer answered one of our own inter-router links.
            local = lib.pn_link_source(lptr) if lib.pn_link_is_sender(lptr) \
                else lib.pn_link_target(lptr)
            link, effects = router_link(self.router, conn.core, lptr, capabilities(local),
                                        cost=conn.cost, now=now)
        else:
            grant = conn.grant
            # Checked and counted under vhost policy only (a refused connection's
            # links are refused); without it a grant has no group and no rules.
            if grant is not None and not (isinstance(grant, Grant) and not grant.restricted):
                denied = self._policy_attach(conn, lptr)
                if denied is not None:
                    policy_log.info("[C%d] DENY link on connection '%s': %s",
                                    conn.core.conn_id, conn.peer, denied.reason)
                    refuse_link(lptr, denied.condition, denied.description)
                    return []
                self.links.policy_links.add(lptr)
            if conn.core.max_message_size < NO_SIZE_LIMIT and lib.pn_link_is_receiver(lptr):
                lib.pn_link_set_max_message_size(lptr, conn.core.max_message_size)
            asking = self._ask_interior(conn, lptr, now)
            if asking is not None:
                self.parked[lptr] = conn
                return asking
            return self._attach(conn, lptr, now)
        self._served(lptr, link)
        return effects

    def _attach(self, conn: Conn, lptr: Any, now: float) -> list[Effect]:
        """Let the core decide a peer's attach, and serve the link it binds."""
        decision, effects = attach(self.router, conn.core, lptr, cost=conn.cost, now=now)
        link = getattr(decision, "link", None)
        grant = conn.grant
        if isinstance(link, InLink) and link.record is None and isinstance(grant, Grant) \
                and self.policy.restricts_targets(grant):
            # An anonymous sender: each message's target is checked, as qdrouterd does.
            link.target_allowed = functools.partial(self.policy.message_target_allowed, grant)
        self._served(lptr, link)
        return effects

    def _served(self, lptr: Any, link: object) -> None:
        if isinstance(link, (InLink, OutLink, RoutedEnd)):
            self.links.add(lptr, link)
            if isinstance(link, InLink) and not link.blocked:
                self.credit_dirty.add(link)

    # -- an edge router's link-route lookups ----------------------------------------------

    def _ask_interior(self, conn: Conn, lptr: Any, now: float) -> list[Effect] | None:
        """On an edge router, the effects that ask the interior whether a
        client's attach is link-routed (docs/networks.md#link-routes-through-an-edge);
        None to decide it at once."""
        if self.router.uplink is None or conn.core.role is Role.EDGE:
            return None
        receiving = bool(lib.pn_link_is_receiver(lptr))
        facing = lib.pn_link_remote_target(lptr) if receiving \
            else lib.pn_link_remote_source(lptr)
        address = dynamic_route_address(facing) or facing_address(facing)
        if not address:
            return None
        return self.router.edge_lookup(lptr, address, receiving, now)

    def lookup_answered(self, answer: LookupAnswered) -> list[Effect]:
        """The interior answered (or could not): decide the held attach."""
        lptr = answer.handle
        conn = self.parked.pop(lptr, None)
        if conn is None or conn.closed:
            return []
        now = self.clock()
        uplink = self.router.uplink
        if not answer.link_route or uplink is None or uplink.active is None:
            effects = self._attach(conn, lptr, now)
            link = self.links.table.get(lptr)
            if isinstance(link, OutLink) and self.flowed is not None \
                    and lib.pn_link_credit(lptr) > 0:
                self.flowed(link)  # credit given while the attach was held
            return effects
        if not answer.destinations:
            log.info("[%r] Link attach refused: the interior's link route has no destination",
                     conn.core)
            refuse_link(lptr, "qd:no-route-to-dest", "No route to the destination node")
            return []
        receiving = bool(lib.pn_link_is_receiver(lptr))
        facing = lib.pn_link_remote_target(lptr) if receiving \
            else lib.pn_link_remote_source(lptr)
        address = dynamic_route_address(facing) or facing_address(facing) or ""
        near, effects = self.router.link_routing.forward_direct(
            conn.core, uplink.active, name=to_str(lib.pn_link_name(lptr)) or "",
            address=address, receiving=receiving, resumable=resumable(facing), handle=lptr)
        log.info("[%r][L%d] Link-routed attach through the uplink: dir=%s address=%s",
                 conn.core, near.link_id, "in" if receiving else "out", address)
        self._served(lptr, near)
        return effects

    def _policy_attach(self, conn: Conn, lptr: Any) -> Denied | None:
        """Vhost policy for a client's attach."""
        grant = conn.grant
        if not isinstance(grant, Grant):
            return Denied("amqp:unauthorized-access", LINK_DENIED, "connection refused")
        sender = bool(lib.pn_link_is_receiver(lptr))  # the client sends on it
        terminus = lib.pn_link_remote_target(lptr) if sender \
            else lib.pn_link_remote_source(lptr)
        return self.policy.attach(grant, sender=sender,
                                  address=to_str(lib.pn_terminus_get_address(terminus)),
                                  dynamic=bool(lib.pn_terminus_is_dynamic(terminus)),
                                  capabilities=capabilities(terminus))

    def link_lost(self, lptr: Any, why: str, *, answerable: bool = True) -> list[Effect]:
        """The peer detached a link (``answerable``), or ended its session.

        A link-routed link the peer detached stays served until the other
        side's detach, its answer, comes back (``answer_awaited``).
        """
        self.parked.pop(lptr, None)
        links = self.links
        if lptr in links.policy_links:
            links.policy_links.discard(lptr)
            conn = self._conn_of(lptr)
            if conn is not None and isinstance(conn.grant, Grant):
                self.policy.detached(conn.grant, sender=bool(lib.pn_link_is_receiver(lptr)))
        autolink = self.own.attaching.pop(lptr, None)
        if autolink is not None:
            self.router.auto_links.detached(autolink, detach_error(lptr), self.clock())
            return []
        link = links.table.get(lptr)
        if link is None:
            return []
        if isinstance(link, RoutedEnd) and link.answer_awaited:
            # It detached already; its session ends before the answer came:
            # nothing is left to answer.
            self.departures.pop(lptr)
            return []
        if log.isEnabledFor(logging.INFO):
            log.info("[%r][L%d] %s: %s", link.conn, link.link_id, why, describe_counters(link))
        if isinstance(link, RoutedEnd):
            routed = self.router.routed_detached(link, remote_detach(lptr))
            if answerable and link.answer_awaited:
                # Nothing more passes through it: what did is settled now
                # (a partial copy aborted before the detach goes on).
                self.departures.settle_routed(link)
            else:
                # Answered at once, or its session ended: the other side gets
                # the session's error, and nothing answers this side any more.
                self.departures.pop(lptr)
            return routed
        self.departures.pop(lptr)
        now = self.clock()
        effects = self.router.link_detached(link, now, error=detach_error(lptr))
        network = self.router.network
        if network is not None and isinstance(link, OutLink):
            rlink = network.link_of(link.conn)
            if rlink is not None and rlink.control is link:
                # Losing the control link loses the neighbour
                # (docs/networks.md#inter-router-connections).
                effects.extend(network.link_lost(link.conn, now))
        return effects

    def answer_detach(self, lptr: Any) -> None:
        """Answer the peer's detach or close of a link (after ``link_lost``);
        a link's own session ends with it.  A link-routed link waiting for
        the other side's answer is answered when that comes."""
        link = self.links.table.get(lptr)
        if isinstance(link, RoutedEnd) and link.answer_awaited:
            return
        close_link(lptr)
        self.own.end_session(lptr)

    def links_in(self, ssn: Any) -> list[Any]:
        """The links of a session the peer ended (each then ``link_lost``)."""
        self.own.session_lost(ssn)
        return [p for p in [*self.links.table, *self.own.attaching]
                if lib.pn_link_session(p) == ssn]


__all__ = ["Attaching", "detach_error", "remote_detach"]
