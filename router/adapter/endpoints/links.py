"""The links the router serves, by their proton handle.

Owns the table from a proton link to the core's link record (an incoming
or outgoing routed-by-message link, or one end of a link-routed pair),
forgetting a link that went (its deliveries settled by the forwarder or
the relay, its counts kept in the router-wide totals), and the client
links admitted under vhost policy.  The per-message dispatch reads the
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
    """The link table.

    Args:
        forwarder: settles what a departing message-routed link held.
        relay: settles what a departing link-routed link held.
    """

    def __init__(self, forwarder: Forwarder, relay: Relay) -> None:
        self.forwarder = forwarder
        self.relay = relay
        #: Every served link by its proton handle.
        self.table: dict[Any, Link] = {}
        #: Router-wide counters of endpoint links that are gone (management).
        self.retired = dict.fromkeys(TALLY_KEYS, 0)
        #: Client links admitted by vhost policy (counted until they go).
        self.policy_links: set[Any] = set()

    def add(self, lptr: Any, link: Link) -> None:
        self.table[lptr] = link

    def forget(self, link: Link) -> None:
        """``link`` is gone: what it held is settled, its counts kept."""
        if isinstance(link, OutLink):
            self.forwarder.lose_outgoing(link)
        elif isinstance(link, InLink):
            self.forwarder.lose_incoming(link)
        else:
            self.relay.routed_gone(link)
        link.handle = None
        link.conn.delivered_gone += link.delivered
        tally(self.retired, link)

    def pop(self, lptr: Any) -> Link | None:
        """Remove ``lptr`` from the table and forget its link, if it had one."""
        link = self.table.pop(lptr, None)
        if link is not None:
            self.forget(link)
        return link


__all__ = ["Link", "Links", "sample_credit"]
