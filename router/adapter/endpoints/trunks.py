"""Links of their own for streamed messages between routers
(docs/routing.md#large-messages).

A message that streams (it was still arriving when it was routed) holds the
link it is written on until its last frame: nothing else can go on that
link meanwhile.  Between routers every message to the same next hop
shares a link (an inter-router data link, an edge connection's link), so
one large message would hold up all the others behind it.  Where the peer
router offers ``qd.streaming-links`` in its OPEN (qdrouterd's capability;
Hop offers it on inter-router and edge connections), each streamed copy
goes on a link of its own instead: an idle one kept from an earlier
stream, or a new one, attached in a session of its own so that its frames
do not take another link's session window either.  An inter-router
streaming link is a data link (capability ``qd.router-data``); on an edge
connection it is an anonymous link, and the copy carries its address in
``x-opt-qd.to``.  When the copy ends the link is kept for the next stream,
up to ``IDLE_KEPT`` per connection; further ones are closed once their
copies are settled (a part of the loop, ticked when there are some).

Owns the pool of idle streaming links per connection and which links are
streaming links; attaching them, closing idle ones beyond those kept, and
forgetting them when they or their connection go.
"""

from __future__ import annotations

from typing import Any, Final

from proton import Data, symbol

from router.adapter.endpoints.links import Links
from router.adapter.endpoints.sessions import Sessions
from router.adapter.pending import Pending
from router.adapter.pn import lib
from router.core import Connection, OutLink, Role, Router

#: Idle streaming links kept per connection for the next streamed message.
IDLE_KEPT: Final = 4
ROUTER_DATA: Final = "qd.router-data"


class Trunks:
    """Streaming links between this router and its neighbours.

    Args:
        router: the core, which makes the links' records.
        links: the link table (a streaming link is served like any other).
        sessions: the router's own one-link sessions (a streaming link's
            session ends with it, whichever side detaches it).
        pending: the wake-up's shared work.
    """

    def __init__(self, router: Router, links: Links, sessions: Sessions, pending: Pending,
                 kept: int = IDLE_KEPT) -> None:
        self.router = router
        #: Idle links kept per connection (``IDLE_KEPT``; 2 with test hooks).
        self.kept = kept
        self.links = links
        self.sessions = sessions
        self.dirty = pending.output
        #: Every streaming link now open, and the idle ones per connection.
        self.owned: set[OutLink] = set()
        self.idle: dict[Connection, list[OutLink]] = {}
        #: When to close idle links beyond those kept (None: none to close).
        self._next: float | None = None

    def wanted(self, ol: OutLink) -> bool:
        """Whether a streamed copy for ``ol`` goes on a streaming link instead:
        ``ol`` is a link to another router that takes them, and not one."""
        conn = ol.conn
        return conn.streaming_links and ol not in self.owned and ol.handle is not None \
            and (conn.role is Role.INTER_ROUTER or conn.role is Role.EDGE)

    def take(self, conn: Connection) -> OutLink | None:
        """An idle streaming link to ``conn``'s peer, or a new one (None when
        the connection is going)."""
        idle = self.idle.get(conn)
        if idle:
            return idle.pop()  # the most recently used
        handle = conn.handle
        if handle is None or handle.closed:
            return None
        link = self.router.streaming_link(conn)
        lptr = lib.pn_sender(self.sessions.begin(handle), link.name.encode())
        if conn.role is Role.INTER_ROUTER:
            for terminus in (lib.pn_link_source(lptr), lib.pn_link_target(lptr)):
                Data(lib.pn_terminus_capabilities(terminus)).put_symbol(symbol(ROUTER_DATA))
        link.handle = lptr
        self.links.add(lptr, link)
        self.owned.add(link)
        lib.pn_link_open(lptr)
        self.dirty.add(handle)
        return link

    def release(self, ol: OutLink) -> None:
        """The streamed copy on ``ol`` ended: the link waits for the next
        stream; beyond ``IDLE_KEPT`` idle ones the oldest are closed at the
        next tick, once their copies are settled."""
        if ol not in self.owned or ol.handle is None:
            return
        idle = self.idle.setdefault(ol.conn, [])
        if ol in idle:
            return
        idle.append(ol)
        if len(idle) > self.kept and self._next is None:
            self._next = 0.0

    # -- a part of the loop: closing the idle links beyond those kept ------------------

    def next_deadline(self) -> float | None:
        return self._next

    def tick(self, now: float) -> None:
        self._next = None
        for idle in list(self.idle.values()):
            excess = len(idle) - self.kept
            for ol in [link for link in idle if not link.unsettled][:max(excess, 0)]:
                self._close(ol)
            if len(idle) > self.kept:
                self._next = now + 1.0  # the rest once their outcomes are in

    def close(self) -> None:
        """The router is ending: its connections close with their links."""

    def _close(self, ol: OutLink) -> None:
        lptr: Any = ol.handle
        self.lost(ol)
        self.links.remove(lptr)  # idle: it holds nothing
        ol.conn.out_links.pop(ol.link_id, None)
        lib.pn_link_close(lptr)
        self.sessions.end(lptr)
        handle = ol.conn.handle
        if handle is not None:
            self.dirty.add(handle)

    def lost(self, ol: OutLink) -> None:
        """A streaming link went (detached, or its connection closed)."""
        self.owned.discard(ol)
        idle = self.idle.get(ol.conn)
        if idle is not None:
            if ol in idle:
                idle.remove(ol)
            if not idle:
                del self.idle[ol.conn]


__all__ = ["IDLE_KEPT", "Trunks"]
