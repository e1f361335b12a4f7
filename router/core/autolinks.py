"""Auto-links in the core: attaching them, binding their links, their failures.

Owns what the router does with an auto-link
(docs/brokers.md#waypoints-and-auto-links) once
``autolink.AutoLinkTable`` decided where it goes: the attach to ask of the
adapter (``AttachAutoLink``), binding the answered link to the auto-link's
address at its phase (an ``out`` link as a consumer, an ``in`` link as a
producer; a fallback ``out`` link to the fallback record), and the failure
when the container detaches it.  A base class of ``Router``; pure.
"""

from __future__ import annotations

import logging

from addressing import AddressSpec, Direction, Distribution, RoutingKey, classify
from autolink import AutoLink, AutoLinkSpec, AutoLinkTable
from router.core.destinations import demand_changed
from router.core.effects import AttachAutoLink, DetachAutoLink, Effect
from router.core.ids import LinkId
from router.core.records import AddressRecord, Connection, InLink, OutLink

log = logging.getLogger("router.core.router")


class AutoLinking:
    """The auto-link side of ``Router``."""

    router_id: str
    autolinks: AutoLinkTable[Connection]

    def _link_id(self) -> LinkId:
        raise NotImplementedError

    def _treatment(self, address: str) -> tuple[Distribution, AddressSpec | None]:
        raise NotImplementedError

    def _bind(self, key: RoutingKey, address: str, distribution: Distribution,
              spec: AddressSpec | None) -> AddressRecord | None:
        raise NotImplementedError

    def _add_consumer(self, record: AddressRecord, link: OutLink, now: float) -> list[Effect]:
        raise NotImplementedError

    def _attach_autolink(self, autolink: AutoLink[Connection]) -> AttachAutoLink:
        conn = autolink.peer
        assert conn is not None
        spec = autolink.spec
        where = (f"connection {spec.connection}" if spec.connection is not None
                 else f"container {spec.container_id}")
        log.info("Auto Link Activated '%s' on %s", autolink.label, where)
        return AttachAutoLink(autolink=autolink, conn=conn,
                              sender=spec.direction is Direction.OUT,
                              address=autolink.external_address)

    def add_autolink(self, spec: AutoLinkSpec) -> tuple[AutoLink[Connection], list[Effect]]:
        """Add an auto-link at run time, attached at once when an open
        connection serves it (raises ``AutoLinkError`` for a name taken)."""
        autolink = self.autolinks.add(spec)
        if self.autolinks.activate(autolink):
            return autolink, [self._attach_autolink(autolink)]
        return autolink, []

    def remove_autolink(self, autolink: AutoLink[Connection]) -> list[Effect]:
        """Delete an auto-link; its link, if it has one, is closed."""
        self.autolinks.remove(autolink)
        log.info("Auto Link Deleted '%s'", autolink.label)
        if autolink.peer is None:
            return []
        return [DetachAutoLink(autolink=autolink)]

    def autolink_attached(self, autolink: AutoLink[Connection], *, name: str,
                          address: str | None, handle: object, now: float = 0.0
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
        distribution, aspec = self._treatment(spec.address)
        if distribution is Distribution.UNAVAILABLE:
            distribution = Distribution.BALANCED
        key = classify(spec.address, router_id=self.router_id, phase=phase,
                       fallback=spec.fallback and spec.direction is Direction.OUT)
        record = self._bind(key, spec.address, distribution, aspec)
        assert record is not None, "an auto-link address is always a mobile address"
        if spec.direction is Direction.OUT:
            out = OutLink(link_id, conn, name=name, address=spec.address, record=record,
                          autolink=autolink, handle=handle)
            conn.out_links[link_id] = out
            return out, self._add_consumer(record, out, now)
        link = InLink(link_id, conn, name=name, address=spec.address, record=record,
                      phase=phase, fallback=spec.fallback, autolink=autolink, handle=handle)
        record.senders.append(link)
        demand_changed(record)
        conn.in_links[link_id] = link
        return link, []

    def autolink_detached(self, autolink: AutoLink[Connection], error: str,
                          now: float = 0.0) -> None:
        """The container detached (or refused) an auto-link: it has failed and is
        attached again when its retry is due.  Its link, if it had one, has
        been unbound with ``link_detached``."""
        self.autolinks.detached(autolink, error, now)
        log.info("Auto Link Activation Failed. %s", error or "detached by the peer")


__all__ = ["AutoLinking"]
