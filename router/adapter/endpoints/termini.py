"""Attach and detach handling: reading and writing termini, asking the core.

Owns the set-up path of links, where proton's wrapper classes are fine to
use (it runs per attach, not per message).  It must not decide anything: the
core (``router.core.Router``) decides, this module applies the answer.
"""

from __future__ import annotations

import logging
from typing import Any

import attrs
from proton import Data, symbol

from router.adapter.connections.state import Conn
from router.adapter.pn import NULL, lib, set_condition, to_str
from router.core import (
    AttachRefused,
    Connection,
    Effect,
    IncomingAccepted,
    InLink,
    OutgoingAccepted,
    OutLink,
    Role,
    RoutedEnd,
    Router,
)
from router.core.policy import Grant
from router.core.router import NO_ROUTE

log = logging.getLogger(__name__)

COORDINATOR = "$coordinator"
_UNLIMITED_SESSION_FRAMES = 2**31 // 65536


def set_window(ssn: Any, conn: Conn) -> None:
    """A session's incoming window, in bytes (AMQP 1.0 section 2.5.6).
    Unset, proton's default window is small enough to stall a fast sender
    for a round trip every few dozen messages; qdrouterd's default is an
    unlimited window, bounded in practice by link credit."""
    s = conn.settings
    grant = conn.grant
    if isinstance(grant, Grant) and grant.group is not None \
            and grant.group.max_session_window is not None:
        # The vhost group's window (qdrouterd's maxSessionWindow, in bytes).
        lib.pn_session_set_incoming_capacity(ssn, grant.group.max_session_window)
        return
    frames = s.max_session_frames or _UNLIMITED_SESSION_FRAMES
    lib.pn_session_set_incoming_capacity(ssn, s.max_frame_size * frames)


def new_session(conn: Conn) -> Any:
    """Begin a session of the router's own on ``conn``."""
    ssn = lib.pn_session(conn.cptr)
    set_window(ssn, conn)
    lib.pn_session_open(ssn)
    return ssn


def capabilities(terminus: Any) -> tuple[str, ...]:
    """The terminus capabilities as strings (a single symbol or an array)."""
    return _symbols(lib.pn_terminus_capabilities(terminus))


MODIFIED_OUTCOME = "amqp:modified:list"


def may_modify(source: Any) -> bool:
    """Whether a sender whose source is ``source`` takes the MODIFIED outcome.

    A source that lists its outcomes limits the receiver to them (AMQP 1.0
    3.5.3); RabbitMQ 3.10 lists accepted, rejected and released, and ends
    the session on a MODIFIED disposition.  An empty list is taken as "any".
    """
    outcomes = _symbols(lib.pn_terminus_outcomes(source))
    return not outcomes or MODIFIED_OUTCOME in outcomes


def _symbols(ptr: Any) -> tuple[str, ...]:
    data = Data(ptr)
    data.rewind()
    caps: list[str] = []
    while data.next():
        value = data.get_object()
        if isinstance(value, str):
            caps.append(str(value))
        elif isinstance(value, (list, tuple)) or hasattr(value, "elements"):
            elements = getattr(value, "elements", value)
            caps.extend(str(v) for v in elements if isinstance(v, str))
    return tuple(caps)


def describe_terminus(terminus: Any) -> str:
    address = to_str(lib.pn_terminus_get_address(terminus))
    dynamic = " dynamic" if lib.pn_terminus_is_dynamic(terminus) else ""
    return "{" + (address or "") + dynamic + "}"


FORBIDDEN = AttachRefused(condition="qd:forbidden",
                          description="Connectivity to the node is forbidden")
CONNECTION_ROLE = AttachRefused(condition="qd:connection-role",
                                description="Link attach forbidden on inter-router connection")
ROUTER_CONTROL = "qd.router"
ROUTER_DATA = "qd.router-data"


@attrs.frozen(kw_only=True)
class RouterLinkAccepted:
    """An inter-router control or data link was bound."""

    link: InLink | OutLink


@attrs.frozen(kw_only=True)
class RoutedAccepted:
    """The attach is link-routed: ``link`` is its near end, answered when the
    far side answers."""

    link: RoutedEnd


Decision = (IncomingAccepted | OutgoingAccepted | RouterLinkAccepted | RoutedAccepted
            | AttachRefused)


def resumable(terminus: Any) -> bool:
    """A terminus that outlives its connection (docs/brokers.md#resumable-termini)."""
    return bool(lib.pn_terminus_get_expiry_policy(terminus) == lib.PN_EXPIRE_NEVER
                or lib.pn_terminus_get_timeout(terminus) > 0)


LINK_ROUTE_PROPERTY = "x-opt-qd.address"


