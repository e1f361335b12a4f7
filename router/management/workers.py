"""Management of a router on several workers (docs/scaling.md#workers): which
requests the worker that receives one asks its siblings too, and how their
answers make one.

Owns the decision (``plan``) and the merging (``merge_query``,
``merge_first``); must not send anything (``router.adapter.admin.workers``
asks the siblings and waits).  A request a worker sends a sibling carries
the application property ``LOCAL``, and is answered for that worker alone.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from router.management.agent import Response
from router.management.schema import PREFIX
from router.management.statistics import (
    AddressStatistics,
    BindingStatistics,
    ExchangeStatistics,
    LinkStatistics,
    RouterStatistics,
    declared,
)

__all__ = ["LOCAL", "Plan", "merge_every", "merge_first", "merge_query", "plan", "queried_type"]

#: On a request a worker sends a sibling: answer for yourself alone.
LOCAL: Final = "hopWorkerLocal"


class Plan(enum.Enum):
    """What the worker that received a request does with its siblings."""

    #: Answered by this worker alone (its answer is the router's).
    ALONE = "alone"
    #: A QUERY: every worker's rows, merged into one answer.
    QUERY = "query"
    #: A change to the router's configuration: made on every worker; the
    #: answer is this worker's.
    EVERYWHERE = "everywhere"
    #: About one entity of one worker (a connection, a link): this
    #: worker's answer unless it has no such entity (404), then the first
    #: sibling's that has.
    FIRST = "first"
    #: About one entity every worker has its own of (another router, as a
    #: node of the network): found only once every worker has it, so that
    #: a client of any worker can use it (the first answer that did not
    #: find it otherwise).
    EVERY = "every"


#: Configuration every worker has a copy of that counts what it does: a
#: QUERY shows one row of each, named alike on every worker, its counts summed.
_COUNTED_CONFIGURATION: Final = frozenset({"router.config.exchange", "router.config.binding"})
#: Entities each worker has its own of: a QUERY shows every worker's.
_PER_WORKER: Final = frozenset({"connection", "router.link", "router.address", "router",
                                "tcpListener", "tcpConnector", "tcpConnection"}) \
    | _COUNTED_CONFIGURATION
#: Configuration: made, changed and deleted on every worker.
_CONFIGURATION: Final = frozenset({
    "router.config.address", "router.config.linkRoute", "router.config.autoLink",
    "connector", "log", "vhost", "sslProfile", "address", "linkRoute", "autoLink",
    "exchange", "binding",
}) | _COUNTED_CONFIGURATION
_WRITES: Final = frozenset({"CREATE", "UPDATE", "DELETE"})

#: Attributes that every worker sees alike (the other routers with
#: consumers of an address, known to each worker through the router
#: network): where rows are one, the largest count and every router named.
_SEEN_BY_EACH: Final = frozenset({"remoteCount", "remoteHostRouters"})

#: Attributes summed where rows of several workers are one (a count or a
#: number of things now); other attributes are the first worker's.
_SUMMED: Final = {
    "router": frozenset(name for name, stat in declared(RouterStatistics)
                        if stat.graph or stat.metric is not None)
    - {"addrCount", "nodeCount", "linkRouteCount", "autoLinkCount", "uptimeSeconds"},
    "router.address": frozenset(name for name, stat in declared(AddressStatistics)
                                if stat.graph or stat.metric is not None) - _SEEN_BY_EACH,
    "router.link": frozenset(name for name, stat in declared(LinkStatistics)
                             if stat.graph or stat.metric is not None),
    "router.config.exchange": frozenset(name for name, stat in declared(ExchangeStatistics)
                                        if stat.graph) - {"bindingCount"},
    "router.config.binding": frozenset(name for name, _ in declared(BindingStatistics)),
}


def _short(type_name: object) -> str | None:
    if not isinstance(type_name, str):
        return None
    return type_name[len(PREFIX):] if type_name.startswith(PREFIX) else type_name


def queried_type(properties: Mapping[str, object]) -> str | None:
    """The short entity type a request is about: ``entityType`` on a
    QUERY of the management node, else ``type``."""
    entity_type = _short(properties.get("entityType"))
    if entity_type is not None:
        return entity_type
    named = _short(properties.get("type"))
    return None if named in ("org.amqp.management", "management") else named


def plan(properties: Mapping[str, object]) -> Plan:
    """What to do with a request of these application properties."""
    if properties.get(LOCAL):
        return Plan.ALONE
    operation = str(properties.get("operation", "")).upper()
    entity_type = queried_type(properties)
    if entity_type is None:
        return Plan.ALONE
    if operation == "QUERY" and entity_type in _PER_WORKER:
        return Plan.QUERY
    if operation in _WRITES and entity_type in _CONFIGURATION:
        return Plan.EVERYWHERE
    if operation in ("READ", "UPDATE", "DELETE") and entity_type in ("connection", "router.link"):
        return Plan.FIRST
    if operation == "READ" and entity_type == "router.node":
        return Plan.EVERY
    return Plan.ALONE


def merge_query(entity_type: str, bodies: Sequence[object], router_id: str = "") -> object:
    """Every worker's QUERY body (``{"attributeNames": [...], "results":
    [[...], ...]}``, the asking worker's first) as one: rows of the same
    ``identity`` (an address, the router) made one, their counts summed;
    the ``router`` entity named ``router_id``."""
    first = bodies[0]
    if not isinstance(first, dict):
        return first
    names = first.get("attributeNames")
    if not isinstance(names, list):
        return first
    rows: list[list[object]] = []
    for body in bodies:
        if isinstance(body, dict) and body.get("attributeNames") == names:
            rows.extend(r for r in body.get("results", []) if isinstance(r, list))
    summed = _SUMMED.get(entity_type)
    # Identities of configuration are drawn by each worker; names are alike.
    keys = ("name", "identity") if entity_type in _COUNTED_CONFIGURATION \
        else ("identity", "name")
    key = next((names.index(k) for k in keys if k in names), None)
    if summed is not None and (key is not None or entity_type == "router"):
        rows = _summed(names, rows, summed, None if entity_type == "router" else key)
    if entity_type == "router" and router_id:
        for row in rows:
            for field in ("id", "name"):
                if field in names:
                    row[names.index(field)] = router_id
    return {**first, "results": rows}


def merge_first(responses: Iterable[Response]) -> Response | None:
    """The first answer that found the entity (anything but 404), if any."""
    return next((r for r in responses if r.status != 404), None)


def merge_every(local: Response, responses: Iterable[Response]) -> Response:
    """``local`` if every worker found the entity, else the first answer
    that did not."""
    return next((r for r in responses if not r.ok), local)


def _summed(names: list[object], rows: list[list[object]], summed: frozenset[str],
            key: int | None) -> list[list[object]]:
    """Rows with the same value at ``key`` (every row, for None) made one."""
    add = [i for i, name in enumerate(names) if name in summed]
    alike = [i for i, name in enumerate(names) if name in _SEEN_BY_EACH]
    merged: dict[object, list[object]] = {}
    for row in rows:
        at = None if key is None else row[key]
        have = merged.get(at)
        if have is None:
            merged[at] = list(row)
            continue
        for i in add:
            a, b = have[i], row[i]
            if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                have[i] = a + b
        for i in alike:
            a, b = have[i], row[i]
            if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                have[i] = max(a, b)
            elif isinstance(a, list) and isinstance(b, list):
                have[i] = a + [n for n in b if n not in a]
    return list(merged.values())
