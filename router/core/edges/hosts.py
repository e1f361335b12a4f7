"""An interior router's side of the edge routers attached to it
(docs/networks.md#edge-routers).

Owns binding an edge's downlink to the edge's ``H<edge-id>`` key, the
tracking answers each edge gets (whether each address it produces to has a
destination that is not on that edge), the heartbeats it expects, and the
link-route lookups edges ask for.  The edge's side is
``router.core.edges.uplink``.  Pure: no clock, no sockets; it returns
effects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from addressing import Direction
from router.core.amqp import (
    APPLICATION_PROPERTIES,
    COMPACT,
    HEADER,
    PROPERTIES,
    VALUE,
    PeerProtocolError,
    UInt,
    encode_section,
    split_sections,
)
from router.core.destinations import senders_changed
from router.core.edges.wire import (
    EDGE_DOWNLINK,
    HEARTBEAT_ADDRESS,
    HEARTBEAT_INTERVAL_S,
    HEARTBEAT_TIMEOUT_S,
    LOOKUP_ADDRESS,
    LOOKUP_LINK_ROUTE,
    LOOKUP_NOT_FOUND,
    LOOKUP_OK,
    LOOKUP_VERSION,
    TRACKING_ADDRESS,
    encode_tracking,
    mobile,
)
from router.core.effects import (
    CloseConnection,
    Effect,
    RouteMessage,
    SendOnLink,
)
from router.core.ids import LinkId
from router.core.network import HINTS, Network
from router.core.records import AddressRecord, Connection, InLink, OutLink, UplinkTarget

log = logging.getLogger(__name__)



class EdgePeer:
    """An interior router's state of one edge router's connection."""

    __slots__ = ("conn", "downlink", "heartbeat", "last_beat", "lookup", "tracking")

    def __init__(self, conn: Connection, now: float) -> None:
        self.conn = conn
        self.downlink: OutLink | None = None
        self.tracking: OutLink | None = None
        self.heartbeat: InLink | None = None
        self.lookup: InLink | None = None
        self.last_beat = now

    def tracked(self, sender: InLink) -> SendOnLink | None:
        """The tracking answer for ``sender``, an edge's producer link whose
        address's destinations may have changed, when it differs from the
        last one: whether the address has a destination beyond the edge.  A
        fallback destination does not count (as in qdrouterd): the edge uses
        its own fallback, or sends up when the address is reachable."""
        tracking = self.tracking
        record = sender.record
        if tracking is None or record is None or not mobile(record):
            return None
        reachable = record.reaches_beyond(sender.conn)
        if reachable is sender.tracked_reachable:
            return None
        sender.tracked_reachable = reachable
        return SendOnLink(link=tracking, data=encode_tracking(record.key, reachable))


LinkRouteLookup = Callable[[str, Direction], tuple[bool, bool]]


class EdgeHosts:
    """An interior router's side of its edge routers.

    Args:
        records: the router's address records.
        link_id: allocates link ids.
        downlink_record: finds or creates the ``H<edge-id>`` record.
        link_route: whether an address in a direction is link-routed here,
            and whether that link route has destinations.
    """

    def __init__(self, *, link_id: Callable[[], LinkId],
                 downlink_record: Callable[[str], AddressRecord],
                 link_route: LinkRouteLookup, network: Network | None) -> None:
        self._link_id = link_id
        self._downlink_record = downlink_record
        self._link_route = link_route
        self._network = network
        self.peers: dict[Connection, EdgePeer] = {}
        self.next_check: float | None = None
        #: Counters: link-route lookups answered.
        self.lookups = 0

    def attach(self, conn: Connection, *, outgoing: bool, name: str, address: str | None,
               capabilities: tuple[str, ...], handle: object,
               now: float) -> tuple[InLink | OutLink | None, list[Effect]]:
        """An edge router's own links on its connection to this interior: its
        downlink, address tracking, heartbeats and lookups.  None: a link
        like any client's."""
        peer = conn.edge
        if peer is None:
            return None, []
        if outgoing and EDGE_DOWNLINK in capabilities and address:
            record, link = self.downlink(peer, edge_id=address, name=name, handle=handle)
            return link, self._downlink_bound(record, link, now)
        if outgoing and address == TRACKING_ADDRESS:
            return self.tracking_attached(peer, name=name, handle=handle)
        if not outgoing and address in (HEARTBEAT_ADDRESS, LOOKUP_ADDRESS):
            return self.service_attached(peer, address, name=name, handle=handle), []
        return None, []

    def _downlink_bound(self, record: AddressRecord, link: OutLink, now: float) -> list[Effect]:
        """An edge's downlink is the way to its ``H<edge-id>`` record: a
        destination beyond this router, as a remote router is (messages to it
        take the network's path, which addresses them for the edge), and
        advertised to the other interiors."""
        target = UplinkTarget(link)
        record.remotes.insert(0, target)
        record.closest_remotes.insert(0, target)
        effects: list[Effect] = []
        if self._network is not None:
            effects.extend(self._network.address_added(record.key, HINTS[record.distribution],
                                                       now))
        effects.extend(senders_changed(record))
        return effects

    def downlink_gone(self, link: OutLink, now: float) -> list[Effect]:
        """An edge's link went: if it was its downlink, the edge's record
        loses that way to it (and other interiors hear when it was the last)."""
        record = link.record
        if record is None:
            return []
        kept = [t for t in record.remotes if not (type(t) is UplinkTarget and t.link is link)]
        if len(kept) == len(record.remotes):
            return []
        record.remotes = kept
        record.closest_remotes = [t for t in record.closest_remotes if t in kept]
        effects: list[Effect] = []
        if self._network is not None and not any(type(t) is UplinkTarget for t in kept):
            effects.extend(self._network.address_removed(record.key, now))
        effects.extend(senders_changed(record))
        return effects

    def opened(self, conn: Connection, now: float) -> None:
        """An edge router connected."""
        peer = EdgePeer(conn, now)
        self.peers[conn] = peer
        conn.edge = peer
        if self.next_check is None:
            self.next_check = now + HEARTBEAT_INTERVAL_S
        log.info("[C%d] Edge router %s attached", conn.conn_id, conn.container_id)

    def watch(self, conn: Connection, now: float) -> EdgePeer:
        """A connection that is not an edge router's attached a heartbeat
        sender, as qdrouterd lets any client do: it is watched as an edge's
        is, and closed when its heartbeats stop."""
        peer = self.peers.get(conn)
        if peer is None:
            peer = self.peers[conn] = EdgePeer(conn, now)
            if self.next_check is None:
                self.next_check = now + HEARTBEAT_INTERVAL_S
        return peer

    def closed(self, conn: Connection) -> None:
        """A connection went: an edge router's, or one that was watched."""
        peer = self.peers.pop(conn, None)
        if peer is not None and conn.edge is peer:
            log.info("[C%d] Edge router %s detached", conn.conn_id, conn.container_id)
        conn.edge = None

    # -- the edge's own links ------------------------------------------------------------

    def downlink(self, peer: EdgePeer, *, edge_id: str, name: str,
                 handle: object) -> tuple[AddressRecord, OutLink]:
        """The edge attached its downlink: bound to ``H<edge-id>``; the
        caller adds it as the record's consumer."""
        record = self._downlink_record(edge_id)
        link = OutLink(self._link_id(), peer.conn, name=name, address=f"_edge/{edge_id}",
                       record=record, handle=handle)
        link.prepared = True  # annotated for the edge by the forwarder
        peer.conn.out_links[link.link_id] = link
        peer.downlink = link
        return record, link

    def tracking_attached(self, peer: EdgePeer, *, name: str, handle: object) -> tuple[
            OutLink, list[Effect]]:
        """The edge attached its address-tracking receiver: it gets the
        current answer for each of its producer links at once."""
        link = OutLink(self._link_id(), peer.conn, name=name, address=TRACKING_ADDRESS,
                       record=None, presettle=True, handle=handle)
        link.prepared = True
        peer.conn.out_links[link.link_id] = link
        peer.tracking = link
        effects: list[Effect] = []
        for sender in peer.conn.in_links.values():
            sender.tracked_reachable = False  # a new tracking link knows nothing yet
            answer = peer.tracked(sender)
            if answer is not None:
                effects.append(answer)
        return link, effects

    def service_attached(self, peer: EdgePeer, address: str, *, name: str,
                         handle: object) -> InLink:
        """The edge attached its heartbeat or lookup sender."""
        link = InLink(self._link_id(), peer.conn, name=name, address=None, record=None,
                      handle=handle)
        link.control = True
        peer.conn.in_links[link.link_id] = link
        if address == HEARTBEAT_ADDRESS:
            peer.heartbeat = link
        else:
            peer.lookup = link
        return link

    def detached(self, link: InLink | OutLink) -> None:
        peer = self.peers.get(link.conn)
        if peer is None:
            return
        if link is peer.tracking:
            peer.tracking = None
        elif link is peer.heartbeat:
            peer.heartbeat = None
        elif link is peer.lookup:
            peer.lookup = None
        elif link is peer.downlink:
            peer.downlink = None

    # -- what the edge sends ------------------------------------------------------------

    def received(self, link: InLink, data: bytes, now: float) -> tuple[bool, list[Effect]]:
        """A message on an edge's heartbeat or lookup link: whether it is
        taken (a lookup request that is not one is refused) and what it
        makes the router do."""
        peer = self.peers.get(link.conn)
        if peer is None:
            return True, []
        if link is peer.heartbeat:
            peer.last_beat = now
            return True, []
        if link is peer.lookup:
            return self._lookup(peer, data)
        return True, []

    def _lookup(self, peer: EdgePeer, data: bytes) -> tuple[bool, list[Effect]]:
        """Answer a link-route lookup: body ``[address, receiver]``, answer
        ``[is_link_route, has_destinations]`` with a status. A request that
        is not one (no version or opcode this router knows, a bad body, no
        reply-to) is refused with no answer, as qdrouterd refuses it."""
        try:
            sections = split_sections(data, "address lookup request")
        except PeerProtocolError as exc:
            log.error("Invalid address lookup request from %s: %s",
                      peer.conn.container_id, exc)
            return False, []
        props = sections.get(PROPERTIES)
        reply_to = props[4] if isinstance(props, list) and len(props) > 4 else None
        correlation = props[5] if isinstance(props, list) and len(props) > 5 else None
        app = sections.get(APPLICATION_PROPERTIES)
        body = sections.get(VALUE)
        problem = None
        if not isinstance(app, dict) or app.get("version") != LOOKUP_VERSION:
            problem = "no version or an unknown one"
        elif app.get("opcode") != LOOKUP_LINK_ROUTE:
            problem = "an unknown opcode"
        elif not isinstance(body, list) or len(body) < 2 or not isinstance(body[0], str) \
                or not isinstance(body[1], bool):
            problem = "a body that is not [address, receiver]"
        elif not isinstance(reply_to, str):
            problem = "no reply-to"
        if problem is not None:
            log.error("Invalid address lookup request from %s refused: %s",
                      peer.conn.container_id, problem)
            return False, []
        assert isinstance(body, list) and isinstance(reply_to, str)
        direction = Direction.IN if body[1] else Direction.OUT
        is_route, has_destinations = self._link_route(body[0], direction)
        answer = [is_route, has_destinations]
        status = LOOKUP_OK if is_route else LOOKUP_NOT_FOUND
        self.lookups += 1
        reply = b"".join((
            encode_section(HEADER, [False], COMPACT),
            encode_section(PROPERTIES, [None, None, reply_to, None, None, correlation], COMPACT),
            encode_section(APPLICATION_PROPERTIES,
                           {"version": UInt(LOOKUP_VERSION), "opcode": UInt(LOOKUP_LINK_ROUTE),
                            "status": UInt(status)}, COMPACT),
            encode_section(VALUE, answer, COMPACT),
        ))
        return True, [RouteMessage(data=reply)]

    # -- heartbeats -------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        return self.next_check if self.peers else None

    def tick(self, now: float) -> list[Effect]:
        """Every two seconds: close an edge connection whose heartbeats stopped."""
        if self.next_check is None or now < self.next_check:
            return []
        self.next_check = now + HEARTBEAT_INTERVAL_S
        effects: list[Effect] = []
        for peer in self.peers.values():
            if peer.heartbeat is not None and now - peer.last_beat > HEARTBEAT_TIMEOUT_S:
                log.info("[C%d] Lost heartbeat from container %s, closing connection",
                         peer.conn.conn_id, peer.conn.container_id)
                effects.append(CloseConnection(
                    conn=peer.conn,
                    description=f"Lost heartbeat from container {peer.conn.container_id}"))
        return effects


__all__ = ["EdgeHosts", "EdgePeer", "LinkRouteLookup"]
