"""Connections, sessions and links coming and going: the set-up side of the loop.

Owns what the engine does on proton's endpoint events (open, close, detach
of connections, sessions and links), the links the router attaches itself
(inter-router links, auto-links), and carrying out the core's effects.
It asks the core (``router.core.Router``) what each event means and decides
nothing itself.  Links the router attaches toward a container get a session
each: a broker that ends a session (RabbitMQ does when asked to drain a
receiver it cannot fill) then takes down only that link.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from autolink import AutoLink
from linkroute import Detach
from router.adapter.connections import (
    Conn,
    failover_server_list,
    open_properties,
    symbols,
    token,
)
from router.adapter.endpoints import (
    ROUTER_CONTROL,
    ROUTER_DATA,
    attach,
    capabilities,
    close_link,
    facing_address,
    may_modify,
    open_router_link,
    refuse_link,
    remote_condition,
    resumable,
    router_link,
    set_condition,
)
from router.adapter.forwarder import Forwarder
from router.adapter.pn import lib, to_str
from router.adapter.tls import TlsProfile
from router.core import (
    PRIORITIES,
    TALLY_KEYS,
    AnswerAttach,
    AttachAutoLink,
    Connection,
    DetachAutoLink,
    DetachRouted,
    Effect,
    ForwardAttach,
    InLink,
    OutLink,
    Role,
    RoutedEnd,
    Router,
    describe_counters,
    tally,
)
from router.core.policy import LINK_DENIED, Denied, Grant, Policy
from router.core.records import NO_SIZE_LIMIT

log = logging.getLogger("router.adapter.engine")
server_log = logging.getLogger("router.adapter.server")
policy_log = logging.getLogger("router.core.policy")

_UNLIMITED_SESSION_FRAMES = 2**31 // 65536


def _set_window(ssn: Any, conn: Conn) -> None:
    """A session's incoming window, in bytes (reference 3.2).  Unset, proton's
    default window is small enough to stall a fast sender for a round trip
    every few dozen messages; qdrouterd's default is an unlimited window,
    bounded in practice by link credit."""
    s = conn.settings
    grant = conn.grant
    if isinstance(grant, Grant) and grant.group is not None \
            and grant.group.max_session_window is not None:
        # The vhost group's window (qdrouterd's maxSessionWindow, in bytes).
        lib.pn_session_set_incoming_capacity(ssn, grant.group.max_session_window)
        return
    frames = s.max_session_frames or _UNLIMITED_SESSION_FRAMES
    lib.pn_session_set_incoming_capacity(ssn, s.max_frame_size * frames)


def _new_session(conn: Conn) -> Any:
    """Begin a session of the router's own on ``conn``."""
    ssn = lib.pn_session(conn.cptr)
    _set_window(ssn, conn)
    lib.pn_session_open(ssn)
    return ssn