def dynamic_route_address(terminus: Any) -> str | None:
    """The address a dynamic terminus asks to be link-routed by: the first
    entry of its dynamic-node-properties, when that is ``x-opt-qd.address``
    with a non-empty string (docs/routing.md#dynamic-addresses)."""
    if not lib.pn_terminus_is_dynamic(terminus):
        return None
    data = Data(lib.pn_terminus_properties(terminus))
    data.rewind()
    if not data.next():
        return None
    properties = data.get_object()
    if not isinstance(properties, dict) or not properties:
        return None
    key, value = next(iter(properties.items()))
    if str(key) == LINK_ROUTE_PROPERTY and isinstance(value, str) and value:
        return value
    return None


def set_dynamic_route_address(terminus: Any, address: str) -> None:
    """Make a dynamic terminus ask to be link-routed by ``address`` (the
    routed form of the client's, in its vhost's namespace on a multi-tenant
    listener), keeping its other dynamic-node-properties."""
    data = Data(lib.pn_terminus_properties(terminus))
    data.rewind()
    properties = data.get_object() if data.next() else None
    if not isinstance(properties, dict):
        return
    properties = {**properties, symbol(LINK_ROUTE_PROPERTY): address}
    data.clear()
    data.put_object(properties)


def facing_address(terminus: Any) -> str | None:
    """The address a link route matches: a coordinator's is ``$coordinator``."""
    if lib.pn_terminus_get_type(terminus) == lib.PN_COORDINATOR:
        return COORDINATOR
    return to_str(lib.pn_terminus_get_address(terminus))


def _refuse(conn: Connection, lptr: Any, name: str, decision: AttachRefused, local: Any) -> None:
    if decision.null_terminus:
        lib.pn_terminus_set_type(local, lib.PN_UNSPECIFIED)
    lib.pn_link_open(lptr)
    set_condition(lib.pn_link_condition(lptr), decision.condition, decision.description)
    lib.pn_link_close(lptr)
    log.info("[%r] Link attach refused: %s %s (%s)", conn, name,
             decision.condition, decision.description)


def refuse_link(lptr: Any, condition: str, description: str) -> None:
    """Answer a peer's attach with an attach and a detach carrying ``condition``
    (the terminus echoed, so the peer sees which link it was)."""
    lib.pn_link_open(lptr)
    set_condition(lib.pn_link_condition(lptr), condition, description)
    lib.pn_link_close(lptr)


def router_link(router: Router, conn: Connection, lptr: Any, caps: tuple[str, ...], *,
                cost: int, now: float) -> tuple[InLink | OutLink, list[Effect]]:
    """Bind an inter-router link (ours or the peer's) in the core."""
    name = to_str(lib.pn_link_name(lptr)) or ""
    outgoing = bool(lib.pn_link_is_sender(lptr))
    network = router.network
    assert network is not None, "inter-router links are an interior router's"
    if ROUTER_CONTROL in caps:
        return network.control_link_attached(conn, outgoing=outgoing, name=name, handle=lptr,
                                             cost=cost, now=now)
    link = network.data_link_attached(conn, outgoing=outgoing, name=name, handle=lptr, cost=cost)
    return link, []


