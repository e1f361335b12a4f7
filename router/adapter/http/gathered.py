"""``/metrics`` of a router on several workers (docs/scaling.md#workers):
the whole router's series, made from management's answer for it.

Owns asking this worker's own management node, from the in-process sender
``$metrics``, the QUERYs that management answers for the whole router
(``router``, ``router.link``, ``router.address``, the connections' roles,
the TCP bridges:
the node gathers them from every worker), and rendering the exposition
from those rows once every answer is in.  The ``process_*`` series
are the answering worker's.  A part of the loop: due when an answer is
late (then the worker's own exposition is sent).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from router.adapter.admin.node import ManagementNode
from router.adapter.http.metrics import Exposition
from router.core import Role
from router.management import Request, Response
from router.management.messages import encode_request
from router.management.schema import PREFIX
from router.management.statistics import (
    AddressStatistics,
    LinkStatistics,
    RouterStatistics,
    TcpBridgeStatistics,
    declared,
)

log = logging.getLogger(__name__)

#: What ``/metrics`` is made of: management's answers for these types.
_TYPES = ("router", "router.link", "router.address", "connection", "tcpListener",
          "tcpConnector")
#: How long the answers may take before the worker's own metrics are sent.
TIMEOUT_S = 10.0

Rows = list[dict[str, object]]


class RowsView:
    """The router's state as management rows describe it (a ``RouterView``)."""

    def __init__(self, rows: dict[str, Rows]) -> None:
        self.rows = rows

    def statistics(self) -> RouterStatistics:
        [row] = self.rows["router"][:1] or [{}]
        return RouterStatistics(**_fields(RouterStatistics, row))

    def connection_roles(self) -> Iterable[Role]:
        return [Role(str(row.get("role"))) for row in self.rows["connection"]
                if str(row.get("role")) in _ROLES]

    def links(self) -> Iterable[LinkStatistics]:
        return [LinkStatistics(**_fields(LinkStatistics, row)) for row in self.rows["router.link"]]

    def addresses(self) -> Iterable[AddressStatistics]:
        return [AddressStatistics(**_fields(AddressStatistics, row))
                for row in self.rows["router.address"]]

    def tcp_bridges(self) -> Iterable[dict[str, object]]:
        return [{"kind": kind, "name": row.get("name"), "address": row.get("address"),
                 **_fields(TcpBridgeStatistics, row)}
                for kind in ("tcpListener", "tcpConnector") for row in self.rows.get(kind, [])]


_ROLES = frozenset(role.value for role in Role)


def _fields(record: type, row: dict[str, object]) -> dict[str, Any]:
    """``row``'s values of ``record``'s attributes (0 or None where absent)."""
    return {name: row.get(name, 0 if stat.type == "integer" else None)
            for name, stat in declared(record)}


@attrs.define
class _Scrape:
    done: Callable[[bytes], None]
    deadline: float
    answers: dict[str, Rows] = attrs.Factory(dict)


class GatheredMetrics:
    """``/metrics`` for the whole router: call it with what to do with the text.

    Args:
        node: this worker's management node.
        local: this worker's own exposition (sent when an answer is late).
        router_id: this worker's node id (where the answers come back).
        clock: monotonic seconds.
    """

    def __init__(self, node: ManagementNode, local: Exposition, router_id: str,
                 clock: Callable[[], float]) -> None:
        self.node = node
        self.local = local
        self.clock = clock
        where = "_edge" if node.router.edge_mode else "_topo/0"
        self.reply_to = f"amqp:/{where}/{router_id}/$metrics"
        self.sender = node.attach_answers("_local/$metrics", "$metrics", self._answered)
        self.scrapes: dict[int, _Scrape] = {}
        self._ids = itertools.count(1)

    def __call__(self, done: Callable[[bytes], None]) -> None:
        scrape = next(self._ids)
        self.scrapes[scrape] = _Scrape(done, self.clock() + TIMEOUT_S)
        for i, entity_type in enumerate(_TYPES):
            names = ["role"] if entity_type == "connection" else []
            request = Request(properties={"operation": "QUERY", "type": "org.amqp.management",
                                          "name": "self", "entityType": PREFIX + entity_type},
                              body={"attributeNames": names}, reply_to=self.reply_to,
                              correlation_id=scrape * len(_TYPES) + i)
            self.node.send(self.sender, encode_request(request, to="amqp:/_local/$management"))

    def _answered(self, correlation: object, response: Response) -> None:
        if not isinstance(correlation, int):
            return
        scrape = self.scrapes.get(correlation // len(_TYPES))
        body = response.body
        if scrape is None or not isinstance(body, dict):
            return
        names = body.get("attributeNames")
        results = body.get("results")
        if not isinstance(names, list) or not isinstance(results, list):
            return
        scrape.answers[_TYPES[correlation % len(_TYPES)]] = [
            dict(zip(names, row, strict=True)) for row in results if isinstance(row, list)]
        if len(scrape.answers) == len(_TYPES):
            del self.scrapes[correlation // len(_TYPES)]
            whole = Exposition(RowsView(scrape.answers))
            scrape.done(whole())

    # -- the loop's part -----------------------------------------------------------------

    def next_deadline(self) -> float | None:
        return min((s.deadline for s in self.scrapes.values()), default=None)

    def tick(self, now: float) -> None:
        for key, scrape in list(self.scrapes.items()):
            if now >= scrape.deadline:
                del self.scrapes[key]
                log.warning("metrics: management did not answer within %g s; this worker's "
                            "own metrics sent", TIMEOUT_S)
                scrape.done(self.local())

    def close(self) -> None:
        self.scrapes.clear()
