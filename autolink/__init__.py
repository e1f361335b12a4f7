"""Auto-links as a domain of their own: their specs, their life (attaching,
active, failed, inactive, retried by deadline) as a transition table, and
which connection serves each.

What one router does with them (asking for attaches, binding the answered
links to addresses) is ``router.core.autolinks``'s, which uses this
package.  Must not import proton, lark or the router.
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
