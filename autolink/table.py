"""The auto-links of one router and the route-container connections that serve them.

Owns which auto-link is attached on which connection
(docs/brokers.md#the-life-of-an-auto-link): when a
serving connection opens, every inactive auto-link it serves is attached
there; when it closes, its auto-links go inactive and move at once to
another open connection that serves them, if any; failed auto-links are
attached again when their retry is due.  The life of each auto-link is
``autolink.lifecycle``'s.

Each auto-link has one link at a time (qdrouterd attaches one per matching
connection on a retry; one is what the address needs, and several
connections to the same container are then spares).  It must not know what
a connection or a link is: callers attach the links this table returns.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

from addressing import RouteContainer, serves
from autolink.lifecycle import AutoLink, AutoLinkState
from autolink.spec import AutoLinkError, AutoLinkSpec

log = logging.getLogger(__name__)

P = TypeVar("P", bound=RouteContainer)


def _served(spec: AutoLinkSpec, peer: RouteContainer) -> bool:
    return serves(peer, container_id=spec.container_id, connection=spec.connection)


class AutoLinkTable(Generic[P]):
    """Configured auto-links, in the order they were added.

    Args:
        specs: the configured auto-links.
        ids: where identities come from (shared with the router's other
            configuration entities, as qdrouterd numbers them); ``1, 2, ...`` by default.
    """

    def __init__(self, specs: Iterable[AutoLinkSpec] = (), *,
                 ids: Iterator[int] | None = None) -> None:
        self._links: list[AutoLink[P]] = []
        self._peers: list[P] = []
        # Failed auto-links waiting for their retry (``next_deadline`` is asked
        # on every turn of the event loop, so it looks only at these).
        self._retrying: list[AutoLink[P]] = []
        self._ids = itertools.count(1) if ids is None else ids
        for spec in specs:
            self.add(spec)

    def __iter__(self) -> Iterator[AutoLink[P]]:
        return iter(self._links)

    def __len__(self) -> int:
        return len(self._links)

    def add(self, spec: AutoLinkSpec) -> AutoLink[P]:
        """Add an auto-link; it stays inactive until ``connection_opened``.

        Raises:
            AutoLinkError: another auto-link has the same name.
        """
        if spec.name is not None and any(al.spec.name == spec.name for al in self._links):
            raise AutoLinkError(f"name conflicts with an existing entity: {spec.name!r}")
        autolink: AutoLink[P] = AutoLink(spec=spec, identity=str(next(self._ids)))
        self._links.append(autolink)
        return autolink

    def activate(self, autolink: AutoLink[P]) -> bool:
        """An auto-link added at run time: True when an open connection serves
        it (it is then attaching there)."""
        peer = self._serving(autolink.spec)
        if peer is None:
            return False
        autolink.connected(peer)
        return True

    def remove(self, autolink: AutoLink[P]) -> None:
        """Delete an auto-link; its link, if any, is the caller's to detach."""
        self._links.remove(autolink)
        self._retrying = [al for al in self._retrying if al is not autolink]

    def connection_opened(self, peer: P) -> list[AutoLink[P]]:
        """A route-container connection opened: the auto-links to attach on it."""
        self._peers.append(peer)
        attach = []
        for autolink in self._links:
            if autolink.state is AutoLinkState.INACTIVE and _served(autolink.spec, peer):
                autolink.connected(peer)
                attach.append(autolink)
        return attach

    def detached(self, autolink: AutoLink[P], error: str, now: float) -> None:
        """The container detached (or refused) ``autolink``: failed, retried later."""
        autolink.detached(error, now)
        self._retrying.append(autolink)

    def connection_closed(self, peer: P) -> list[AutoLink[P]]:
        """A connection closed: its auto-links go inactive; those another open
        connection serves are returned, to be attached there."""
        self._peers = [p for p in self._peers if p is not peer]
        attach = []
        self._retrying = [al for al in self._retrying if al.peer is not peer]
        for autolink in self._links:
            if autolink.peer is not peer:
                continue
            autolink.disconnected()
            other = self._serving(autolink.spec)
            if other is not None:
                autolink.connected(other)
                attach.append(autolink)
        return attach

    def tick(self, now: float) -> list[AutoLink[P]]:
        """Failed auto-links whose retry is due, to be attached again."""
        attach: list[AutoLink[P]] = []
        due = [al for al in self._retrying if al.retry_at is not None and al.retry_at <= now]
        if not due:
            return attach
        self._retrying = [al for al in self._retrying if al not in due]
        for autolink in due:
            if autolink.state is not AutoLinkState.FAILED:
                continue
            peer = self._serving(autolink.spec)
            if peer is None:  # cannot happen while the failed link's connection is open
                autolink.disconnected()
                continue
            autolink.connected(peer)
            attach.append(autolink)
        return attach

    def next_deadline(self) -> float | None:
        """When ``tick`` has work: the earliest retry of a failed auto-link."""
        if not self._retrying:
            return None
        return min(al.retry_at for al in self._retrying if al.retry_at is not None)

    def _serving(self, spec: AutoLinkSpec) -> P | None:
        for peer in self._peers:
            if _served(spec, peer):
                return peer
        return None


__all__ = ["AutoLinkTable"]
