"""Identifier types shared by the core and the adapter."""

from typing import NewType

ConnectionId = NewType("ConnectionId", int)
LinkId = NewType("LinkId", int)
RouterId = NewType("RouterId", str)

__all__ = ["ConnectionId", "LinkId", "RouterId"]
