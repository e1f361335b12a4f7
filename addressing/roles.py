"""Connection roles: what the peer at the other end of a connection is.

The one declaration of the roles and their names: the configuration types a
listener's or connector's ``role`` with it, and the routing core treats each
connection by it (inter-router links, route containers serving link routes
and auto-links, edge uplinks).  It must not know anything else about
connections.
"""

from __future__ import annotations

import enum

__all__ = ["Role"]


class Role(enum.Enum):
    """Role of the connections a listener accepts or a connector makes, by
    qdrouterd's names."""

    NORMAL = "normal"
    INTER_ROUTER = "inter-router"
    ROUTE_CONTAINER = "route-container"
    EDGE = "edge"
