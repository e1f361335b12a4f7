"""The proton adapter: the event loop and its parts, per-message forwarding,
attach handling, management and metrics endpoints.

Only ``router.cli`` and the composition root (``router.assembly``) import
this package; ``docs/architecture.md#the-adapter`` maps its modules.
"""

from router.adapter.connections.settings import (
    ConnectorSettings,
    ListenerSettings,
    SaslError,
    connector_settings,
    listener_settings,
    vhost_from_section,
)
from router.adapter.connections.state import Conn, Connector, Listener
from router.adapter.engine import Engine

__all__ = [
    "Conn",
    "Connector",
    "ConnectorSettings",
    "Engine",
    "Listener",
    "ListenerSettings",
    "SaslError",
    "connector_settings",
    "listener_settings",
    "vhost_from_section",
]
