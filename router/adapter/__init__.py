"""The proton adapter: event loop, per-message forwarding, attach handling.

Only ``router.cli`` imports this package.
"""

from router.adapter.engine import Engine, Listener
from router.adapter.settings import (
    ConnectorSettings,
    ListenerSettings,
    connector_settings,
    listener_settings,
)

__all__ = [
    "ConnectorSettings",
    "Engine",
    "Listener",
    "ListenerSettings",
    "connector_settings",
    "listener_settings",
]
