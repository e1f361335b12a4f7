"""Edge routers under one interior router, in memory: Hop's real routing
cores (``router.core.Router``, edge and interior) on a fake clock, their
links wired the way the adapter wires them (docs/networks.md#edge-routers).

Like ``tests.sim.network`` for interiors, nothing here decides anything
the cores decide; this module only carries their effects across:

* ``AttachOwnLink``: the link the core made appears at the other end of its
  connection as a peer's attach (``incoming_link_attached`` for a link the
  core sends on, ``outgoing_link_attached`` for one it receives on); the
  answer goes back through ``own_link_answered`` (a dynamic terminus with
  the address the other end assigned);
* credit: a receiving link the core does not block gives its peer's
  sending link a window of credit; ``BlockSender`` and ``UnblockSender``
  take it away and give it back;
* ``SendOnLink``: the message arrives on the peer link, and a service
  link's messages (address tracking, heartbeats, lookups) are handed to the
  other core's ``service_received``;
* ``DetachOwnLink`` detaches the peer link; ``CloseConnection`` closes the
  connection at both ends.

What is not carried (message transfers, management requests) is counted.
Everything runs at once, in FIFO order, until no effect is left; time
moves only between ticks.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable

import attrs

from addressing import AddressTable, Role
from router.core import (
    AttachOwnLink,
    BlockSender,
    CloseConnection,
    Connection,
    ConnectionId,
    DetachOwnLink,
    Effect,
    IncomingAccepted,
    InLink,
    OutgoingAccepted,
    OutLink,
    Router,
    SendOnLink,
    UnblockSender,
)

__all__ = ["EdgeNetwork"]

#: The credit window a receiving link gives its peer (qdrouterd's default capacity).
WINDOW = 250
INTERIOR_ID = "I"

Link = InLink | OutLink


@attrs.define(eq=False)
class Side:
    """One end of an edge connection: the router holding it and its connection."""

    router: Router
    conn: Connection


class EdgeNetwork:
    """One interior router and the edge routers attached to it."""

    def __init__(self) -> None:
        self.now = 0.0
        self._draining = False
        self._ids = itertools.count(1)
        self._tokens = itertools.count(1)
        self.interior = self._router(INTERIOR_ID, interior=True)
        self.edges: dict[str, Router] = {}
        #: Each edge's client connection (its local consumers and producers).
        self.clients: dict[str, Connection] = {}
        #: Each edge's uplink: its end and the interior's end.
        self.uplinks: dict[str, tuple[Side, Side]] = {}
        #: The other end of every connection, and of every link attached across.
        self._far: dict[Connection, Side] = {}
        self._peer: dict[Link, Link] = {}
        self.queue: collections.deque[tuple[Router, Effect]] = collections.deque()
        #: Effects carried across, and those only counted, by kind.
        self.carried: collections.Counter[str] = collections.Counter()
        self.counted: collections.Counter[str] = collections.Counter()
        self.refused: list[tuple[str, str]] = []

    def _router(self, router_id: str, *, interior: bool = False) -> Router:
        token: Callable[[], str] = lambda: f"t{next(self._tokens)}"  # noqa: E731
        return Router(router_id=router_id, addresses=AddressTable(), token=token,
                      interior=interior, edge=not interior, instance=1)

    def _conn(self, role: Role, container: str) -> Connection:
        return Connection(ConnectionId(next(self._ids)), role=role, container_id=container)

    # -- building ---------------------------------------------------------------------------

    def add_edge(self, edge_id: str) -> Router:
        """Start edge ``edge_id`` and connect its uplink to the interior."""
        edge = self._router(edge_id)
        self.edges[edge_id] = edge
        self.clients[edge_id] = self._conn(Role.NORMAL, f"client.{edge_id}")
        up = Side(edge, self._conn(Role.EDGE, INTERIOR_ID))
        down = Side(self.interior, self._conn(Role.EDGE, edge_id))
        self.uplinks[edge_id] = (up, down)
        self._far[up.conn], self._far[down.conn] = down, up
        self._run(self.interior, self.interior.connection_opened(down.conn, self.now))
        self._run(edge, edge.connection_opened(up.conn, self.now))
        return edge

    def close_uplink(self, edge_id: str) -> None:
        """The uplink's connection goes, at both ends."""
        up, down = self.uplinks.pop(edge_id)
        for side in (up, down):
            self._far.pop(side.conn, None)
            links: list[Link] = [*side.conn.in_links.values(), *side.conn.out_links.values()]
            for link in links:
                self._peer.pop(link, None)
            self._run(side.router, side.router.connection_closed(side.conn, self.now))

    # -- clients on an edge ---------------------------------------------------------------

    def consumer(self, edge_id: str, address: str) -> OutLink:
        """A client receiver for ``address`` attaches on edge ``edge_id``."""
        edge = self.edges[edge_id]
        decision, effects = edge.outgoing_link_attached(
            self.clients[edge_id], name=f"rx.{address}", address=address, now=self.now)
        assert isinstance(decision, OutgoingAccepted), decision
        self._run(edge, effects)
        return decision.link

    def producer(self, edge_id: str, address: str) -> InLink:
        """A client sender to ``address`` attaches on edge ``edge_id``; its
        ``blocked`` says whether it has credit."""
        edge = self.edges[edge_id]
        decision, effects = edge.incoming_link_attached(
            self.clients[edge_id], name=f"tx.{address}", address=address, now=self.now)
        assert isinstance(decision, IncomingAccepted), decision
        self._run(edge, effects)
        return decision.link

    def detach(self, edge_id: str, link: Link) -> None:
        """A client detaches ``link`` on edge ``edge_id``."""
        edge = self.edges[edge_id]
        self._run(edge, edge.link_detached(link, self.now))

    # -- time ---------------------------------------------------------------------------

    def run(self, seconds: float, *, step_s: float = 0.5,
            silent: Iterable[str] = ()) -> None:
        """Advance the clock, ticking every router each ``step_s`` (edges in
        ``silent`` are not ticked: their heartbeats stop)."""
        quiet = set(silent)
        end = self.now + seconds
        while self.now < end:
            self.now = min(end, self.now + step_s)
            self._run(self.interior, self.interior.tick(self.now))
            for edge_id, edge in self.edges.items():
                if edge_id not in quiet:
                    self._run(edge, edge.tick(self.now))

    # -- carrying effects across -------------------------------------------------------------

    def _run(self, router: Router, effects: Iterable[Effect]) -> None:
        queue = self.queue
        queue.extend((router, effect) for effect in effects)
        if self._draining:
            return
        self._draining = True
        try:
            while queue:
                source, effect = queue.popleft()
                self._carry(source, effect)
        finally:
            self._draining = False

    def _carry(self, router: Router, effect: Effect) -> None:
        kind = type(effect).__name__
        if isinstance(effect, AttachOwnLink):
            self.carried[kind] += 1
            self._attach(router, effect)
        elif isinstance(effect, SendOnLink):
            self._send(effect)
        elif isinstance(effect, UnblockSender | BlockSender):
            self.carried[kind] += 1
            far = self._peer.get(effect.link)
            if isinstance(far, OutLink):
                far.credit = WINDOW if isinstance(effect, UnblockSender) else 0
        elif isinstance(effect, DetachOwnLink):
            self.carried[kind] += 1
            far = self._peer.pop(effect.link, None)
            if far is not None:
                self._peer.pop(far, None)
                side = self._far.get(effect.link.conn)
                if side is not None:
                    self.queue.extend((side.router, e)
                                      for e in side.router.link_detached(far, self.now))
        elif isinstance(effect, CloseConnection):
            self.carried[kind] += 1
            for edge_id, (up, down) in list(self.uplinks.items()):
                if effect.conn in (up.conn, down.conn):
                    self.close_uplink(edge_id)
        else:
            self.counted[kind] += 1

    def _attach(self, router: Router, effect: AttachOwnLink) -> None:
        link = effect.link
        far_side = self._far.get(link.conn)
        if far_side is None:
            return
        far_router, far_conn = far_side.router, far_side.conn
        answer: str | None
        if isinstance(link, OutLink):
            decision, effects = far_router.incoming_link_attached(
                far_conn, name=link.name, address=effect.target,
                capabilities=effect.capabilities, now=self.now)
            if not isinstance(decision, IncomingAccepted):
                self.refused.append((link.name, decision.condition))
                return
            far: Link = decision.link
            answer = effect.target
            if not decision.link.blocked:
                link.credit = WINDOW
        else:
            decision2, effects = far_router.outgoing_link_attached(
                far_conn, name=link.name, address=effect.source, dynamic=effect.dynamic,
                capabilities=effect.capabilities, now=self.now)
            if not isinstance(decision2, OutgoingAccepted):
                self.refused.append((link.name, decision2.condition))
                return
            far = decision2.link
            far.credit = WINDOW
            answer = decision2.address
        self._peer[link], self._peer[far] = far, link
        self.queue.extend((far_router, e) for e in effects)
        self.queue.extend((router, e) for e in router.own_link_answered(link, answer))

    def _send(self, effect: SendOnLink) -> None:
        far = self._peer.get(effect.link)
        if not isinstance(far, InLink):
            self.counted["SendOnLink (no peer)"] += 1
            return
        if not far.control:
            self.counted["SendOnLink (routed)"] += 1
            return
        side = self._far[effect.link.conn]
        self.carried["SendOnLink to " + ("interior" if side.router is self.interior
                                         else "edge")] += 1
        _, effects = side.router.service_received(far, effect.data, self.now)
        self.queue.extend((side.router, e) for e in effects)
