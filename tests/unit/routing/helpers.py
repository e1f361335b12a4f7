"""Shared helpers for the routing protocol unit tests (a fake clock is just ``now``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from router.core.routing import (
    Effect,
    Hello,
    LinkState,
    LinkStateUpdate,
    RouterAdvertisement,
    RoutingProtocol,
    SendControl,
    SendHello,
)

T = TypeVar("T")


def of(effects: Iterable[object], kind: type[T]) -> list[T]:
    """The effects of one type, in order."""
    return [effect for effect in effects if isinstance(effect, kind)]


def sent(effects: Iterable[Effect], opcode: str) -> list[SendControl]:
    """The SendControl effects carrying ``opcode``."""
    return [e for e in of(effects, SendControl) if e.message.opcode.value == opcode]


def advertisements(effects: Iterable[Effect]) -> list[RouterAdvertisement]:
    """The RAs sent, in order."""
    return [e.message for e in of(effects, SendControl)
            if isinstance(e.message, RouterAdvertisement)]


def hellos(effects: Iterable[Effect]) -> list[SendHello]:
    return of(effects, SendHello)


def establish(p: RoutingProtocol, peer: str = "B", *, link: int = 1, cost: int = 1,
              now: float = 0.0, instance: int = 200) -> list[Effect]:
    """Connect ``link`` and receive a HELLO from ``peer`` that lists ``p``."""
    effects = p.neighbor_connected(link, cost, now)
    effects += p.control_received(Hello(id=peer, instance=instance, seen=[p.router_id]), link, now)
    return effects


def ra(router_id: str, *, ls_seq: int = 1, mobile_seq: int = 0, instance: int = 300,
       pv: int = 1) -> RouterAdvertisement:
    return RouterAdvertisement(id=router_id, instance=instance, ls_seq=ls_seq,
                               mobile_seq=mobile_seq, pv=pv)


def lsu(router_id: str, peers: dict[str, int], *, ls_seq: int = 1,
        instance: int = 300) -> LinkStateUpdate:
    return LinkStateUpdate(id=router_id, instance=instance, ls_seq=ls_seq,
                           ls=LinkState(id=router_id, ls_seq=ls_seq, peers=peers))


def ticks(p: RoutingProtocol, start: float, stop: float) -> list[Effect]:
    """Tick once a second from ``start`` up to and including ``stop``."""
    effects: list[Effect] = []
    now = start
    while now <= stop:
        effects += p.tick(now)
        now += 1.0
    return effects