def attach(router: Router, conn: Connection, lptr: Any, *, cost: int = 1, now: float = 0.0,
           ) -> tuple[Decision, list[Effect]]:
    """Handle a remote attach: ask the core, then answer the attach on the wire."""
    name = to_str(lib.pn_link_name(lptr)) or ""
    rsource = lib.pn_link_remote_source(lptr)
    rtarget = lib.pn_link_remote_target(lptr)
    lib.pn_terminus_copy(lib.pn_link_source(lptr), rsource)
    lib.pn_terminus_copy(lib.pn_link_target(lptr), rtarget)
    lib.pn_link_set_snd_settle_mode(lptr, lib.pn_link_remote_snd_settle_mode(lptr))
    lib.pn_link_set_rcv_settle_mode(lptr, lib.pn_link_remote_rcv_settle_mode(lptr))
    receiver = bool(lib.pn_link_is_receiver(lptr))
    local = lib.pn_link_target(lptr) if receiver else lib.pn_link_source(lptr)
    caps = capabilities(rtarget if receiver else rsource)
    effects: list[Effect] = []
    decision: Decision
    if ROUTER_CONTROL in caps or ROUTER_DATA in caps:
        # Router links only on inter-router connections (docs/routing.md#attaching-links).
        if conn.role is not Role.INTER_ROUTER or router.network is None:
            _refuse(conn, lptr, name, FORBIDDEN, local)
            return FORBIDDEN, []
        link, effects = router_link(router, conn, lptr, caps, cost=cost, now=now)
        lib.pn_link_open(lptr)
        log.info("[%r][L%d] Router link attached: %s %s", conn, link.link_id,
                 "out" if isinstance(link, OutLink) else "in", caps)
        return RouterLinkAccepted(link=link), effects
    # Link routes come before message routing, and are allowed on an
    # inter-router connection before its control link
    # (docs/brokers.md#where-a-routed-attach-goes).
    facing = rtarget if receiver else rsource
    dynamic_address = dynamic_route_address(facing)
    address = dynamic_address or facing_address(facing)
    if address:
        end, effects = router.link_routed_attach(conn, name=name, address=address,
                                                 receiving=receiver,
                                                 resumable=resumable(facing), handle=lptr,
                                                 required=dynamic_address is not None)
        if isinstance(end, AttachRefused):
            _refuse(conn, lptr, name, end, local)
            return end, []
        if end is not None:
            if receiver:
                end.may_modify = may_modify(rsource)
            log.info("[%r][L%d] Link-routed attach: dir=%s address=%s", conn, end.link_id,
                     "in" if receiver else "out", address)
            return RoutedAccepted(link=end), effects
    if conn.role is Role.INTER_ROUTER:
        # Another router attaches a link of a client's only when a link route
        # sends it here; one that no link route serves (the route went away
        # while the attach crossed the network) is refused, never bound as a
        # consumer or producer on the inter-router connection
        # (docs/brokers.md#where-a-routed-attach-goes).
        rlink = router.network.link_of(conn) if router.network is not None else None
        refusal = CONNECTION_ROLE if rlink is None or rlink.control is None else NO_ROUTE
        _refuse(conn, lptr, name, refusal, local)
        return refusal, []
    if receiver:
        decision, effects = router.incoming_link_attached(
            conn,
            name=name,
            address=to_str(lib.pn_terminus_get_address(rtarget)),
            dynamic=bool(lib.pn_terminus_is_dynamic(rtarget)),
            capabilities=caps,
            coordinator=lib.pn_terminus_get_type(rtarget) == lib.PN_COORDINATOR,
            handle=lptr,
            now=now,
        )
    else:
        decision, effects = router.outgoing_link_attached(
            conn,
            name=name,
            address=to_str(lib.pn_terminus_get_address(rsource)),
            dynamic=bool(lib.pn_terminus_is_dynamic(rsource)),
            capabilities=caps,
            presettle=lib.pn_link_remote_snd_settle_mode(lptr) == lib.PN_SND_SETTLED,
            handle=lptr,
            now=now,
        )
    if isinstance(decision, AttachRefused):
        _refuse(conn, lptr, name, decision, local)
        return decision, effects
    if isinstance(decision, IncomingAccepted):
        decision.link.may_modify = may_modify(rsource)
    if decision.address is not None and lib.pn_terminus_is_dynamic(local):
        lib.pn_terminus_set_address(local, decision.address.encode())
    lib.pn_link_open(lptr)
    direction = "in" if isinstance(decision, IncomingAccepted) else "out"
    if log.isEnabledFor(logging.INFO):
        log.info("[%r][L%d] Link attached: dir=%s source=%s target=%s", conn,
                 decision.link.link_id, direction,
                 describe_terminus(lib.pn_link_source(lptr)),
                 describe_terminus(lib.pn_link_target(lptr)))
    return decision, effects


def open_router_link(ssn: Any, name: str, *, sender: bool, capability: str) -> Any:
    """Create and open one of our inter-router links: both termini empty but
    for the single capability symbol (docs/networks.md#inter-router-connections)."""
    lptr = lib.pn_sender(ssn, name.encode()) if sender else lib.pn_receiver(ssn, name.encode())
    for terminus in (lib.pn_link_source(lptr), lib.pn_link_target(lptr)):
        Data(lib.pn_terminus_capabilities(terminus)).put_symbol(symbol(capability))
    lib.pn_link_open(lptr)
    return lptr


def close_link(lptr: Any) -> None:
    """Answer a remote detach/close with our own (and the attach first, for a
    link the router had not answered yet)."""
    state = lib.pn_link_state(lptr)
    if state & lib.PN_LOCAL_UNINIT:
        lib.pn_link_open(lptr)
        state = lib.pn_link_state(lptr)
    if state & lib.PN_LOCAL_ACTIVE:
        if state & lib.PN_REMOTE_CLOSED:
            lib.pn_link_close(lptr)
        else:
            lib.pn_link_detach(lptr)


def remote_condition(ptr: Any) -> str:
    name = to_str(lib.pn_condition_get_name(ptr))
    if name is None:
        return ""
    desc = to_str(lib.pn_condition_get_description(ptr))
    return f"{name}: {desc}" if desc else name


__all__ = [
    "NULL",
    "Decision",
    "RoutedAccepted",
    "RouterLinkAccepted",
    "attach",
    "close_link",
    "dynamic_route_address",
    "facing_address",
    "may_modify",
    "new_session",
    "open_router_link",
    "refuse_link",
    "remote_condition",
    "resumable",
    "router_link",
    "set_dynamic_route_address",
    "set_window",
]
