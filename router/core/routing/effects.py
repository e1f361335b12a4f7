"""What the routing protocol asks its adapter to do: frozen effect records.

Owns the effect types returned by ``RoutingProtocol`` inputs and the ``ALL``
destination.

Must not: carry behaviour beyond deriving the ``to`` address, or refer to
proton, connections or links other than by the integer link id the adapter
gave (the inter-router connection's mask bit).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal

import attrs

from router.core.routing.messages import ControlMessage, Hello, control_address
from router.core.routing.paths import Routes

__all__ = [
    "ALL",
    "Destination",
    "DuplicateRouterId",
    "Effect",
    "MobileAddressesChanged",
    "RouterAdded",
    "RouterLost",
    "RoutesChanged",
    "SendControl",
    "SendHello",
]


class _Broadcast(enum.Enum):
    ALL = "all"

    def __repr__(self) -> str:
        return "ALL"


ALL: Final = _Broadcast.ALL
"""Destination of RA and differential MAU: every router
(docs/networks.md#forwarding-control-messages)."""

Destination = str | Literal[_Broadcast.ALL]


def _freeze(neighbors: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(neighbors))


@attrs.frozen(kw_only=True, repr=False)
class SendHello:
    """Send ``message`` on the control link of inter-router connection ``link_id``."""

    link_id: int
    message: Hello

    @property
    def to(self) -> str:
        """``properties.to`` of the message: ``amqp:/_local/qdhello``."""
        return control_address(self.message.opcode, None)

    def __repr__(self) -> str:
        return f"SendHello(link={self.link_id} {self.message!r})"


@attrs.frozen(kw_only=True, repr=False)
class SendControl:
    """Send ``message`` to router ``destination`` along the next hops, or flood it (``ALL``).

    ``ALL`` covers RA (flooded, docs/networks.md#forwarding-control-messages) and
    differential MAU (multicast once); everything else is unicast toward one router id.
    """

    message: ControlMessage
    destination: Destination

    @property
    def to(self) -> str:
        """``properties.to`` of the message (docs/networks.md#control-messages)."""
        target = None if self.destination is ALL else self.destination
        return control_address(self.message.opcode, target)

    def __repr__(self) -> str:
        return f"SendControl(to={self.destination!r} {self.message!r})"


@attrs.frozen(kw_only=True, repr=False)
class RoutesChanged:
    """The routes or the set of established neighbours changed.

    Attributes:
        routes: the current routes (next hop, cost, valid origins, radius).
        neighbors: router id -> link id of every established neighbour.
    """

    routes: Routes
    neighbors: Mapping[str, int] = attrs.field(converter=_freeze, hash=False)

    def __repr__(self) -> str:
        hops = ", ".join(f"{d}>{r.next_hop}" for d, r in sorted(self.routes.routes.items()))
        nbrs = ", ".join(f"{n}@{link}" for n, link in sorted(self.neighbors.items()))
        return f"RoutesChanged(radius={self.routes.radius} hops=[{hops}] neighbors=[{nbrs}])"


@attrs.frozen(kw_only=True)
class RouterAdded:
    """A router became known: create its router address ``R<id>``."""

    id: str


@attrs.frozen(kw_only=True)
class RouterLost:
    """A router was deleted (unreachable and forgotten): drop ``R<id>``."""

    id: str


@attrs.frozen(kw_only=True, repr=False)
class MobileAddressesChanged:
    """Address keys attributed to remote router ``router_id`` changed.

    Attributes:
        router_id: the router that advertises (or advertised) the keys.
        added: newly attributed keys with their treatment hint (-1 when the
            MAU carried no usable hints).
        removed: keys no longer attributed to the router.
    """

    router_id: str
    added: tuple[tuple[str, int], ...] = ()
    removed: tuple[str, ...] = ()

    def __repr__(self) -> str:
        added = ", ".join(key for key, _ in self.added)
        return f"MobileAddressesChanged({self.router_id} +[{added}] -[{', '.join(self.removed)}])"


@attrs.frozen(kw_only=True)
class DuplicateRouterId:
    """A neighbour on ``link_id`` uses our router id with another instance."""

    id: str
    instance: int
    link_id: int | None


Effect = (
    SendHello
    | SendControl
    | RoutesChanged
    | RouterAdded
    | RouterLost
    | MobileAddressesChanged
    | DuplicateRouterId
)
