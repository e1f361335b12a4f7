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

from router.adapter.outcomes import Outcomes
from router.adapter.ownlinks import OwnLinks
from router.adapter.pending import Pending
from router.adapter.sending import Sender
from router.core import (
    AnswerAttach,
    AttachAutoLink,
    BlockSender,
    DetachAutoLink,
    DetachRouted,
    Effect,
    ForwardAttach,
    Router,
    SendFrame,
    UnblockSender,
)


class Effects:
    """The effect executor.

    Args:
        own: attaches and detaches the router's own links.
        sender: sends the routing protocol's frames.
        outcomes: withdraws and restores senders' credit.
    """

    def __init__(self, own: OwnLinks, sender: Sender, outcomes: Outcomes) -> None:
        self.own = own
        self.sender = sender
        self.outcomes = outcomes

    def apply(self, effects: list[Effect]) -> None:
        """Carry out ``effects`` in order (and what they lead to)."""
        for effect in effects:
            match effect:
                case SendFrame():
                    out = effect.link.control
                    if out is not None and out.handle is not None:
                        self.sender.send(out, effect.data, None)
                case UnblockSender():
                    if effect.link.handle is not None:
                        self.outcomes.unblock(effect.link)
                case BlockSender():
                    if effect.link.handle is not None:
                        self.outcomes.block(effect.link, effect.drain)
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
                case _:
                    assert_never(effect)

    def drain(self, pending: Pending) -> None:
        """Carry out the effects the routing protocol's messages left."""
        while pending.effects:
            effects = list(pending.effects)
            pending.effects.clear()
            self.apply(effects)


class CoreTimers:
    """The core's timed work (hello, link-state ages, auto-link retries) as a
    part of the loop.

    Args:
        router: the routing core.
        apply: carries out what its ``tick`` returns.
    """

    def __init__(self, router: Router, apply: Callable[[list[Effect]], None]) -> None:
        self.router = router
        self.apply = apply

    def next_due(self) -> float | None:
        return self.router.next_deadline()

    def tick(self, now: float) -> None:
        self.apply(self.router.tick(now))

    def close(self) -> None:
        """Nothing to close."""


__all__ = ["CoreTimers", "Effects"]
