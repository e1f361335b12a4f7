"""The proton adapter: the event loop and its parts, per-message forwarding,
attach handling, management and metrics endpoints.

Only ``router.cli`` and the composition root (``router.assembly``) import
this package; ``docs/architecture.md#the-adapter`` maps its modules.
"""

from router.adapter.connections import Conn, Connector, Listener
from router.adapter.engine import Engine
from router.adapter.settings import (
    ConnectorSettings,
    ListenerSettings,
    SaslError,
    connector_settings,
    listener_settings,
    vhost_from_section,
)

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
