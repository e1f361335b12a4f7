"""The sessions the router begins for links of its own.

Owns one session per link the router attaches itself (an auto-link, the far
end of a link-routed pair, a streaming link between routers), so that each
link's frames take no other link's session window, and ending that session
when its link goes, whichever side detached it.  An edge's uplink links
share one session instead (``router.adapter.endpoints.ownlinks``).
"""

from __future__ import annotations

from typing import Any

from router.adapter.connections.state import Conn
from router.adapter.endpoints.termini import new_session
from router.adapter.pn import lib


class Sessions:
    """The router's own one-link sessions."""

    def __init__(self) -> None:
        self.sessions: set[Any] = set()

    def begin(self, conn: Conn) -> Any:
        """A new session for one link of the router's own."""
        ssn = new_session(conn)
        self.sessions.add(ssn)
        return ssn

    def end(self, lptr: Any) -> None:
        """A link of the router's own went: its session ends with it."""
        ssn = lib.pn_link_session(lptr)
        if ssn in self.sessions:
            self.sessions.discard(ssn)
            if lib.pn_session_state(ssn) & lib.PN_LOCAL_ACTIVE:
                lib.pn_session_close(ssn)

    def lost(self, ssn: Any) -> None:
        """The peer ended ``ssn``."""
        self.sessions.discard(ssn)

    def connection_lost(self, conn: Conn) -> None:
        """The connection is gone, and its sessions with it."""
        cptr = conn.cptr
        self.sessions = {ssn for ssn in self.sessions if lib.pn_session_connection(ssn) != cptr}


__all__ = ["Sessions"]
