"""The management node's side of a router on several workers
(docs/scaling.md#workers): asking the sibling workers' agents, and
answering once they have.

Owns the requests in flight to the siblings (sent from the in-process
sender ``$workers`` to ``_topo/0/<sibling>/$management`` through the
workers' router network, or for an edge router's workers to
``_edge/<sibling>/$management`` through the interior; answered to
``$workers`` at this worker's address of the same kind), their deadline,
and the answer made of theirs and this worker's
(``router.management.workers`` decides and merges).  A part of the loop:
due when a sibling is late.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

import attrs

from router.core import InLink
from router.management import Request, Response
from router.management.messages import encode_request
from router.management.workers import (
    LOCAL,
    Plan,
    merge_every,
    merge_first,
    merge_query,
    queried_type,
)

log = logging.getLogger(__name__)

#: How long a sibling may take to answer before the answer goes without it.
SIBLING_TIMEOUT_S = 5.0


@attrs.define
class _Asked:
    request: Request
    plan: Plan
    local: Response
    answers: list[Response]
    waiting: int
    deadline: float


class SiblingAgents:
    """The other workers' agents, asked for the requests that are about the
    whole router.

    Args:
        siblings: the other workers' node ids.
        known: whether a node is in the router network now (one that is not
            is not asked: a worker starting again).
        attach: makes the in-process consumer of this worker's answers
            (``ManagementNode.attach_answers``).
        send: routes a request from the in-process sender.
        reply: sends the answer to the request's sender.
        router_id: this worker's node id.
        group_id: the router's id, which its ``router`` entity shows.
        edge: the workers are edge routers (reached through the interior).
        clock: monotonic seconds.
    """

    def __init__(self, *, siblings: tuple[str, ...], known: Callable[[str], bool],
                 attach: Callable[[str, str, Callable[[object, Response], None]], InLink],
                 send: Callable[[InLink, bytes], None],
                 reply: Callable[[Request, Response], None], router_id: str,
                 group_id: str, edge: bool, clock: Callable[[], float]) -> None:
        self.siblings = siblings
        self.known = known
        self.send = send
        self.reply = reply
        self.group_id = group_id
        self.clock = clock
        self.prefix = "amqp:/_edge/" if edge else "amqp:/_topo/0/"
        self.reply_to = f"{self.prefix}{router_id}/$workers"
        self.sender = attach("_local/$workers", "$workers", self._answered)
        self.asked: dict[int, _Asked] = {}
        self._ids = itertools.count(1)

    def answer(self, request: Request, plan: Plan, local: Response) -> None:
        """Answer ``request``, which this worker answered ``local``: at once,
        or once the siblings the plan asks have answered."""
        siblings = [s for s in self.siblings if self.known(s)]
        if plan is Plan.ALONE or (plan is Plan.FIRST and local.status != 404) \
                or (plan is not Plan.FIRST and not local.ok) or not siblings:
            self.reply(request, local)
            return
        correlation = next(self._ids)
        self.asked[correlation] = _Asked(request, plan, local, [], len(siblings),
                                         self.clock() + SIBLING_TIMEOUT_S)
        properties = {**request.properties, LOCAL: True}
        if plan is Plan.QUERY:
            # Every worker's rows, paged once merged.
            properties.pop("offset", None)
            properties.pop("count", None)
        asked = attrs.evolve(request, properties=properties, reply_to=self.reply_to,
                             correlation_id=correlation, origin=None)
        for sibling in siblings:
            self.send(self.sender, encode_request(
                asked, to=f"{self.prefix}{sibling}/$management"))

    def _answered(self, correlation: object, response: Response) -> None:
        asked = self.asked.get(correlation) if isinstance(correlation, int) else None
        if asked is None or not isinstance(correlation, int):
            return  # late: answered without it
        asked.answers.append(response)
        asked.waiting -= 1
        if asked.waiting == 0 or (asked.plan is Plan.FIRST and asked.answers[-1].status != 404):
            del self.asked[correlation]
            self._finish(asked)

    def _finish(self, asked: _Asked) -> None:
        local = asked.local
        if asked.plan is Plan.FIRST:
            self.reply(asked.request, merge_first(asked.answers) or local)
            return
        if asked.plan is Plan.EVERY:
            self.reply(asked.request, merge_every(local, asked.answers))
            return
        if asked.plan is Plan.EVERYWHERE:
            for failed in (a for a in asked.answers if not a.ok):
                log.warning("a worker did not make the change: %d %s", failed.status,
                            failed.description)
            self.reply(asked.request, local)
            return
        entity_type = queried_type(asked.request.properties) or ""
        bodies = [local.body, *(a.body for a in asked.answers if a.ok)]
        body = merge_query(entity_type, bodies, self.group_id)
        self.reply(asked.request, attrs.evolve(local, body=_paged(body, asked.request)))

    # -- the loop's part -----------------------------------------------------------------

    def next_deadline(self) -> float | None:
        return min((a.deadline for a in self.asked.values()), default=None)

    def tick(self, now: float) -> None:
        for correlation, asked in list(self.asked.items()):
            if now >= asked.deadline:
                del self.asked[correlation]
                log.warning("%d of %d workers did not answer a management %s within %g s",
                            asked.waiting, len(self.siblings),
                            asked.request.properties.get("operation"), SIBLING_TIMEOUT_S)
                self._finish(asked)

    def close(self) -> None:
        self.asked.clear()


def _paged(body: object, request: Request) -> object:
    """The QUERY's ``offset`` and ``count`` applied to the merged rows."""
    if not isinstance(body, dict) or not isinstance(body.get("results"), list):
        return body
    offset, count = request.properties.get("offset"), request.properties.get("count")
    rows = body["results"]
    start = offset if isinstance(offset, int) and offset > 0 else 0
    end = start + count if isinstance(count, int) and count >= 0 else None
    return {**body, "results": rows[start:end]}
