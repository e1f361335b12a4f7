"""Carrying out the core's effects.

Owns the one place where every kind of ``router.core.Effect`` is turned
into proton calls: matched exhaustively (``typing.assert_never``), so a new
effect type fails the type check here until it is handled.  Effects that
lead the core to answer with more effects (an auto-link deleted) are
carried out in turn.  It decides nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import assert_never

from router.adapter.endpoints.ownlinks import OwnLinks
from router.adapter.forwarding.forwarder import Forwarder
from router.adapter.pending import Pending
from router.core import (
    AnswerAttach,
    AttachAutoLink,
    AttachOwnLink,
    BlockSender,
    CloseConnection,
    Connection,
    DetachAutoLink,
    DetachOwnLink,
    DetachRouted,
    Effect,
    ForwardAttach,
    LookupAnswered,
    RouteMessage,
    SendFrame,
    SendOnLink,
    UnblockSender,
)


class Effects:
    """The effect executor.

    Args:
        own: attaches and detaches the router's own links.
        forwarder: sends the routing protocol's frames and the router's own
            messages, withdraws and restores senders' credit.
        close: closes a connection from this side, saying why.
        resume: goes on with a client attach an edge's lookup held.
    """

    def __init__(self, own: OwnLinks, forwarder: Forwarder,
                 close: Callable[[Connection, str], None],
                 resume: Callable[[LookupAnswered], list[Effect]]) -> None:
        self.own = own
        self.forwarder = forwarder
        self.close = close
        self.resume = resume

    def apply(self, effects: list[Effect]) -> None:
        """Carry out ``effects`` in order (and what they lead to)."""
        for effect in effects:
            match effect:
                case SendFrame():
                    out = effect.link.control
                    if out is not None and out.handle is not None:
                        self.forwarder.send_own(out, effect.data)
                case UnblockSender():
                    if effect.link.handle is not None:
                        self.forwarder.unblock(effect.link)
                case BlockSender():
                    if effect.link.handle is not None:
                        self.forwarder.block(effect.link, effect.drain)
                case AttachAutoLink():
                    self.own.attach_autolink(effect)
                case DetachAutoLink():
                    self.apply(self.own.detach_autolink(effect.autolink))
                case ForwardAttach():
                    self.own.forward_attach(effect)
                case AnswerAttach():
                    self.own.answer_attach(effect)
                case DetachRouted():
                    self.own.detach_routed(effect)
                case AttachOwnLink():
                    self.own.attach_own(effect)
                case DetachOwnLink():
                    self.own.detach_own(effect.link)
                case SendOnLink():
                    if effect.link.handle is not None and (
                            effect.settled or not self.own.send_unsettled(effect.link,
                                                                          effect.data)):
                        self.forwarder.send_own(effect.link, effect.data)
                case RouteMessage():
                    self.forwarder.route_own(effect.data)
                case CloseConnection():
                    self.close(effect.conn, effect.description)
                case LookupAnswered():
                    self.apply(self.resume(effect))
                case _:
                    assert_never(effect)

    def drain(self, pending: Pending) -> None:
        """Carry out the effects the routing protocol's messages left."""
        while pending.effects:
            effects = list(pending.effects)
            pending.effects.clear()
            self.apply(effects)


__all__ = ["Effects"]
