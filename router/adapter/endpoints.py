"""Attach and detach handling: reading and writing termini, asking the core.

Owns the set-up path of links, where proton's wrapper classes are fine to
use (it runs per attach, not per message).  It must not decide anything: the
core (``router.core.Router``) decides, this module applies the answer.
"""

from __future__ import annotations

import logging
from typing import Any

from proton import Data

from router.adapter.pn import NULL, lib, to_str
from router.core import (
    AttachRefused,
    BlockSender,
    Connection,
    CreditEffect,
    IncomingAccepted,
    OutgoingAccepted,
    Router,
    UnblockSender,
)

log = logging.getLogger(__name__)


def capabilities(terminus: Any) -> tuple[str, ...]:
    """The terminus capabilities as strings (a single symbol or an array)."""
    data = Data(lib.pn_terminus_capabilities(terminus))
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


def set_condition(cond: Any, name: str, description: str) -> None:
    lib.pn_condition_set_name(cond, name.encode())
    lib.pn_condition_set_description(cond, description.encode())


def attach(router: Router, conn: Connection, lptr: Any,
           ) -> tuple[IncomingAccepted | OutgoingAccepted | AttachRefused, list[CreditEffect]]:
    """Handle a remote attach: ask the core, then answer the attach on the wire."""
    name = to_str(lib.pn_link_name(lptr)) or ""
    rsource = lib.pn_link_remote_source(lptr)
    rtarget = lib.pn_link_remote_target(lptr)
    lib.pn_terminus_copy(lib.pn_link_source(lptr), rsource)
    lib.pn_terminus_copy(lib.pn_link_target(lptr), rtarget)
    lib.pn_link_set_snd_settle_mode(lptr, lib.pn_link_remote_snd_settle_mode(lptr))
    lib.pn_link_set_rcv_settle_mode(lptr, lib.pn_link_remote_rcv_settle_mode(lptr))
    effects: list[CreditEffect] = []
    decision: IncomingAccepted | OutgoingAccepted | AttachRefused
    if lib.pn_link_is_receiver(lptr):
        decision = router.incoming_link_attached(
            conn,
            name=name,
            address=to_str(lib.pn_terminus_get_address(rtarget)),
            dynamic=bool(lib.pn_terminus_is_dynamic(rtarget)),
            capabilities=capabilities(rtarget),
            coordinator=lib.pn_terminus_get_type(rtarget) == lib.PN_COORDINATOR,
            handle=lptr,
        )
        local = lib.pn_link_target(lptr)
    else:
        decision, effects = router.outgoing_link_attached(
            conn,
            name=name,
            address=to_str(lib.pn_terminus_get_address(rsource)),
            dynamic=bool(lib.pn_terminus_is_dynamic(rsource)),
            capabilities=capabilities(rsource),
            presettle=lib.pn_link_remote_snd_settle_mode(lptr) == lib.PN_SND_SETTLED,
            handle=lptr,
        )
        local = lib.pn_link_source(lptr)
    if isinstance(decision, AttachRefused):
        if decision.null_terminus:
            lib.pn_terminus_set_type(local, lib.PN_UNSPECIFIED)
        lib.pn_link_open(lptr)
        set_condition(lib.pn_link_condition(lptr), decision.condition, decision.description)
        lib.pn_link_close(lptr)
        log.info("[%r] Link attach refused: %s %s (%s)", conn, name,
                 decision.condition, decision.description)
        return decision, effects
    if decision.address is not None and lib.pn_terminus_is_dynamic(local):
        lib.pn_terminus_set_address(local, decision.address.encode())
    lib.pn_link_open(lptr)
    direction = "in" if isinstance(decision, IncomingAccepted) else "out"
    log.info("[%r][L%d] Link attached: dir=%s source=%s target=%s", conn,
             decision.link.link_id, direction,
             describe_terminus(lib.pn_link_source(lptr)),
             describe_terminus(lib.pn_link_target(lptr)))
    return decision, effects


def apply_credit_effects(effects: list[CreditEffect], block: Any, unblock: Any) -> None:
    for effect in effects:
        if isinstance(effect, UnblockSender):
            unblock(effect.link)
        elif isinstance(effect, BlockSender):
            block(effect.link)


def close_link(lptr: Any) -> None:
    """Answer a remote detach/close with our own."""
    if lib.pn_link_state(lptr) & lib.PN_LOCAL_ACTIVE:
        if lib.pn_link_state(lptr) & lib.PN_REMOTE_CLOSED:
            lib.pn_link_close(lptr)
        else:
            lib.pn_link_detach(lptr)


def remote_condition(ptr: Any) -> str:
    name = to_str(lib.pn_condition_get_name(ptr))
    if name is None:
        return ""
    desc = to_str(lib.pn_condition_get_description(ptr))
    return f"{name}: {desc}" if desc else name


__all__ = ["NULL", "apply_credit_effects", "attach", "close_link", "remote_condition"]
