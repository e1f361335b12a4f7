"""Auto-links in one router: attaching them, binding their links, their
failures.  The domain itself (specs, their life, which connection serves
each) is the ``autolink`` package's; this module applies it to this
router's connections and records.

Owns what the router does with an auto-link
(docs/brokers.md#waypoints-and-auto-links) once ``autolink.AutoLinkTable``
decided where it goes: the attach to ask of the adapter (``AttachAutoLink``)
when a connection serving it opens, a retry is due or one is added at run
time; binding the answered link to
the auto-link's address at its phase (an ``out`` link as a consumer, an
``in`` link as a producer); and the failure when the container detaches
it.  A part of ``Router``, given what it needs from it as functions; pure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from addressing import Direction
from autolink import AutoLink, AutoLinkEntity, AutoLinkSpec, AutoLinkTable
from router.core.destinations import demand_changed
from router.core.effects import AttachAutoLink, DetachAutoLink, Effect
from router.core.ids import LinkId
from router.core.records import AddressRecord, Connection, InLink, OutLink

log = logging.getLogger(__name__)

#: The record an auto-link's link binds to: (address, phase, fallback) -> record.
Bind = Callable[[str, int, bool], AddressRecord]
#: Bind a router-outgoing link as a destination of a record.
AddConsumer = Callable[[AddressRecord, OutLink, float], list[Effect]]


class AutoLinking:
    """The router's auto-links.

    Args:
        specs: the configured auto-links.
        link_id: the next link id of the router.
        bind: the record an auto-link's link binds to.
        add_consumer: binds an ``out`` auto-link's link as a consumer.
        add_sender: what an ``in`` auto-link's link bound as a producer leads to.
    """

    def __init__(self, specs: Iterable[AutoLinkSpec], *, link_id: Callable[[], LinkId],
                 bind: Bind, add_consumer: AddConsumer,
                 add_sender: Callable[[AddressRecord], list[Effect]] | None = None,
                 ids: Iterator[int] | None = None) -> None:
        self.table: AutoLinkTable[Connection] = AutoLinkTable(specs, ids=ids)
        self._link_id = link_id
        self._bind = bind
        self._add_consumer = add_consumer
        self._add_sender = add_sender

    def __len__(self) -> int:
        return len(self.table)

    def attach(self, autolink: AutoLink[Connection]) -> AttachAutoLink:
        """The attach the adapter is to make for an auto-link's link on its connection."""
        conn = autolink.peer
        assert conn is not None
        spec = autolink.spec
        where = (f"connection {spec.connection}" if spec.connection is not None
                 else f"container {spec.container_id}")
        log.info("Auto Link Activated '%s' on %s", autolink.label, where)
        return AttachAutoLink(autolink=autolink, conn=conn,
                              sender=spec.direction is Direction.OUT,
                              address=autolink.external_address)

    def add(self, spec: AutoLinkSpec) -> tuple[AutoLinkEntity[Connection], list[Effect]]:
        """Add an auto-link at run time, attached at once on every open
        connection that serves it (raises ``AutoLinkError`` for a name taken)."""
        entity = self.table.add(spec)
        return entity, [self.attach(al) for al in self.table.activate(entity)]

    def remove(self, entity: AutoLinkEntity[Connection]) -> list[Effect]:
        """Delete an auto-link; its links are closed."""
        links = self.table.remove(entity)
        log.info("Auto Link Deleted '%s'", entity.label)
        return [DetachAutoLink(autolink=al) for al in links if al.peer is not None]

    def attached(self, autolink: AutoLink[Connection], *, name: str, address: str | None,
                 handle: object, now: float = 0.0
                 ) -> tuple[InLink | OutLink | None, list[Effect]]:
        """The container answered an auto-link's attach with terminus ``address``
        (target of an ``out`` link, source of an ``in`` link).

        Returns the link bound to the auto-link's address, or None when the
        answer has no address (the container is expected to detach it).
        """
        conn = autolink.peer
        assert conn is not None
        link_id = self._link_id()
        if not autolink.replied(bool(address), link_id):
            return None, []
        spec = autolink.spec
        phase = spec.effective_phase
        out = spec.direction is Direction.OUT
        record = self._bind(spec.address, phase, spec.fallback and out)
        if out:
            link = OutLink(link_id, conn, name=name, address=spec.address, record=record,
                           autolink=autolink, handle=handle)
            conn.out_links[link_id] = link
            return link, self._add_consumer(record, link, now)
        sender = InLink(link_id, conn, name=name, address=spec.address, record=record,
                        phase=phase, fallback=spec.fallback, autolink=autolink, handle=handle)
        record.senders.append(sender)
        demand_changed(record)
        conn.in_links[link_id] = sender
        return sender, self._add_sender(record) if self._add_sender is not None else []

    def detached(self, autolink: AutoLink[Connection], error: str, now: float = 0.0) -> None:
        """The container detached (or refused) an auto-link: it has failed and is
        attached again when its retry is due.  Its link, if it had one, has
        been unbound with ``Router.link_detached``."""
        self.table.detached(autolink, error, now)
        log.info("Auto Link Activation Failed. %s", error or "detached by the peer")

    def connection_opened(self, conn: Connection) -> list[Effect]:
        """A route-container connection opened: each auto-link it serves attaches a link."""
        return [self.attach(al) for al in self.table.connection_opened(conn)]

    def connection_closed(self, conn: Connection) -> None:
        """A route-container connection went, and the auto-links' links on it."""
        self.table.connection_closed(conn)

    def tick(self, now: float) -> list[Effect]:
        """Auto-link links whose retry is due attach again."""
        return [self.attach(al) for al in self.table.tick(now)]

    def next_deadline(self) -> float | None:
        return self.table.next_deadline() if len(self.table) else None


__all__ = ["AutoLinking"]
