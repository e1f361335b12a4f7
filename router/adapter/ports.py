"""What the adapter's outer parts need from the rest of it, as small protocols.

Owns the narrow views the parts that sit beside the router (management
sources, ``/metrics``, peer discovery) are given instead of the parts that
implement them, so each can be built and tested with a stand-in and none
imports the part it uses.  Nothing here has behaviour.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from router.adapter.connections import Conn, Connector, Listener
from router.adapter.settings import ConnectorSettings, ListenerSettings
from router.core import Connection
from router.management.statistics import AddressStatistics, LinkStatistics, RouterStatistics


class RouterView(Protocol):
    """A read-only view of the router's state (``/metrics``)."""

    def statistics(self) -> RouterStatistics:
        """The router-wide counts."""

    def connections(self) -> Iterable[Connection]:
        """The core's records of the open connections."""

    def links(self) -> Iterable[LinkStatistics]:
        """The statistics of every link of every open connection."""

    def addresses(self) -> Iterable[AddressStatistics]:
        """The statistics of the addresses that have seen traffic or have
        producers or consumers here."""


class ConnectorControl(Protocol):
    """Adding and removing connectors at run time (peer discovery, management)."""

    @property
    def connectors(self) -> list[Connector]: ...

    def add(self, settings: ConnectorSettings) -> Connector: ...

    def remove(self, connector: Connector) -> None: ...


class ListenerControl(Protocol):
    """Opening and closing listeners at run time (management)."""

    @property
    def listeners(self) -> Mapping[int, Listener]: ...

    def listen(self, settings: ListenerSettings) -> Listener: ...

    def close_listener(self, listener: Listener) -> None: ...


class ConnectionControl(Protocol):
    """The open connections, and closing one (management)."""

    @property
    def conns(self) -> Mapping[int, Conn]: ...

    def close_connection(self, conn: Conn, why: str) -> None: ...


__all__ = ["ConnectionControl", "ConnectorControl", "ListenerControl", "RouterView"]
