"""An edge router's side of its uplink (docs/networks.md#edge-routers).

Owns which ``edge`` connection is the active uplink (the first to open;
another open one when it goes) and the links the edge attaches on it: the
anonymous way up, the downlink, a link per address its consumers and
producers have, the heartbeat, the link-route lookups and the management
link that offers its brokers' link routes (the package's docstring lists
them).  The interior's side is ``router.core.edges.hosts``.  Pure: no clock,
no sockets; it returns effects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from linkroute import RouteEntry
from router.core.amqp import (
    APPLICATION_PROPERTIES,
    PeerProtocolError,
    split_sections,
)
from router.core.destinations import demand_changed, senders_changed
from router.core.edges.wire import (
    EDGE_DOWNLINK,
    EDGE_KEY,
    HEARTBEAT_ADDRESS,
    HEARTBEAT_INTERVAL_S,
    IN_PROCESS,
    LOOKUP_ADDRESS,
    LOOKUP_TIMEOUT_S,
    MANAGEMENT_ADDRESS,
    TRACKING_ADDRESS,
    decode_lookup_reply,
    decode_tracking,
    encode_heartbeat,
    encode_lookup,
    encode_proxy_request,
    mobile,
    waypoint_capabilities,
)
from router.core.effects import (
    AttachOwnLink,
    DetachOwnLink,
    Effect,
    LookupAnswered,
    SendOnLink,
)
from router.core.ids import LinkId
from router.core.records import AddressRecord, Connection, InLink, OutLink, UplinkTarget

log = logging.getLogger(__name__)



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
        self.tracking = self._control_in(conn, effects, source=TRACKING_ADDRESS)
        self.heartbeat = self._presettled_out(conn, HEARTBEAT_ADDRESS, effects)
        self.next_beat = now + HEARTBEAT_INTERVAL_S / 2
        self.lookup_out = self._presettled_out(conn, LOOKUP_ADDRESS, effects)
        self.lookup_in = self._control_in(conn, effects, dynamic=True)
        agent = self._out(conn, MANAGEMENT_ADDRESS, None)
        self.management = agent
        effects.append(AttachOwnLink(link=agent, target=MANAGEMENT_ADDRESS))
        for rec in list(self.records.values()):
            if mobile(rec):
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

    def _control_in(self, conn: Connection, effects: list[Effect], source: str | None = None,
                    dynamic: bool = False) -> InLink:
        """An incoming link whose messages the router consumes itself,
        attached from ``source`` (or a dynamic one)."""
        link = self._in(conn, None, None)
        link.control = True
        effects.append(AttachOwnLink(link=link, source=source, dynamic=dynamic))
        return link

    def _presettled_out(self, conn: Connection, address: str, effects: list[Effect]) -> OutLink:
        """An outgoing link to ``address`` whose messages go settled."""
        link = self._out(conn, address, None)
        link.presettle = True
        effects.append(AttachOwnLink(link=link, target=address))
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
        return conn is not uplink and conn.conn_id != IN_PROCESS

    def consumers_changed(self, record: AddressRecord) -> list[Effect]:
        """``record`` gained its first or lost its last consumer: the
        interior is told through a receiving link for it on the uplink."""
        conn = self.active
        if conn is None or not mobile(record):
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
        if conn is None or not mobile(record) or record.key[1] == "F":
            return []
        # An address served in the router itself (management) is never
        # looked for beyond it.
        wanted = any(self._local(s, conn) for s in record.senders) \
            and not any(c.conn.conn_id == IN_PROCESS for c in record.consumers)
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

    def offer_entry(self, entry: RouteEntry[Connection], served: bool) -> list[Effect]:
        """An edge offers the link routes its brokers serve to its interior
        (``LinkRouting``'s ``offer``)."""
        return self.offer(entry.key, entry.pattern, entry.direction.value, served)

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


__all__ = ["Uplink"]
