"""Auto-links: specs now; the attach state machine with retry by deadline later.

Must not import proton, lark or the router.
"""

from autolink.spec import AutoLinkError, AutoLinkSpec

__all__ = ["AutoLinkError", "AutoLinkSpec"]
