"""The auto-links of one router and the route-container connections that serve them.

Owns which auto-link is attached on which connection
(docs/brokers.md#the-life-of-an-auto-link): an auto-link is attached on
every open connection that serves it, as qdrouterd attaches it, each with a
life of its own (``autolink.lifecycle.AutoLink``); when a serving connection
opens, every auto-link it serves is attached there; when it closes, the
links on it are gone; a failed link is attached again on its connection
when its retry is due.  It must not know what a connection or a link is:
callers attach the links this table returns.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

import attrs

from addressing import RouteContainer, serves
from autolink.lifecycle import AutoLink, AutoLinkState
from autolink.spec import AutoLinkError, AutoLinkSpec

log = logging.getLogger(__name__)

P = TypeVar("P", bound=RouteContainer)


def _served(spec: AutoLinkSpec, peer: RouteContainer) -> bool:
    return serves(peer, container_id=spec.container_id, connection=spec.connection)


#: The state an auto-link shows when its links are in several: the most advanced.
_SHOWN = (AutoLinkState.ACTIVE, AutoLinkState.ATTACHING, AutoLinkState.FAILED)


@attrs.define(eq=False)
class AutoLinkEntity(Generic[P]):
    """One configured auto-link (a ``router.config.autoLink`` entity) and its
    links, one per open connection that serves it, in the order they opened."""

    spec: AutoLinkSpec
    identity: str
    links: list[AutoLink[P]] = attrs.field(factory=list)

    @property
    def label(self) -> str:
        """How logs name it: its name, else its identity (as qdrouterd)."""
        return self.spec.name or self.identity

    @property
    def state(self) -> AutoLinkState:
        """``operStatus``: ``active`` when any of its links is, else
        ``attaching``, else ``failed``; ``inactive`` without a connection."""
        states = {al.state for al in self.links}
        return next((s for s in _SHOWN if s in states), AutoLinkState.INACTIVE)

    @property
    def last_error(self) -> str | None:
        """``lastError``: why a link of it last failed, while one is failed."""
        return next((al.last_error for al in reversed(self.links) if al.last_error), None)

    @property
    def link_id(self) -> int | None:
        """``linkRef``: the router's link of its first active link."""
        return next((al.link_id for al in self.links if al.link_id is not None), None)


class AutoLinkTable(Generic[P]):
    """Configured auto-links, in the order they were added.

    Args:
        specs: the configured auto-links.
        ids: where identities come from (shared with the router's other
            configuration entities, as qdrouterd numbers them); ``1, 2, ...`` by default.
    """

    def __init__(self, specs: Iterable[AutoLinkSpec] = (), *,
                 ids: Iterator[int] | None = None) -> None:
        self._entities: list[AutoLinkEntity[P]] = []
        self._peers: list[P] = []
        # Failed links waiting for their retry (``next_deadline`` is asked on
        # every turn of the event loop, so it looks only at these).
        self._retrying: list[AutoLink[P]] = []
        self._ids = itertools.count(1) if ids is None else ids
        for spec in specs:
            self.add(spec)

    def __iter__(self) -> Iterator[AutoLinkEntity[P]]:
        return iter(self._entities)

    def __len__(self) -> int:
        return len(self._entities)

    def add(self, spec: AutoLinkSpec) -> AutoLinkEntity[P]:
        """Add an auto-link; it has no link until ``connection_opened`` or ``activate``.

        Raises:
            AutoLinkError: another auto-link has the same name.
        """
        if spec.name is not None and any(e.spec.name == spec.name for e in self._entities):
            raise AutoLinkError(f"name conflicts with an existing entity: {spec.name!r}")
        entity: AutoLinkEntity[P] = AutoLinkEntity(spec=spec, identity=str(next(self._ids)))
        self._entities.append(entity)
        return entity

    def activate(self, entity: AutoLinkEntity[P]) -> list[AutoLink[P]]:
        """An auto-link added at run time: its links on the open connections
        that serve it (each now attaching there)."""
        return [self._attach(entity, peer) for peer in self._peers
                if _served(entity.spec, peer)]

    def remove(self, entity: AutoLinkEntity[P]) -> list[AutoLink[P]]:
        """Delete an auto-link; returns its links, which are the caller's to detach."""
        self._entities.remove(entity)
        self._retrying = [al for al in self._retrying if al not in entity.links]
        links, entity.links = entity.links, []
        return links

    def connection_opened(self, peer: P) -> list[AutoLink[P]]:
        """A route-container connection opened: the links to attach on it,
        one for each auto-link it serves."""
        self._peers.append(peer)
        return [self._attach(entity, peer) for entity in self._entities
                if _served(entity.spec, peer)]

    def detached(self, autolink: AutoLink[P], error: str, now: float) -> None:
        """The container detached (or refused) a link: failed, retried later."""
        autolink.detached(error, now)
        self._retrying.append(autolink)

    def connection_closed(self, peer: P) -> None:
        """A connection closed: the links on it are gone (inactive)."""
        self._peers = [p for p in self._peers if p is not peer]
        self._retrying = [al for al in self._retrying if al.peer is not peer]
        for entity in self._entities:
            gone = [al for al in entity.links if al.peer is peer]
            for autolink in gone:
                autolink.disconnected()
            if gone:
                entity.links = [al for al in entity.links if al not in gone]

    def tick(self, now: float) -> list[AutoLink[P]]:
        """Failed links whose retry is due, to be attached again on their connection."""
        due = [al for al in self._retrying if al.retry_at is not None and al.retry_at <= now]
        if not due:
            return []
        self._retrying = [al for al in self._retrying if al not in due]
        attach = []
        for autolink in due:
            peer = autolink.peer
            if autolink.state is not AutoLinkState.FAILED or peer is None:
                continue
            autolink.connected(peer)
            attach.append(autolink)
        return attach

    def next_deadline(self) -> float | None:
        """When ``tick`` has work: the earliest retry of a failed link."""
        if not self._retrying:
            return None
        return min(al.retry_at for al in self._retrying if al.retry_at is not None)

    def _attach(self, entity: AutoLinkEntity[P], peer: P) -> AutoLink[P]:
        autolink: AutoLink[P] = AutoLink(spec=entity.spec, identity=entity.identity)
        autolink.connected(peer)
        entity.links.append(autolink)
        return autolink


__all__ = ["AutoLinkEntity", "AutoLinkTable"]
