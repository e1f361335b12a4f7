"""Edge routers (docs/networks.md#edge-routers): an edge router's uplink to an
interior router, and an interior router's side of the edges attached to it.

Owns, on an edge router (``Uplink``), which ``edge`` connection is the
active uplink (the first to open; another open one when it goes) and the
links the edge attaches on it:

- an anonymous sending link, the way up for every message bound beyond the
  edge (the ``L_edge`` record's destination);
- the downlink, a receiving link whose source is the edge's id with the
  capability ``qd.router-edge-downlink``: the edge's own ``_edge/<id>/...``
  addresses come down it;
- one receiving link per address a consumer on the edge has, so that the
  interior sees a consumer here;
- one sending link per address a producer on the edge has, a destination
  of that address only while the interior says it has destinations beyond
  this edge (it says so on the address-tracking link, messages
  ``[key, true|false]``);
- the heartbeat link, a message every two seconds;
- the link-route lookup links: a client attach on the edge that no link
  route of the edge's own serves is first looked up at the interior, and
  forwarded up the uplink when the interior has a link route for it;
- a management link: the link routes the edge's own brokers serve are made
  ``connection.linkRoute`` entities of the uplink at the interior, so that
  attaches anywhere in the network reach them.

On an interior router (``EdgeHosts``): binding an edge's downlink to the
edge's ``H<edge-id>`` key, the tracking answers each edge gets (whether
each address it produces to has a destination that is not on that edge:
the credit rule of ``AddressRecord.may_feed``, so an answer goes out
exactly when that sender's credit would change), the heartbeats it
expects, and the link-route lookups edges ask for.

The wire conventions (addresses, capabilities, message bodies) are
qdrouterd's, so that edges and interiors of either kind work together.
Pure: no clock, no sockets; it returns effects like the rest of the core.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from addressing import Direction
from router.core.amqp import (
    APPLICATION_PROPERTIES,
    COMPACT,
    HEADER,
    PROPERTIES,
    VALUE,
    Int,
    PeerProtocolError,
    UInt,
    encode_section,
    split_sections,
)
from router.core.destinations import demand_changed, senders_changed
from router.core.effects import (
    AttachOwnLink,
    CloseConnection,
    DetachOwnLink,
    Effect,
    LookupAnswered,
    RouteMessage,
    SendOnLink,
)
from router.core.ids import LinkId
from router.core.records import AddressRecord, Connection, InLink, OutLink, UplinkTarget

log = logging.getLogger(__name__)

#: Terminus capability of an edge's downlink.
EDGE_DOWNLINK: Final = "qd.router-edge-downlink"
#: Where an edge receives the interior's address-tracking answers from.
TRACKING_ADDRESS: Final = "_$qd.edge_addr_tracking"
#: Where an edge sends its heartbeats.
HEARTBEAT_ADDRESS: Final = "_$qd.edge_heartbeat"
#: Where an edge asks whether an address is link-routed.
LOOKUP_ADDRESS: Final = "_$qd.addr_lookup"
#: The record of "beyond this edge": the anonymous uplink is its destination.
EDGE_KEY: Final = "L_edge"
HEARTBEAT_INTERVAL_S: Final = 2.0
#: An interior closes an edge connection whose last heartbeat is older.
HEARTBEAT_TIMEOUT_S: Final = 8.0
#: An unanswered link-route lookup counts as "not link-routed" after this.
LOOKUP_TIMEOUT_S: Final = 3.0
MANAGEMENT_ADDRESS: Final = "$management"
CONNECTION_LINK_ROUTE: Final = "org.apache.qpid.dispatch.router.connection.linkRoute"
FALLBACK_CAPABILITY: Final = "qd.fallback"
WAYPOINT_CAPABILITY: Final = "qd.waypoint"
#: The in-process consumers (the management node) are on connection 0:
#: they are never made known beyond the router.
_IN_PROCESS: Final = 0

# The link-route lookup protocol: version, opcode and statuses.
LOOKUP_VERSION: Final = 1
LOOKUP_LINK_ROUTE: Final = 1
LOOKUP_OK: Final = 0
LOOKUP_BAD_VERSION: Final = 1
LOOKUP_BAD_OPCODE: Final = 2
LOOKUP_NOT_FOUND: Final = 3
LOOKUP_INVALID: Final = 4


def encode_tracking(key: str, reachable: bool) -> bytes:
    """An address-tracking message: body ``[key, reachable]``."""
    return (encode_section(HEADER, [False], COMPACT)
            + encode_section(VALUE, [key, reachable], COMPACT))


def decode_tracking(data: bytes) -> tuple[str, bool]:
    """The key and flag of an address-tracking message.

    Raises:
        PeerProtocolError: the body is not a list of a string and a boolean.
    """
    body = split_sections(data, "address-tracking message").get(VALUE)
    if not isinstance(body, list) or len(body) != 2 or not isinstance(body[0], str) \
            or not isinstance(body[1], bool):
        raise PeerProtocolError("address-tracking message: body is not [key, boolean]")
    return body[0], body[1]


def encode_heartbeat(sequence: int) -> bytes:
    """A heartbeat: an integer body, counting up."""
    return encode_section(VALUE, Int(sequence & 0x7FFFFFFF), COMPACT)


def encode_lookup(address: str, receiving: bool, *, reply_to: str, correlation: str) -> bytes:
    """A link-route lookup request: is ``address`` link-routed for a link the
    router receives on (``receiving``, a client sender) or sends on?"""
    return b"".join((
        encode_section(HEADER, [False], COMPACT),
        encode_section(PROPERTIES, [None, None, None, None, reply_to, correlation], COMPACT),
        encode_section(APPLICATION_PROPERTIES,
                       {"version": UInt(LOOKUP_VERSION), "opcode": UInt(LOOKUP_LINK_ROUTE)},
                       COMPACT),
        encode_section(VALUE, [address, receiving], COMPACT),
    ))


def encode_proxy_request(operation: str, name: str, *, reply_to: str, correlation: str,
                         pattern: str | None = None, direction: str | None = None) -> bytes:
    """A management CREATE or DELETE of a ``connection.linkRoute`` named ``name``."""
    body: dict[str, object] = {}
    if operation == "CREATE":
        body = {"type": CONNECTION_LINK_ROUTE, "name": name, "pattern": pattern,
                "direction": direction}
    return b"".join((
        encode_section(HEADER, [False], COMPACT),
        encode_section(PROPERTIES, [None, None, MANAGEMENT_ADDRESS, None, reply_to, correlation],
                       COMPACT),
        encode_section(APPLICATION_PROPERTIES, {"operation": operation,
                                                "type": CONNECTION_LINK_ROUTE, "name": name},
                       COMPACT),
        encode_section(VALUE, body, COMPACT),
    ))


def decode_lookup_reply(data: bytes) -> tuple[object, bool, bool]:
    """The correlation id of a lookup reply and its answer: link-routed, and
    with destinations (both false unless the status is OK).

    Raises:
        PeerProtocolError: not a lookup reply.
    """
    sections = split_sections(data, "address lookup reply")
    props = sections.get(PROPERTIES)
    app = sections.get(APPLICATION_PROPERTIES)
    body = sections.get(VALUE)
    if not isinstance(props, list) or len(props) < 6 or not isinstance(app, dict):
        raise PeerProtocolError("address lookup reply: no correlation id or status")
    if app.get("status") != LOOKUP_OK:
        return props[5], False, False
    if not isinstance(body, list) or len(body) < 2 or not all(
            isinstance(v, bool) for v in body[:2]):
        raise PeerProtocolError("address lookup reply: body is not [boolean, boolean]")
    return props[5], bool(body[0]), bool(body[1])


def waypoint_capabilities(key: str, phases: tuple[int, int] | None, *,
                          incoming: bool) -> tuple[str, ...]:
    """The capabilities of an uplink link for mobile key ``key``: a fallback
    key's links are fallback links, and an address with waypoint phases has
    the links of its inner phases marked as waypoints, so that the interior
    binds them to the same phase (docs/brokers.md#phases).

    Args:
        key: the record's key (``M<phase><address>``).
        phases: the address's ingress and egress phases, when configured.
        incoming: a link the edge receives on (its consumers' way in).
    """
    if key[1] == "F":
        return (FALLBACK_CAPABILITY,)
    if phases is None or phases[1] <= 0:
        return ()
    phase = int(key[1])
    ingress, egress = phases
    if (not incoming and phase == ingress) or (incoming and phase == egress):
        return ()
    if phase < ingress or phase > egress:
        return ()
    return (f"{WAYPOINT_CAPABILITY}.{phase + (1 if incoming else 0)}",)


def _mobile(record: AddressRecord) -> bool:
    return record.key[0] == "M"


class Uplink:
    """An edge router's uplink (docs/networks.md#edge-routers).

    Args:
        router_id: this edge's id (the source of its downlink).
        records: the router's address records (shared with ``Router``).
        link_id: allocates link ids.
        token: the random part of link names.
        edge_record: finds or creates the ``L_edge`` record.
        phases: an address's configured ingress and egress phases, if any.
    """

    def __init__(self, *, router_id: str, records: dict[str, AddressRecord],
                 link_id: Callable[[], LinkId], token: Callable[[], str],
                 edge_record: Callable[[], AddressRecord],
                 phases: Callable[[str], tuple[int, int] | None]) -> None:
        self.router_id = router_id
        self.records = records
        self._link_id = link_id
        self._token = token
        self._edge_record = edge_record
        self._phases = phases
        #: Open edge connections, in the order they opened.
        self.conns: list[Connection] = []
        #: The active uplink, if any.
        self.active: Connection | None = None
        self.anon: OutLink | None = None
        self.downlink: InLink | None = None
        self.tracking: InLink | None = None
        self.heartbeat: OutLink | None = None
        #: Per mobile key: the link the interior sends this edge's consumers'
        #: messages on, and the link this edge's producers' messages go up.
        self.inlinks: dict[str, InLink] = {}
        self.outlinks: dict[str, OutLink] = {}
        #: The uplink destinations bound into records (``L_edge`` and the
        #: addresses the interior reported destinations for), by key.
        self.targets: dict[str, UplinkTarget] = {}
        self.next_beat: float | None = None
        self.beats = 0
        #: Link-route lookups: the request link, the reply link (its address
        #: assigned by the interior), and the lookups waiting for an answer
        #: by correlation id: the client attach's handle and a deadline.
        self.lookup_out: OutLink | None = None
        self.lookup_in: InLink | None = None
        self.reply_to: str | None = None
        self.lookups: dict[str, tuple[object, float]] = {}
        self._next_lookup = 0
        #: The link routes this edge serves (by key: pattern and direction),
        #: offered to the interior through the management link.
        self.offered: dict[str, tuple[str, str]] = {}
        self.management: OutLink | None = None
        #: Proxy requests waiting for the management link's credit, by key.
        self.proxy_waiting: dict[str, str] = {}
        #: Counters: uplinks activated, tracking messages received, lookups asked.
        self.activations = 0
        self.tracking_updates = 0
        self.lookups_sent = 0

    # -- which connection is the uplink ---------------------------------------------

    def opened(self, conn: Connection, now: float) -> list[Effect]:
        """An ``edge`` connection opened: the first becomes the uplink."""
        self.conns.append(conn)
        if self.active is not None:
            return []
        log.info("Edge connection (id=%d) to interior established", conn.conn_id)
        return self._activate(conn, now)

    def closed(self, conn: Connection, now: float) -> list[Effect]:
        """An ``edge`` connection went; its links have been unbound already.
        Losing the uplink activates another open edge connection, if any."""
        if conn in self.conns:
            self.conns.remove(conn)
        if conn is not self.active:
            return []
        self.active = None
        self.anon = self.downlink = self.tracking = self.heartbeat = None
        self.lookup_out = self.lookup_in = self.management = None
        self.reply_to = None
        self.proxy_waiting.clear()
        self.inlinks.clear()
        self.outlinks.clear()
        self.next_beat = None
        effects: list[Effect] = self._give_up_lookups()
        for key, target in list(self.targets.items()):
            effects.extend(self._unbind(key, target))
        if not self.conns:
            log.info("Edge connection (id=%d) to interior lost, no alternate connection "
                     "available", conn.conn_id)
            return effects
        alternate = self.conns[0]
        log.info("Edge connection (id=%d) to interior lost, activating alternate id=%d",
                 conn.conn_id, alternate.conn_id)
        effects.extend(self._activate(alternate, now))
        return effects

    def _activate(self, conn: Connection, now: float) -> list[Effect]:
        self.active = conn
        self.activations += 1
        effects: list[Effect] = []
        record = self._edge_record()
        anon = self._out(conn, "", record)
        self.anon = anon
        effects.append(AttachOwnLink(link=anon))
        effects.extend(self._bind(EDGE_KEY, record, anon))
        down = self._in(conn, None, None)
        self.downlink = down
        effects.append(AttachOwnLink(link=down, source=self.router_id,
                                     capabilities=(EDGE_DOWNLINK,)))
        tracking = self._in(conn, None, None)
        tracking.control = True
        self.tracking = tracking
        effects.append(AttachOwnLink(link=tracking, source=TRACKING_ADDRESS))
        beat = self._out(conn, HEARTBEAT_ADDRESS, None)
        beat.presettle = True
        self.heartbeat = beat
        effects.append(AttachOwnLink(link=beat, target=HEARTBEAT_ADDRESS))
        self.next_beat = now + HEARTBEAT_INTERVAL_S / 2
        ask = self._out(conn, LOOKUP_ADDRESS, None)
        ask.presettle = True
        self.lookup_out = ask
        effects.append(AttachOwnLink(link=ask, target=LOOKUP_ADDRESS))
        replies = self._in(conn, None, None)
        replies.control = True
        self.lookup_in = replies
        effects.append(AttachOwnLink(link=replies, dynamic=True))
        agent = self._out(conn, MANAGEMENT_ADDRESS, None)
        self.management = agent
        effects.append(AttachOwnLink(link=agent, target=MANAGEMENT_ADDRESS))
        for rec in list(self.records.values()):
            if _mobile(rec):
                effects.extend(self.consumers_changed(rec))
                effects.extend(self.senders_changed(rec))
        return effects

    # -- links ------------------------------------------------------------------------

    def _name(self) -> str:
        return f"qdlink.{self._token()}"

    def _in(self, conn: Connection, address: str | None,
            record: AddressRecord | None) -> InLink:
        link = InLink(self._link_id(), conn, name=self._name(), address=address, record=record)
        conn.in_links[link.link_id] = link
        return link

    def _out(self, conn: Connection, address: str, record: AddressRecord | None) -> OutLink:
        link = OutLink(self._link_id(), conn, name=self._name(), address=address, record=record)
        # What goes up is addressed by the forwarder, with no ingress or trace:
        # sent as it is.
        link.prepared = True
        conn.out_links[link.link_id] = link
        return link

    def _bind(self, key: str, record: AddressRecord, link: OutLink) -> list[Effect]:
        """Make ``link`` a destination of ``record``."""
        if key in self.targets:
            return []
        target = UplinkTarget(link)
        self.targets[key] = target
        record.remotes.append(target)
        record.closest_remotes.append(target)
        return senders_changed(record)

    def _unbind(self, key: str, target: UplinkTarget) -> list[Effect]:
        del self.targets[key]
        record = target.link.record if key != EDGE_KEY else self.records.get(EDGE_KEY)
        if record is None:
            return []
        if target in record.remotes:
            record.remotes.remove(target)
        if target in record.closest_remotes:
            record.closest_remotes.remove(target)
        return senders_changed(record)

    @staticmethod
    def _local(link: InLink | OutLink, uplink: Connection) -> bool:
        conn = link.conn
        return conn is not uplink and conn.conn_id != _IN_PROCESS

    def consumers_changed(self, record: AddressRecord) -> list[Effect]:
        """``record`` gained its first or lost its last consumer: the
        interior is told through a receiving link for it on the uplink."""
        conn = self.active
        if conn is None or not _mobile(record):
            return []
        key = record.key
        wanted = any(self._local(c, conn) for c in record.consumers)
        link = self.inlinks.get(key)
        if wanted and link is None:
            link = self._in(conn, record.address, record)
            record.senders.append(link)
            demand_changed(record)
            link.blocked = not record.may_feed(link)
            self.inlinks[key] = link
            caps = waypoint_capabilities(key, self._phases(record.address), incoming=True)
            return [AttachOwnLink(link=link, source=key[2:], capabilities=caps)]
        if not wanted and link is not None:
            del self.inlinks[key]
            conn.in_links.pop(link.link_id, None)
            if link in record.senders:
                record.senders.remove(link)
                record.retired_in += link.delivered
                demand_changed(record)
            return [DetachOwnLink(link=link)]
        return []

    def senders_changed(self, record: AddressRecord) -> list[Effect]:
        """``record``'s producers changed: a sending link for it on the uplink
        while it has one on the edge (and for its fallback record too)."""
        conn = self.active
        if conn is None or not _mobile(record) or record.key[1] == "F":
            return []
        # An address served in the router itself (management) is never
        # looked for beyond it.
        wanted = any(self._local(s, conn) for s in record.senders) \
            and not any(c.conn.conn_id == _IN_PROCESS for c in record.consumers)
        effects: list[Effect] = []
        for rec in (record, record.fallback):
            if rec is None:
                continue
            key = rec.key
            link = self.outlinks.get(key)
            if wanted and link is None:
                link = self._out(conn, rec.address, rec)
                self.outlinks[key] = link
                caps = waypoint_capabilities(key, self._phases(rec.address), incoming=False)
                effects.append(AttachOwnLink(link=link, target=key[2:], capabilities=caps))
            elif not wanted and link is not None:
                del self.outlinks[key]
                conn.out_links.pop(link.link_id, None)
                target = self.targets.get(key)
                if target is not None:
                    effects.extend(self._unbind(key, target))
                effects.append(DetachOwnLink(link=link))
        return effects

    def detached(self, link: InLink | OutLink) -> list[Effect]:
        """One of the uplink's links went (the interior detached it, or its
        connection closed); the core has unbound it from its record."""
        if link.conn is not self.active:
            return []
        effects: list[Effect] = []
        if isinstance(link, OutLink):
            if link is self.anon:
                self.anon = None
            elif link is self.heartbeat:
                self.heartbeat = None
                self.next_beat = None
            elif link is self.lookup_out:
                self.lookup_out = None
                effects.extend(self._give_up_lookups())
            elif link is self.management:
                self.management = None
            for key, target in list(self.targets.items()):
                if target.link is link:
                    effects.extend(self._unbind(key, target))
            for key, out in list(self.outlinks.items()):
                if out is link:
                    del self.outlinks[key]
        else:
            if link is self.downlink:
                self.downlink = None
            elif link is self.tracking:
                self.tracking = None
            elif link is self.lookup_in:
                self.lookup_in = None
                self.reply_to = None
                effects.extend(self._give_up_lookups())
            for key, inl in list(self.inlinks.items()):
                if inl is link:
                    del self.inlinks[key]
        return effects

    # -- what the interior says --------------------------------------------------------

    def answered(self, link: InLink | OutLink, address: str | None) -> list[Effect]:
        """The interior answered one of the uplink's attaches: the reply
        link's dynamic address is where lookup answers come to, and the link
        routes this edge serves can now be offered."""
        if link is not self.lookup_in or not address:
            return []
        self.reply_to = address
        effects: list[Effect] = []
        for key in self.offered:
            effects.extend(self._proxy("CREATE", key))
        return effects

    # -- the link routes this edge serves ----------------------------------------------

    def offer(self, key: str, pattern: str, direction: str, served: bool) -> list[Effect]:
        """A link route of this edge gained its first (``served``) or lost its
        last destination here: made or deleted at the interior as a link route
        of the uplink (docs/networks.md#link-routes-through-an-edge)."""
        if served:
            self.offered[key] = (pattern, direction)
            return self._proxy("CREATE", key)
        if self.offered.pop(key, None) is None:
            return []
        return self._proxy("DELETE", key)

    def _proxy(self, operation: str, key: str) -> list[Effect]:
        agent = self.management
        reply_to = self.reply_to
        if self.active is None or agent is None or reply_to is None:
            return []  # offered again once the uplink is ready
        if agent.credit <= 0:
            # Sent unsettled, so only with credit: the next tick sends it.
            self.proxy_waiting[key] = operation
            return []
        self.proxy_waiting.pop(key, None)
        self._next_lookup += 1
        name = f"{self.router_id}/proxyLinkRoute/{key}"
        pattern, direction = self.offered.get(key, (None, None))
        log.debug("edge %s proxy link route %s", operation.lower(), name)
        return [SendOnLink(link=agent, settled=False, data=encode_proxy_request(
            operation, name, reply_to=reply_to, correlation=f"proxy.{self._next_lookup}",
            pattern=pattern, direction=direction))]

    def received(self, link: InLink, data: bytes) -> list[Effect]:
        """A message on one of the uplink's service links: address tracking
        or a lookup's answer."""
        if link is self.lookup_in:
            return self._lookup_answer(data)
        if link is not self.tracking:
            return []
        try:
            key, reachable = decode_tracking(data)
        except PeerProtocolError as exc:
            log.error("Edge Address Proxy: received an invalid message body: %s", exc)
            return []
        self.tracking_updates += 1
        out = self.outlinks.get(key)
        if out is None or out.record is None:
            return []
        log.debug("edge address tracking: %s %s", key,
                  "has destinations" if reachable else "has no destination")
        if reachable:
            return self._bind(key, out.record, out)
        target = self.targets.get(key)
        return self._unbind(key, target) if target is not None else []

    # -- link-route lookups --------------------------------------------------------------

    def lookup(self, handle: object, address: str, receiving: bool,
               now: float) -> list[Effect] | None:
        """Ask the interior whether a client's attach to ``address`` is
        link-routed; None when it cannot be asked (no uplink, its lookup
        links not ready or without credit): the attach goes on at once."""
        ask = self.lookup_out
        reply_to = self.reply_to
        if self.active is None or ask is None or reply_to is None \
                or ask.credit <= len(ask.queue):
            return None
        self._next_lookup += 1
        self.lookups_sent += 1
        correlation = f"lookup.{self._next_lookup}"
        self.lookups[correlation] = (handle, now + LOOKUP_TIMEOUT_S)
        return [SendOnLink(link=ask, data=encode_lookup(address, receiving, reply_to=reply_to,
                                                        correlation=correlation))]

    def _lookup_answer(self, data: bytes) -> list[Effect]:
        if b"statusCode" in data:
            self._proxy_answer(data)
            return []
        try:
            correlation, link_route, destinations = decode_lookup_reply(data)
        except PeerProtocolError as exc:
            log.error("Edge address lookup: invalid reply: %s", exc)
            return []
        waiting = self.lookups.pop(correlation, None) if isinstance(correlation, str) else None
        if waiting is None:
            return []
        return [LookupAnswered(handle=waiting[0], link_route=link_route,
                               destinations=destinations)]

    @staticmethod
    def _proxy_answer(data: bytes) -> None:
        """The interior's answer to a proxy link route's CREATE or DELETE."""
        try:
            app = split_sections(data, "management response").get(APPLICATION_PROPERTIES)
        except PeerProtocolError as exc:
            log.error("edge proxy link route: invalid response: %s", exc)
            return
        status = app.get("statusCode") if isinstance(app, dict) else None
        if not isinstance(status, int) or not 200 <= status < 300:
            description = app.get("statusDescription") if isinstance(app, dict) else None
            log.error("edge proxy link route refused by the interior: %s %s", status,
                      description)

    def _give_up_lookups(self) -> list[Effect]:
        """No answer will come: every waiting attach goes on as not link-routed."""
        waiting = list(self.lookups.values())
        self.lookups.clear()
        return [LookupAnswered(handle=h, link_route=False, destinations=False)
                for h, _ in waiting]

    # -- heartbeats -------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        due = [d for _, d in self.lookups.values()]
        if self.next_beat is not None:
            due.append(self.next_beat)
        return min(due) if due else None

    def tick(self, now: float) -> list[Effect]:
        """Send a heartbeat when one is due and the interior gave credit; an
        unanswered lookup times out."""
        effects: list[Effect] = []
        expired = [c for c, (_, deadline) in self.lookups.items() if deadline <= now]
        for correlation in expired:
            handle, _ = self.lookups.pop(correlation)
            log.info("Edge address lookup: no answer in %.0f s, routing the attach locally",
                     LOOKUP_TIMEOUT_S)
            effects.append(LookupAnswered(handle=handle, link_route=False, destinations=False))
        for key, operation in list(self.proxy_waiting.items()):
            effects.extend(self._proxy(operation, key))
        due = self.next_beat
        if due is None or now < due:
            return effects
        self.next_beat = now + HEARTBEAT_INTERVAL_S
        beat = self.heartbeat
        if beat is None or beat.credit <= len(beat.queue):
            return effects
        self.beats += 1
        effects.append(SendOnLink(link=beat, data=encode_heartbeat(self.beats)))
        return effects


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
        if tracking is None or record is None or not _mobile(record):
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
                 link_route: LinkRouteLookup) -> None:
        self._link_id = link_id
        self._downlink_record = downlink_record
        self._link_route = link_route
        self.peers: dict[Connection, EdgePeer] = {}
        self.next_check: float | None = None
        #: Counters: link-route lookups answered.
        self.lookups = 0

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


__all__ = [
    "EDGE_DOWNLINK",
    "EDGE_KEY",
    "HEARTBEAT_ADDRESS",
    "LOOKUP_ADDRESS",
    "TRACKING_ADDRESS",
    "EdgeHosts",
    "EdgePeer",
    "Uplink",
    "decode_lookup_reply",
    "decode_tracking",
    "encode_heartbeat",
    "encode_lookup",
    "encode_tracking",
    "waypoint_capabilities",
]