class Lifecycle:
    """The engine's endpoint handling (a base class of ``Engine``)."""

    router: Router
    router_id: str
    forwarder: Forwarder
    clock: Callable[[], float]
    by_connection: dict[Any, Conn]
    by_transport: dict[Any, Conn]
    links: dict[Any, InLink | OutLink | RoutedEnd]
    dirty: set[Conn]
    policy: Policy
    tls_profiles: dict[str, TlsProfile]

    def __init__(self) -> None:
        # Links the router attached itself and the peer has not answered yet.
        self.attaching: dict[Any, AutoLink[Connection]] = {}
        # Sessions the router began for one link of its own.
        self.link_sessions: set[Any] = set()
        # Router-wide counters of endpoint links that are gone (management).
        self.retired = dict.fromkeys(TALLY_KEYS, 0)
        # Client links admitted by vhost policy (counted until they go).
        self.policy_links: set[Any] = set()

    def apply(self, effects: list[Effect]) -> None:
        """Carry out the core's effects: links to attach here, the rest
        (credit, control frames) on the per-message side."""
        rest: list[Effect] = []
        for effect in effects:
            if isinstance(effect, AttachAutoLink):
                self._attach_autolink(effect)
            elif isinstance(effect, DetachAutoLink):
                self._detach_autolink(effect.autolink)
            elif isinstance(effect, ForwardAttach):
                self._forward_attach(effect)
            elif isinstance(effect, AnswerAttach):
                self._answer_attach(effect)
            elif isinstance(effect, DetachRouted):
                self._detach_routed(effect)
            else:
                rest.append(effect)
        if rest:
            self.forwarder.apply(rest)

    def _touched(self, e: Any) -> None:
        """Mark the connection of an event as having output to write."""
        conn = self.by_connection.get(lib.pn_event_connection(e))
        if conn is not None:
            self.dirty.add(conn)

    def _lifecycle(self, t: int, e: Any) -> None:
        self._touched(e)
        if t == lib.PN_CONNECTION_REMOTE_OPEN:
            self._connection_opened(lib.pn_event_connection(e))
        elif t == lib.PN_SESSION_REMOTE_OPEN:
            self._session_opened(lib.pn_event_session(e))
        elif t == lib.PN_LINK_REMOTE_OPEN:
            self._link_opened(lib.pn_event_link(e))
        elif t in (lib.PN_LINK_REMOTE_CLOSE, lib.PN_LINK_REMOTE_DETACH):
            lptr = lib.pn_event_link(e)
            self._link_lost(lptr, "Link detached")
            self._detached(lptr)
        elif t == lib.PN_SESSION_REMOTE_CLOSE:
            ssn = lib.pn_event_session(e)
            self._session_lost(ssn)
            if lib.pn_session_state(ssn) & lib.PN_LOCAL_ACTIVE:
                lib.pn_session_close(ssn)
        elif t == lib.PN_CONNECTION_REMOTE_CLOSE:
            cptr = lib.pn_event_connection(e)
            if lib.pn_connection_state(cptr) & lib.PN_LOCAL_ACTIVE:
                lib.pn_connection_close(cptr)
        elif t == lib.PN_TRANSPORT_ERROR:
            conn = self.by_transport.get(lib.pn_event_transport(e))
            if conn is not None:
                why = remote_condition(lib.pn_transport_condition(conn.tptr))
                server_log.info("[C%d] Connection from %s failed: %s", conn.core.conn_id,
                                conn.peer, why)
                if isinstance(conn.grant, Grant) and conn.grant.group is not None \
                        and "above negotiated channel_max" in why:
                    # More sessions than the group's maxSessions allow.
                    self.policy.session_refused(conn.grant)
                    policy_log.info("[C%d] DENY session on connection '%s': beyond "
                                    "maxSessions %d", conn.core.conn_id, conn.peer,
                                    conn.grant.group.max_sessions)
        elif t == lib.PN_TRANSPORT_CLOSED:
            conn = self.by_transport.get(lib.pn_event_transport(e))
            if conn is not None:
                self.dirty.add(conn)

    def _connection_opened(self, cptr: Any) -> None:
        conn = self.by_connection.get(cptr)
        if conn is None:
            return
        conn.opened = True
        conn.user = self._user_of(conn)
        core = conn.core
        core.container_id = to_str(lib.pn_connection_remote_container(cptr)) or ""
        pn_conn = conn.pn_conn
        if core.role is Role.INTER_ROUTER:
            # The connection's cost is the larger of both sides' (reference 9.1).
            props = pn_conn.remote_properties or {}
            peer_cost = props.get("qd.inter-router-cost")
            if isinstance(peer_cost, int) and peer_cost > conn.cost:
                conn.cost = peer_cost
        connector = conn.connector
        if connector is not None:
            connector.failures = 0
            announced = failover_server_list(pn_conn.remote_properties)
            if announced is not None:
                connector.failover.learn(announced)
            connector.message = (f"[C{core.conn_id}] Connection Opened: dir=out "
                                 f"host={connector.address}")
        if conn.connector is None:
            pn_conn.container = self.router_id
            pn_conn.offered_capabilities = symbols("ANONYMOUS-RELAY")
            pn_conn.properties = open_properties(conn)
            # Admitted before the OPEN goes out: policy may lower its limits.
            denied = None if core.role is Role.INTER_ROUTER else self._admit(conn, cptr)
            pn_conn.open()
            if denied is not None:
                self._refuse_connection(conn, cptr, denied)
                return
        elif core.role is Role.INTER_ROUTER:
            self._open_router_links(conn)
        elif conn.settings.policy_vhost is not None:
            denied = self._admit_connector(conn, conn.settings.policy_vhost)
            if denied is not None:
                self._refuse_connection(conn, cptr, denied)
                return
        t = conn.transport
        log.info("[C%d] Connection Opened: dir=%s host=%s encrypted=%s auth=%s user=%s "
                 "container_id=%s role=%s", core.conn_id,
                 "out" if conn.connector else "in", conn.peer,
                 "yes" if t.encrypted else "no", "yes" if t.authenticated else "no",
                 conn.user or "anonymous", core.container_id, core.role.value)
        self.apply(self.router.connection_opened(core, self.clock()))

    def _user_of(self, conn: Conn) -> str | None:
        """The peer's user: with EXTERNAL over TLS and a listener profile
        with ``uidFormat``, the one its certificate makes; else SASL's."""
        t = conn.transport
        if conn.ssl is not None and conn.connector is None and t.sasl().mech == "EXTERNAL":
            section = conn.settings.section
            profile = self.tls_profiles.get(section.ssl_profile) if section is not None \
                else None
            user = profile.user_of(conn.ssl) if profile is not None else None
            if user is not None:
                return user
        return t.user  # type: ignore[no-any-return]

    def _admit(self, conn: Conn, cptr: Any) -> Denied | None:
        """Vhost policy for a client's OPEN, before the router's OPEN is sent:
        admitted, the group's frame size and session count go into that OPEN."""
        t = conn.transport
        mech = t.sasl().mech
        grant = self.policy.open(hostname=to_str(lib.pn_connection_remote_hostname(cptr)),
                                 user=conn.user, host=conn.peer.rsplit(":", 1)[0].strip("[]"),
                                 authenticated=bool(t.authenticated and conn.user
                                                    and mech not in (None, "ANONYMOUS")),
                                 forced_vhost=conn.settings.policy_vhost)
        conn.grant = grant  # refused: its links are not served
        if isinstance(grant, Denied):
            policy_log.info("DENY Connection '%s' user '%s': %s", conn.peer,
                            conn.user or "anonymous", grant.reason)
            return grant
        self._granted(conn, grant)
        group = grant.group
        if group is not None:
            if group.max_frame_size is not None:
                lib.pn_transport_set_max_frame(conn.tptr, max(512, group.max_frame_size))
            if group.max_sessions < conn.settings.max_sessions:
                lib.pn_transport_set_channel_max(conn.tptr, max(0, group.max_sessions - 1))
        return None

    def _admit_connector(self, conn: Conn, vhost: str) -> Denied | None:
        """A connector naming ``policyVhost``: its vhost's ``$connector``
        group rules what the peer attaches."""
        grant = self.policy.connector(vhost, conn.peer.rsplit(":", 1)[0].strip("[]"))
        conn.grant = grant
        if isinstance(grant, Denied):
            policy_log.info("DENY Connection '%s' (connector %s): %s", conn.peer,
                            conn.settings.name or "", grant.reason)
            return grant
        self._granted(conn, grant)
        return None

    def _granted(self, conn: Conn, grant: Grant) -> None:
        limit = self.policy.message_limit(grant)
        if limit is not None:
            conn.core.max_message_size = limit
        conn.core.user_id = grant.user_id

    @staticmethod
    def _refuse_connection(conn: Conn, cptr: Any, denied: Denied) -> None:
        cond = lib.pn_connection_condition(cptr)
        lib.pn_condition_set_name(cond, denied.condition.encode())
        lib.pn_condition_set_description(cond, denied.description.encode())
        lib.pn_connection_close(cptr)

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

    def _open_router_links(self, conn: Conn) -> None:
        """The connector side attaches the control links, then one data link
        pair per priority, each pair in a session of its own (reference 9.1)."""
        for capability in [ROUTER_CONTROL] + [ROUTER_DATA] * PRIORITIES:
            ssn = _new_session(conn)
            for sender in (True, False):
                open_router_link(ssn, f"qdlink.{token()}", sender=sender, capability=capability)

    def _session_opened(self, ssn: Any) -> None:
        if not lib.pn_session_state(ssn) & lib.PN_LOCAL_UNINIT:
            return
        conn = self.by_connection.get(lib.pn_session_connection(ssn))
        if conn is not None:
            _set_window(ssn, conn)
        lib.pn_session_open(ssn)

    def _link_opened(self, lptr: Any) -> None:
        conn = self.by_connection.get(lib.pn_session_connection(lib.pn_link_session(lptr)))
        if conn is None:
            return
        now = self.clock()
        link: InLink | OutLink | RoutedEnd | None
        routed = self.links.get(lptr)
        if type(routed) is RoutedEnd:
            self._routed_answered(routed, lptr)
            return
        autolink = self.attaching.pop(lptr, None)
        if autolink is not None:
            link, effects = self._autolink_answered(autolink, lptr, now)
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
            if grant is not None and not (isinstance(grant, Grant) and grant.group is None):
                denied = self._policy_attach(conn, lptr)
                if denied is not None:
                    policy_log.info("[C%d] DENY link on connection '%s': %s",
                                    conn.core.conn_id, conn.peer, denied.reason)
                    refuse_link(lptr, denied.condition, denied.description)
                    return
                self.policy_links.add(lptr)
            if conn.core.max_message_size < NO_SIZE_LIMIT and lib.pn_link_is_receiver(lptr):
                lib.pn_link_set_max_message_size(lptr, conn.core.max_message_size)
            decision, effects = attach(self.router, conn.core, lptr, cost=conn.cost, now=now)
            link = getattr(decision, "link", None)
        if isinstance(link, (InLink, OutLink, RoutedEnd)):
            self.links[lptr] = link
            if isinstance(link, InLink) and not link.blocked:
                self.forwarder.credit_dirty.add(link)
        self.apply(effects)

    def _link_lost(self, lptr: Any, why: str) -> None:
        """The peer detached a link, or ended its session."""
        if lptr in self.policy_links:
            self.policy_links.discard(lptr)
            conn = self.by_connection.get(lib.pn_session_connection(lib.pn_link_session(lptr)))
            if conn is not None and isinstance(conn.grant, Grant):
                self.policy.detached(conn.grant, sender=bool(lib.pn_link_is_receiver(lptr)))
        autolink = self.attaching.pop(lptr, None)
        if autolink is not None:
            self.router.autolink_detached(autolink, self._detach_error(lptr), self.clock())
            return
        link = self.links.pop(lptr, None)
        if link is None:
            return
        self._forget_link(link)
        log.info("[%r][L%d] %s: %s", link.conn, link.link_id, why, describe_counters(link))
        if isinstance(link, RoutedEnd):
            self.apply(self.router.routed_detached(link, self._remote_detach(lptr)))
            return
        now = self.clock()
        effects = self.router.link_detached(link, now, error=self._detach_error(lptr))
        network = self.router.network
        if network is not None and isinstance(link, OutLink):
            rlink = network.link_of(link.conn)
            if rlink is not None and rlink.control is link:
                # Losing the control link loses the neighbour (reference 9.1).
                effects.extend(network.link_lost(link.conn, now))
        self.apply(effects)

    def _forget_link(self, link: InLink | OutLink | RoutedEnd) -> None:
        if isinstance(link, OutLink):
            self.forwarder.lose_outgoing(link)
        elif isinstance(link, InLink):
            self.forwarder.lose_incoming(link)
        else:
            self.forwarder.routed_gone(link)
        link.handle = None
        self._retire(link)

    def _retire(self, link: InLink | OutLink | RoutedEnd) -> None:
        """Keep a departing endpoint link's counts in the router-wide totals."""
        if link.conn.role is not Role.INTER_ROUTER and not isinstance(link, RoutedEnd):
            tally(self.retired, link)

    def _session_lost(self, ssn: Any) -> None:
        self.link_sessions.discard(ssn)
        for lptr in [p for p in [*self.links, *self.attaching] if lib.pn_link_session(p) == ssn]:
            self._link_lost(lptr, "Link lost")

    def _detached(self, lptr: Any) -> None:
        """Answer a remote detach; a link's own session ends with it."""
        close_link(lptr)
        self._end_link_session(lptr)

    @staticmethod
    def _remote_detach(lptr: Any) -> Detach:
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

    @classmethod
    def _detach_error(cls, lptr: Any) -> str:
        """Why the peer detached a link, as one line: ``condition: description``."""
        detach = cls._remote_detach(lptr)
        if detach.condition is None:
            return ""
        if detach.description:
            return f"{detach.condition}: {detach.description}"
        return detach.condition

    def _forget_connection(self, conn: Conn) -> None:
        """The connection is gone: forget its links that were never answered."""
        cptr = conn.cptr
        for lptr in [p for p in self.attaching
                     if lib.pn_session_connection(lib.pn_link_session(p)) == cptr]:
            del self.attaching[lptr]
        self.link_sessions = {ssn for ssn in self.link_sessions
                              if lib.pn_session_connection(ssn) != cptr}

    # -- links the router attaches -----------------------------------------------

    def _link_session(self, conn: Conn) -> Any:
        """A new session for one link of the router's own."""
        ssn = _new_session(conn)
        self.link_sessions.add(ssn)
        return ssn

    def _attach_autolink(self, effect: AttachAutoLink) -> None:
        """Attach an auto-link's link: the terminus facing the container
        carries the (external) address, the other is empty (reference 8.1)."""
        conn = effect.conn.handle
        if conn is None or conn.closed:
            return
        ssn = self._link_session(conn)
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

    # -- link-routed links ---------------------------------------------------------------

    def _forward_attach(self, effect: ForwardAttach) -> None:
        """Attach the far end of a link-routed pair: the client's termini and
        settle modes, the container-facing address as the route rewrote it."""
        far = effect.far
        conn = far.conn.handle
        near_lptr = effect.near.handle
        if conn is None or conn.closed or near_lptr is None:
            return  # going away: its connection's close ends the pair
        ssn = self._link_session(conn)
        name = effect.name.encode()
        lptr = lib.pn_receiver(ssn, name) if far.receiving else lib.pn_sender(ssn, name)
        lib.pn_terminus_copy(lib.pn_link_source(lptr), lib.pn_link_remote_source(near_lptr))
        lib.pn_terminus_copy(lib.pn_link_target(lptr), lib.pn_link_remote_target(near_lptr))
        facing = lib.pn_link_source(lptr) if far.receiving else lib.pn_link_target(lptr)
        if lib.pn_terminus_get_type(facing) != lib.PN_COORDINATOR \
                and not lib.pn_terminus_is_dynamic(facing):
            lib.pn_terminus_set_address(facing, effect.address.encode())
        lib.pn_link_set_snd_settle_mode(lptr, lib.pn_link_remote_snd_settle_mode(near_lptr))
        lib.pn_link_set_rcv_settle_mode(lptr, lib.pn_link_remote_rcv_settle_mode(near_lptr))
        far.handle = lptr
        self.links[lptr] = far
        lib.pn_link_open(lptr)
        self.dirty.add(conn)

    def _routed_answered(self, far: RoutedEnd, lptr: Any) -> None:
        """The far side answered a link-routed attach."""
        sender = bool(lib.pn_link_is_sender(lptr))
        facing = lib.pn_link_remote_target(lptr) if sender else lib.pn_link_remote_source(lptr)
        if far.receiving:
            far.may_modify = may_modify(lib.pn_link_remote_source(lptr))
        self.apply(self.router.routed_answered(
            far, facing_address(facing), null=lib.pn_terminus_get_type(facing) ==
            lib.PN_UNSPECIFIED, resumable=resumable(facing)))

    def _answer_attach(self, effect: AnswerAttach) -> None:
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
            # Credit the receiving side gave before the pair opened (7.3 step 7).
            self.forwarder.relay_flow(far if near.receiving else near)

    def _detach_routed(self, effect: DetachRouted) -> None:
        """Detach one link of a pair: what passed through it is settled first."""
        end = effect.end
        lptr = end.handle
        if lptr is None:
            return
        self.links.pop(lptr, None)
        self.forwarder.routed_gone(end)
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
        self._end_link_session(lptr)
        conn = end.conn.handle
        if conn is not None:
            self.dirty.add(conn)

    def _end_link_session(self, lptr: Any) -> None:
        ssn = lib.pn_link_session(lptr)
        if ssn in self.link_sessions:
            self.link_sessions.discard(ssn)
            if lib.pn_session_state(ssn) & lib.PN_LOCAL_ACTIVE:
                lib.pn_session_close(ssn)

    def _detach_autolink(self, autolink: AutoLink[Connection]) -> None:
        """A deleted auto-link: close its link as the router's own detach."""
        for lptr, waiting in list(self.attaching.items()):
            if waiting is autolink:
                del self.attaching[lptr]
                self._close_own(lptr)
        for lptr, link in list(self.links.items()):
            if isinstance(link, InLink | OutLink) and link.autolink is autolink:
                link.autolink = None  # gone, not failed: no retry
                del self.links[lptr]
                self._forget_link(link)
                log.info("[%r][L%d] Auto link deleted: %s", link.conn, link.link_id,
                         describe_counters(link))
                self.apply(self.router.link_detached(link, self.clock()))
                self._close_own(lptr)

    def _close_own(self, lptr: Any) -> None:
        lib.pn_link_close(lptr)
        conn = self.by_connection.get(lib.pn_session_connection(lib.pn_link_session(lptr)))
        if conn is not None:
            self.dirty.add(conn)

    def _autolink_answered(self, autolink: AutoLink[Connection], lptr: Any, now: float
                           ) -> tuple[InLink | OutLink | None, list[Effect]]:
        sender = bool(lib.pn_link_is_sender(lptr))
        terminus = lib.pn_link_remote_target(lptr) if sender else lib.pn_link_remote_source(lptr)
        name = to_str(lib.pn_link_name(lptr)) or ""
        link, effects = self.router.autolink_attached(
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

