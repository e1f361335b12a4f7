"""Links the router attaches itself: auto-links toward a container, the far
end of each link-routed pair, and the links of an edge router's uplink.

Owns attaching them (each in a session of its own: a broker that ends a
session, as RabbitMQ does when asked to drain a receiver it cannot fill,
then takes down only that link), waiting for the peer's answer, answering
a link-routed client with what the far side answered, and detaching them.
It asks the core what an answer means and returns the core's effects for
the caller to carry out; it decides nothing itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from proton import Data, symbol

from autolink import AutoLink
from router.adapter.connections.state import Conn, token
from router.adapter.endpoints.links import Departures, Links
from router.adapter.endpoints.sessions import Sessions
from router.adapter.endpoints.termini import (
    dynamic_route_address,
    facing_address,
    may_modify,
    new_session,
    resumable,
    set_dynamic_route_address,
)
from router.adapter.forwarding.relay import Relay
from router.adapter.pending import Pending
from router.adapter.pn import lib, pn_bytes, set_condition, to_str
from router.core import (
    AnswerAttach,
    AttachAutoLink,
    AttachOwnLink,
    Connection,
    DetachRouted,
    Effect,
    ForwardAttach,
    InLink,
    OutLink,
    RoutedEnd,
    Router,
    describe_counters,
)

log = logging.getLogger(__name__)


class OwnLinks:
    """Auto-links and link-routed far ends.

    Args:
        router: the routing core.
        links: the link table the answered links join.
        departures: settles what a link that goes held.
        sessions: the one-link sessions of the router's own links.
        relay: passes credit given before a routed pair opened.
        pending: the wake-up's shared work (connections with output).
        by_connection: the adapter connection of a proton connection.
        clock: monotonic clock (seconds).
    """

    def __init__(self, router: Router, links: Links, departures: Departures,
                 sessions: Sessions, relay: Relay, pending: Pending,
                 by_connection: dict[Any, Conn], clock: Callable[[], float]) -> None:
        self.router = router
        self.links = links
        self.departures = departures
        self.sessions = sessions
        self.relay = relay
        self.dirty = pending.output
        self.credit_dirty = pending.credit
        self.by_connection = by_connection
        self.clock = clock
        #: Links the router attached itself and the peer has not answered yet.
        self.attaching: dict[Any, AutoLink[Connection]] = {}
        #: The session of each connection's uplink links (an edge router's).
        self.shared: dict[Conn, Any] = {}
        self._own_tags = 0

    def end_session(self, lptr: Any) -> None:
        """A link of the router's own went: its session ends with it."""
        self.sessions.end(lptr)

    def session_lost(self, ssn: Any) -> None:
        self.sessions.lost(ssn)

    def connection_lost(self, conn: Conn) -> None:
        """The connection is gone: forget its links that were never answered."""
        cptr = conn.cptr
        for lptr in [p for p in self.attaching
                     if lib.pn_session_connection(lib.pn_link_session(p)) == cptr]:
            del self.attaching[lptr]
        self.sessions.connection_lost(conn)
        self.shared.pop(conn, None)

    # -- the router's own links (an edge's uplink) ----------------------------------------

    def attach_own(self, effect: AttachOwnLink) -> None:
        """Attach a link the core made (docs/networks.md#edge-routers): all of
        a connection's in one session, as qdrouterd does."""
        link = effect.link
        conn = link.conn.handle
        if conn is None or conn.closed:
            return
        ssn = self.shared.get(conn)
        if ssn is None:
            ssn = self.shared[conn] = new_session(conn)
        name = link.name.encode()
        lptr = lib.pn_sender(ssn, name) if isinstance(link, OutLink) \
            else lib.pn_receiver(ssn, name)
        source, target = lib.pn_link_source(lptr), lib.pn_link_target(lptr)
        if effect.source is not None:
            lib.pn_terminus_set_address(source, effect.source.encode())
        if effect.target is not None:
            lib.pn_terminus_set_address(target, effect.target.encode())
        if effect.dynamic:
            lib.pn_terminus_set_dynamic(source, True)
        for terminus in (source, target):
            data = Data(lib.pn_terminus_capabilities(terminus))
            for capability in effect.capabilities:
                data.put_symbol(symbol(capability))
        if isinstance(link, OutLink) and link.presettle:
            lib.pn_link_set_snd_settle_mode(lptr, lib.PN_SND_SETTLED)
        link.handle = lptr
        self.links.add(lptr, link)
        lib.pn_link_open(lptr)
        if isinstance(link, InLink) and not link.blocked:
            self.credit_dirty.add(link)
        self.dirty.add(conn)

    def send_unsettled(self, link: OutLink, data: bytes) -> bool:
        """Send a message the router makes itself unsettled, when ``link`` has
        credit now (a management request, which must say which connection it
        came on); its outcome goes nowhere (the consumer's disposition finds
        no transfer and is settled).  False: no credit."""
        lptr = link.handle
        if lptr is None or link.credit <= 0:
            return False
        self._own_tags += 1
        tag = f"own.{self._own_tags}".encode()
        lib.pn_delivery(lptr, pn_bytes(tag))  # proton copies the tag
        lib.pn_link_send(lptr, data, len(data))
        lib.pn_link_advance(lptr)
        link.credit -= 1
        link.delivered += 1
        conn = link.conn.handle
        if conn is not None:
            self.dirty.add(conn)
        return True

    def detach_own(self, link: InLink | OutLink) -> None:
        """Detach a link of the router's own the core has already unbound:
        what it holds ends as for any link that goes."""
        lptr = link.handle
        if lptr is None:
            return
        self.departures.pop(lptr)
        self._close(lptr)

    # -- auto-links ---------------------------------------------------------------------

    def attach_autolink(self, effect: AttachAutoLink) -> None:
        """Attach an auto-link's link: the terminus facing the container
        carries the (external) address, the other is empty
        (docs/brokers.md#the-life-of-an-auto-link)."""
        conn = effect.conn.handle
        if conn is None or conn.closed:
            return
        ssn = self.sessions.begin(conn)
        name = f"qdlink.{token()}".encode()
        if effect.sender:
            lptr = lib.pn_sender(ssn, name)
            lib.pn_terminus_set_address(lib.pn_link_target(lptr), effect.address.encode())
        else:
            lptr = lib.pn_receiver(ssn, name)
            lib.pn_terminus_set_address(lib.pn_link_source(lptr), effect.address.encode())
        lib.pn_link_open(lptr)
        self.attaching[lptr] = effect.autolink
        self.dirty.add(conn)

    def autolink_answered(self, autolink: AutoLink[Connection], lptr: Any, now: float
                          ) -> tuple[InLink | OutLink | None, list[Effect]]:
        """The container answered an auto-link's attach."""
        sender = bool(lib.pn_link_is_sender(lptr))
        terminus = lib.pn_link_remote_target(lptr) if sender else lib.pn_link_remote_source(lptr)
        name = to_str(lib.pn_link_name(lptr)) or ""
        link, effects = self.router.auto_links.attached(
            autolink, name=name, address=to_str(lib.pn_terminus_get_address(terminus)),
            handle=lptr, now=now)
        if link is None:
            # No address: the container is expected to detach; wait for it.
            self.attaching[lptr] = autolink
        else:
            if isinstance(link, InLink):
                link.may_modify = may_modify(terminus)
            log.info("[%r][L%d] Auto link attached: dir=%s address=%s", link.conn,
                     link.link_id, autolink.spec.direction.value, autolink.external_address)
        return link, effects

    def detach_autolink(self, autolink: AutoLink[Connection]) -> list[Effect]:
        """A deleted auto-link: close its link as the router's own detach."""
        effects: list[Effect] = []
        for lptr, waiting in list(self.attaching.items()):
            if waiting is autolink:
                del self.attaching[lptr]
                self._close(lptr)
        for lptr, link in list(self.links.table.items()):
            if isinstance(link, InLink | OutLink) and link.autolink is autolink:
                link.autolink = None  # gone, not failed: no retry
                self.departures.pop(lptr)
                log.info("[%r][L%d] Auto link deleted: %s", link.conn, link.link_id,
                         describe_counters(link))
                effects.extend(self.router.link_detached(link, self.clock()))
                self._close(lptr)
        return effects

    def _close(self, lptr: Any) -> None:
        lib.pn_link_close(lptr)
        conn = self.by_connection.get(lib.pn_session_connection(lib.pn_link_session(lptr)))
        if conn is not None:
            self.dirty.add(conn)

    # -- link-routed pairs ------------------------------------------------------------

    def forward_attach(self, effect: ForwardAttach) -> None:
        """Attach the far end of a link-routed pair: the client's termini and
        settle modes, the container-facing address as the route rewrote it."""
        far = effect.far
        conn = far.conn.handle
        near_lptr = effect.near.handle
        if conn is None or conn.closed or near_lptr is None:
            return  # going away: its connection's close ends the pair
        ssn = self.sessions.begin(conn)
        name = effect.name.encode()
        lptr = lib.pn_receiver(ssn, name) if far.receiving else lib.pn_sender(ssn, name)
        lib.pn_terminus_copy(lib.pn_link_source(lptr), lib.pn_link_remote_source(near_lptr))
        lib.pn_terminus_copy(lib.pn_link_target(lptr), lib.pn_link_remote_target(near_lptr))
        facing = lib.pn_link_source(lptr) if far.receiving else lib.pn_link_target(lptr)
        if lib.pn_terminus_get_type(facing) == lib.PN_COORDINATOR:
            pass
        elif not lib.pn_terminus_is_dynamic(facing):
            lib.pn_terminus_set_address(facing, effect.address.encode())
        elif dynamic_route_address(facing) not in (None, effect.address):
            set_dynamic_route_address(facing, effect.address)
        lib.pn_link_set_snd_settle_mode(lptr, lib.pn_link_remote_snd_settle_mode(near_lptr))
        lib.pn_link_set_rcv_settle_mode(lptr, lib.pn_link_remote_rcv_settle_mode(near_lptr))
        far.handle = lptr
        self.links.add(lptr, far)
        lib.pn_link_open(lptr)
        self.dirty.add(conn)

    def answer_attach(self, effect: AnswerAttach) -> None:
        """Answer the client's attach with what the far side answered."""
        near = effect.near
        lptr = near.handle
        if lptr is None:
            return
        far = near.partner
        if far is not None and far.handle is not None and not effect.null:
            flptr = far.handle
            lib.pn_terminus_copy(lib.pn_link_source(lptr), lib.pn_link_remote_source(flptr))
            lib.pn_terminus_copy(lib.pn_link_target(lptr), lib.pn_link_remote_target(flptr))
            lib.pn_link_set_snd_settle_mode(lptr, lib.pn_link_remote_snd_settle_mode(flptr))
            lib.pn_link_set_rcv_settle_mode(lptr, lib.pn_link_remote_rcv_settle_mode(flptr))
        facing = lib.pn_link_target(lptr) if near.receiving else lib.pn_link_source(lptr)
        if effect.null:
            lib.pn_terminus_set_type(facing, lib.PN_UNSPECIFIED)
        elif effect.address is not None and lib.pn_terminus_get_type(facing) != \
                lib.PN_COORDINATOR:
            lib.pn_terminus_set_address(facing, effect.address.encode())
        lib.pn_link_open(lptr)
        conn = near.conn.handle
        if conn is not None:
            self.dirty.add(conn)
        if not effect.null and far is not None:
            # Credit the receiving side gave before the pair opened
            # (docs/brokers.md#the-routed-pair).
            self.relay.relay_flow(far if near.receiving else near)

    def detach_routed(self, effect: DetachRouted) -> None:
        """Detach one link of a pair: what passed through it is settled first."""
        end = effect.end
        lptr = end.handle
        if lptr is None:
            return
        if not end.answer_asked and self.departures.pop(lptr) is None:
            # (Else it stays served until its peer's detach answers this one;
            # ``Links.pop`` settles what passed through it and keeps its counts.)
            self.relay.routed_gone(end)
            end.handle = None
        if effect.condition:
            set_condition(lib.pn_link_condition(lptr), effect.condition,
                          effect.description or "")
        if lib.pn_link_state(lptr) & lib.PN_LOCAL_UNINIT:
            lib.pn_link_open(lptr)
        if effect.closed:
            lib.pn_link_close(lptr)
        else:
            lib.pn_link_detach(lptr)
        if not end.answer_asked:
            self.sessions.end(lptr)  # else when the answer comes (answer_detach)
        conn = end.conn.handle
        if conn is not None:
            self.dirty.add(conn)

    def routed_answered(self, far: RoutedEnd, lptr: Any) -> list[Effect]:
        """The far side answered a link-routed attach."""
        sender = bool(lib.pn_link_is_sender(lptr))
        facing = lib.pn_link_remote_target(lptr) if sender else lib.pn_link_remote_source(lptr)
        if far.receiving:
            far.may_modify = may_modify(lib.pn_link_remote_source(lptr))
        return self.router.routed_answered(
            far, facing_address(facing), null=lib.pn_terminus_get_type(facing) ==
            lib.PN_UNSPECIFIED, resumable=resumable(facing))


__all__ = ["OwnLinks"]
