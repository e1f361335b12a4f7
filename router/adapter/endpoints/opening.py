"""A peer's connection and sessions opening: who it is, what policy admits,
and what the router opens in return.

Owns a connection's OPEN (the peer's container id, user and inter-router
cost; the router's own OPEN with its properties; vhost policy admitting a
client before that OPEN goes out, and lowering its limits; a connector's
learned failover list; an inter-router connector's control and data
links) and a session's BEGIN (its incoming window).  It returns the core's
effects for the caller to carry out and decides nothing itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from router.adapter.connections.settings import ListenerSettings
from router.adapter.connections.state import (
    STREAMING_LINKS,
    Conn,
    OpenFrames,
    failover_server_list,
    peer_offers,
    remote_properties,
    token,
)
from router.adapter.connections.tls import TlsProfile
from router.adapter.endpoints.termini import (
    ROUTER_CONTROL,
    ROUTER_DATA,
    new_session,
    open_router_link,
    remote_condition,
    set_window,
)
from router.adapter.pn import lib, set_condition, to_str
from router.core import PRIORITIES, Effect, Role, Router
from router.core.policy import Denied, Grant, Policy

log = logging.getLogger(__name__)
policy_log = log.getChild("policy")
server_log = log.getChild("server")
#: qdrouterd's ROUTER module: what a peer router says of itself.
router_log = log.getChild("router")


def _mech(conn: Conn) -> str | None:
    """The SASL mechanism the peer chose."""
    return to_str(lib.pn_sasl_get_mech(lib.pn_sasl(conn.tptr)))


class Opening:
    """Connection and session opening.

    Args:
        router: the routing core.
        router_id: the container id the router announces.
        policy: who may connect.
        tls_profiles: the loaded sslProfiles by name (for ``uidFormat``).
        by_connection: the adapter connection of a proton connection.
        by_transport: the adapter connection of a proton transport.
        clock: monotonic clock (seconds).
    """

    def __init__(self, router: Router, router_id: str, policy: Policy,
                 tls_profiles: Mapping[str, TlsProfile], by_connection: dict[Any, Conn],
                 by_transport: dict[Any, Conn], clock: Callable[[], float]) -> None:
        self.router = router
        self.router_id = router_id
        self.container = router_id.encode()
        self.policy = policy
        self.tls_profiles = tls_profiles
        self.by_connection = by_connection
        self.by_transport = by_transport
        self.clock = clock
        #: The router's OPEN in answer to a peer's.
        self.opens = OpenFrames()

    def connection_opened(self, cptr: Any) -> list[Effect]:
        """The peer's OPEN arrived."""
        conn = self.by_connection.get(cptr)
        if conn is None:
            return []
        conn.opened = True
        conn.user = self._user_of(conn)
        core = conn.core
        core.container_id = to_str(lib.pn_connection_remote_container(cptr)) or ""
        if core.role is Role.INTER_ROUTER or core.role is Role.EDGE:
            core.streaming_links = peer_offers(conn, STREAMING_LINKS)
        if core.role is Role.INTER_ROUTER:
            # The connection's cost is the larger of both sides'
            # (docs/networks.md#inter-router-connections).
            peer_cost = remote_properties(conn).get("qd.inter-router-cost")
            if isinstance(peer_cost, int) and peer_cost > conn.cost:
                conn.cost = peer_cost
        connector = conn.connector
        if connector is not None:
            connector.failures = 0
            announced = failover_server_list(remote_properties(conn))
            if announced is not None:
                connector.failover.learn(announced)
            connector.message = (f"[C{core.conn_id}] Connection Opened: dir=out "
                                 f"host={connector.address}")
        if conn.connector is None:
            # Admitted before the OPEN goes out: policy may lower its limits.
            denied = (None if core.role is Role.INTER_ROUTER or conn.internal
                      else self._admit(conn, cptr))
            self.opens.open(conn, self.container)
            if denied is not None:
                _refuse(cptr, denied)
                return []
        elif core.role is Role.INTER_ROUTER:
            _open_router_links(conn)
        elif conn.settings.policy_vhost is not None:
            denied = self._admit_connector(conn, conn.settings.policy_vhost)
            if denied is not None:
                _refuse(cptr, denied)
                return []
        if log.isEnabledFor(logging.INFO):
            tptr = conn.tptr
            log.info("[C%d] Connection Opened: dir=%s host=%s encrypted=%s auth=%s user=%s "
                     "container_id=%s role=%s", core.conn_id,
                     "out" if conn.connector else "in", conn.peer,
                     "yes" if lib.pn_transport_is_encrypted(tptr) else "no",
                     "yes" if lib.pn_transport_is_authenticated(tptr) else "no",
                     conn.user or "anonymous", core.container_id, core.role.value)
        if core.role in (Role.INTER_ROUTER, Role.EDGE):
            version = remote_properties(conn).get("qd.annotations-version")
            if version is not None:
                router_log.debug("Remote router annotations version: %s", version)
        return self.router.connection_opened(core, self.clock())

    def _user_of(self, conn: Conn) -> str | None:
        """The peer's user: with EXTERNAL over TLS and a listener profile
        with ``uidFormat``, the one its certificate makes; else SASL's."""
        if conn.ssl is not None and conn.connector is None and _mech(conn) == "EXTERNAL":
            section = conn.settings.section
            profile = self.tls_profiles.get(section.ssl_profile) if section is not None \
                else None
            user = profile.user_of(conn.ssl) if profile is not None else None
            if user is not None:
                return user
        return to_str(lib.pn_transport_get_user(conn.tptr))

    def _admit(self, conn: Conn, cptr: Any) -> Denied | None:
        """Vhost policy for a client's OPEN, before the router's OPEN is sent:
        admitted, the group's frame size and session count go into that OPEN."""
        mech = _mech(conn)
        grant = self.policy.open(hostname=to_str(lib.pn_connection_remote_hostname(cptr)),
                                 user=conn.user, host=conn.peer.rsplit(":", 1)[0].strip("[]"),
                                 authenticated=bool(lib.pn_transport_is_authenticated(conn.tptr)
                                                    and conn.user
                                                    and mech not in (None, "ANONYMOUS")),
                                 forced_vhost=conn.settings.policy_vhost,
                                 authz=conn.authz)
        conn.grant = grant  # refused: its links are not served
        if isinstance(grant, Denied):
            policy_log.info("DENY Connection '%s' user '%s': %s", conn.peer,
                            conn.user or "anonymous", grant.reason)
            return grant
        self._granted(conn, grant)
        settings = conn.settings
        if isinstance(settings, ListenerSettings) and settings.multi_tenant:
            vhost = grant.vhost.hostname if grant.vhost is not None \
                else to_str(lib.pn_connection_remote_hostname(cptr))
            conn.core.tenant = f"{vhost}/" if vhost else None
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

    def session_opened(self, ssn: Any) -> None:
        """The peer began a session: the router begins its side with its window."""
        if not lib.pn_session_state(ssn) & lib.PN_LOCAL_UNINIT:
            return
        conn = self.by_connection.get(lib.pn_session_connection(ssn))
        if conn is not None:
            set_window(ssn, conn)
        lib.pn_session_open(ssn)

    def transport_failed(self, tptr: Any) -> None:
        """A transport reported an error: log it (and, past the group's
        maxSessions, count the refused session)."""
        conn = self.by_transport.get(tptr)
        if conn is None:
            return
        why = remote_condition(lib.pn_transport_condition(conn.tptr))
        if not conn.failure_logged:
            conn.failure_logged = True
            server_log.info("[C%d] Connection %s %s failed: %s", conn.core.conn_id,
                            "from" if conn.connector is None else "to", conn.peer, why)
        if isinstance(conn.grant, Grant) and conn.grant.group is not None \
                and "above negotiated channel_max" in why:
            # More sessions than the group's maxSessions allow.
            self.policy.session_refused(conn.grant)
            policy_log.info("[C%d] DENY session on connection '%s': beyond maxSessions %d",
                            conn.core.conn_id, conn.peer, conn.grant.group.max_sessions)


def _refuse(cptr: Any, denied: Denied) -> None:
    set_condition(lib.pn_connection_condition(cptr), denied.condition, denied.description)
    lib.pn_connection_close(cptr)


def _open_router_links(conn: Conn) -> None:
    """The connector side attaches the control links, then one data link
    pair per priority, each pair in a session of its own
    (docs/networks.md#inter-router-connections)."""
    for capability in [ROUTER_CONTROL] + [ROUTER_DATA] * PRIORITIES:
        ssn = new_session(conn)
        for sender in (True, False):
            open_router_link(ssn, f"qdlink.{token()}", sender=sender, capability=capability)


__all__ = ["Opening"]
