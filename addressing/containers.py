"""Which connection a link route or an auto-link goes to.

Owns the matching rule of docs/brokers.md#route-containers: a route-container
connection serves a ``containerId`` when the peer's container id equals it,
and a ``connection`` when the listener or connector it came through was
given that ``name`` (generated names never match).  It must not know what
a connection is beyond those two values.
"""

from __future__ import annotations

from typing import Protocol


class RouteContainer(Protocol):
    """A connection as link routes and auto-links see it."""

    @property
    def container_id(self) -> str:
        """The container id the peer sent in its OPEN."""
        ...

    @property
    def name(self) -> str | None:
        """The ``name`` of the listener or connector, when one was configured."""
        ...


def serves(peer: RouteContainer, *, container_id: str | None, connection: str | None) -> bool:
    """Whether ``peer`` is a destination for a spec naming ``container_id``
    or ``connection`` (exactly one of them, or neither: then nothing serves)."""
    if container_id is not None:
        return peer.container_id == container_id
    if connection is not None:
        return peer.name == connection
    return False
