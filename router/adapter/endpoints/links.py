"""The links the router serves, by their proton handle.

Owns the table from a proton link to the core's link record (an incoming
or outgoing routed-by-message link, or one end of a link-routed pair) with
the client links admitted under vhost policy (``Links``), and forgetting a
link that went (``Departures``: its deliveries settled by the forwarder or
the relay, its counts kept in the router-wide totals).  The per-message dispatch reads the
table on every delivery; everything else here runs per attach or detach.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from router.adapter.forwarding.forwarder import Forwarder
from router.adapter.forwarding.relay import Relay
from router.adapter.pn import lib
from router.core import TALLY_KEYS, Connection, InLink, OutLink, RoutedEnd, tally

Link = InLink | OutLink | RoutedEnd


def sample_credit(conns: Iterable[Connection]) -> list[Connection]:
    """Note the credit each producer's link has from the router now
    (``InLink.credit``, read by the sweep and by management; the
    per-message path keeps none) and return the connections."""
    conns = list(conns)
    credit = lib.pn_link_credit
    for conn in conns:
        for il in conn.in_links.values():
            if il.handle is not None:
                il.credit = credit(il.handle)
    return conns


class Links:
    """The link table: every link the router serves by its proton handle,
    the router-wide counts of those gone, and the client links admitted by
    vhost policy.  Removing a link that may hold deliveries is
    ``Departures``'s; ``remove`` is for one that holds nothing."""

    def __init__(self) -> None:
        #: Every served link by its proton handle.
        self.table: dict[Any, Link] = {}
        #: Router-wide counters of endpoint links that are gone (management).
        self.retired = dict.fromkeys(TALLY_KEYS, 0)
        #: Client links admitted by vhost policy (counted until they go).
        self.policy_links: set[Any] = set()

    def add(self, lptr: Any, link: Link) -> None:
        self.table[lptr] = link

    def retire(self, link: Link) -> None:
        """``link`` is gone: its counts join the totals."""
        link.handle = None
        link.conn.delivered_gone += link.delivered
        tally(self.retired, link)

    def remove(self, lptr: Any) -> None:
        """Remove a link that holds nothing (an idle streaming link the router closes)."""
        link = self.table.pop(lptr, None)
        if link is not None:
            self.retire(link)


class Departures:
    """Links that go: what each held is settled by the part that carried it
    (docs/routing.md#when-a-link-or-connection-goes), then it leaves the table.

    Args:
        links: the link table.
        forwarder: settles what a message-routed link held.
        relay: settles what a link-routed end held.
    """

    def __init__(self, links: Links, forwarder: Forwarder, relay: Relay) -> None:
        self.links = links
        self.forwarder = forwarder
        self.relay = relay

    def forget(self, link: Link) -> None:
        """``link`` is gone: what it held is settled, its counts kept."""
        if isinstance(link, OutLink):
            self.forwarder.lose_outgoing(link)
        elif isinstance(link, InLink):
            self.forwarder.lose_incoming(link)
        else:
            self.relay.routed_gone(link)
        self.links.retire(link)

    def settle_routed(self, end: RoutedEnd) -> None:
        """What a link-routed end held is settled now, though it stays in the
        table until the other side's answer to its detach comes."""
        self.relay.routed_gone(end)

    def drop(self, lptr: Any, link: Link) -> None:
        """``link``, served as ``lptr``, went with its connection: out of the
        table, and forgotten."""
        self.links.table.pop(lptr, None)
        self.forget(link)

    def pop(self, lptr: Any) -> Link | None:
        """Remove ``lptr`` from the table and forget its link, if it had one."""
        link = self.links.table.pop(lptr, None)
        if link is not None:
            self.forget(link)
        return link


__all__ = ["Departures", "Link", "Links", "sample_credit"]
