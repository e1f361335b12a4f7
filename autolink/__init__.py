"""Auto-links: their specs, their life (attaching, active, failed, inactive,
retried by deadline) and which connection serves each.

Must not import proton, lark or the router.
"""

from autolink.lifecycle import (
    FIRST_RETRY_S,
    RETRY_S,
    TRANSITIONS,
    AutoLink,
    AutoLinkEvent,
    AutoLinkState,
)
from autolink.spec import AutoLinkError, AutoLinkSpec
from autolink.table import AutoLinkEntity, AutoLinkTable

__all__ = [
    "FIRST_RETRY_S",
    "RETRY_S",
    "TRANSITIONS",
    "AutoLink",
    "AutoLinkEntity",
    "AutoLinkError",
    "AutoLinkEvent",
    "AutoLinkSpec",
    "AutoLinkState",
    "AutoLinkTable",
]
