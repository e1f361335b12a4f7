"""What the parts beside the connections need of them, as small protocols.

Owns the narrow views that peer discovery, the sslProfiles and management
are given instead of the parts that implement them
(``router.adapter.connections.connectors.Connectors``, ``listeners.Listeners``,
``transports.Transports``), so each can be built and tested with a stand-in
and none imports the part it uses.  Nothing here has behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from router.adapter.connections.settings import ConnectorSettings, ListenerSettings
from router.adapter.connections.state import Conn, Connector, Listener


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

    def listed(self) -> list[Conn]:
        """The connections management shows."""

    def close_connection(self, conn: Conn, why: str) -> None: ...


__all__ = ["ConnectionControl", "ConnectorControl", "ListenerControl"]
