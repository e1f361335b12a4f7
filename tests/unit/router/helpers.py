"""A router core joined to a small network in memory, for unit tests.

Topology (costs on the edges)::

        B
      1/ \\1
      A   C
      5\\ /5
        D
"""

from __future__ import annotations

import itertools

from addressing import AddressSpec, AddressTable
from linkroute import LinkRouteSpec
from router.core import Connection, ConnectionId, Router
from router.core.records import OutLink, RouterLink
from router.core.routing import RoutesChanged, compute_routes

LINK_STATES = {
    "A": {"B": 1, "D": 5},
    "B": {"A": 1, "C": 1},
    "C": {"B": 1, "D": 5},
    "D": {"A": 5, "C": 5},
}


def interior(*specs: AddressSpec, link_routes: tuple[LinkRouteSpec, ...] = ()) -> Router:
    table = AddressTable()
    for spec in specs:
        table.add(spec)
    counter = itertools.count()
    return Router(router_id="A", addresses=table, token=lambda: f"t{next(counter)}",
                  interior=True, instance=1, link_routes=link_routes)


def neighbour(router: Router, conn_id: int, cost: int) -> RouterLink:
    conn = Connection(ConnectionId(conn_id))
    network = router.network
    assert network is not None
    link, _ = network.control_link_attached(conn, outgoing=True, name=f"ctl{conn_id}",
                                            handle=object(), cost=cost, now=0.0)
    assert isinstance(link, OutLink)
    rlink = network.link_of(conn)
    assert rlink is not None
    for _ in range(10):
        network.data_link_attached(conn, outgoing=True, name="d", handle=object(), cost=cost)
    return rlink


def converge(router: Router) -> tuple[RouterLink, RouterLink]:
    to_b = neighbour(router, 1, 1)
    to_d = neighbour(router, 2, 5)
    assert router.network is not None
    router.network.apply_protocol([RoutesChanged(routes=compute_routes(LINK_STATES, "A"),
                                         neighbors={"B": 1, "D": 2})], 0.0)
    return to_b, to_d
