"""What ``/metrics`` needs of the router, as a small protocol.

Owns the read-only view ``router.adapter.http.metrics`` is given instead of
``router.adapter.admin.stats.RouterStats``, which implements it, so the
exposition can be built and tested with a stand-in.  Nothing here has
behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from router.core import Role
from router.management.statistics import AddressStatistics, LinkStatistics, RouterStatistics


class RouterView(Protocol):
    """A read-only view of the router's state (``/metrics``)."""

    def statistics(self) -> RouterStatistics:
        """The router-wide counts."""

    def connection_roles(self) -> Iterable[Role]:
        """The role of each open connection."""

    def links(self) -> Iterable[LinkStatistics]:
        """The statistics of every link of every open connection."""

    def addresses(self) -> Iterable[AddressStatistics]:
        """The statistics of the addresses that have seen traffic or have
        producers or consumers here."""

    def tcp_bridges(self) -> Iterable[dict[str, object]]:
        """Each TCP bridge's ``TcpBridgeStatistics`` row with its ``kind``
        (tcpListener or tcpConnector), ``name`` and ``address``."""


__all__ = ["RouterView"]
