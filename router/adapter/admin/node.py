"""The management node in the router: requests in from the data path, responses out.

Owns the in-process consumers of ``$management`` and ``_local/$management``
(which ``_topo/0/<this router>/$management`` also reaches), handing each
request to the agent (``router.management.Agent``) after the wake-up that
delivered it, accepting and settling it, and routing the response to its
``reply-to`` like any message the router sends itself.  It decides nothing
about what a request means.

An in-process consumer is an ``OutLink`` with no proton link: it never has
credit, so the forwarder always queues for it, and its queue hands each
copy here instead of holding it.  The per-message path is unchanged.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

import attrs

from router.adapter.admin.workers import SiblingAgents
from router.adapter.forwarding.forwarder import Forwarder
from router.core import (
    Connection,
    ConnectionId,
    Effect,
    Fanout,
    InLink,
    LinkId,
    OutLink,
    Role,
    Router,
    Stream,
    Transfer,
)
from router.core.amqp import PeerProtocolError
from router.core.policy import Grant, Policy
from router.core.settlement import ACCEPTED, REJECTED
from router.management import Agent, Request, Response, decode_request, encode_response
from router.management.messages import decode_response
from router.management.workers import Plan, plan

log = logging.getLogger(__name__)

MANAGEMENT_ADDRESSES = ("$management", "_local/$management")

Queued = tuple[bytes, Transfer | Fanout | None]


class Inbox(deque[tuple[bytes | Stream, Transfer | Fanout | None]]):
    """The queue of an in-process consumer: what is appended is taken at once
    (a streamed message is refused before it gets here)."""

    def __init__(self, take: Callable[[bytes, Transfer | Fanout | None], None]) -> None:
        super().__init__()
        self._take = take

    def append(self, item: tuple[bytes | Stream, Transfer | Fanout | None]) -> None:
        data, ref = item
        assert isinstance(data, bytes)
        self._take(data, ref)


class ManagementNode:
    """The agent's place on the data path.

    Args:
        router: the routing core the in-process consumers are bound in.
        forwarder: settles requests and routes responses.
        agent: answers the requests.
        apply: carries out the effects a request has (auto-links to attach...).
        policy: who may make which request.
        raise_internal_errors: a request that fails unexpectedly is logged and
            dropped; tests raise its exception instead.
        siblings: the other workers' node ids, when the router runs on
            several (docs/scaling.md#workers): requests about the whole
            router are answered with theirs.
        group_id: the id of the router the workers are (what its ``router``
            entity shows).
        clock: monotonic seconds.
    """

    def __init__(self, router: Router, forwarder: Forwarder, agent: Agent,
                 apply: Callable[[list[Effect]], None], policy: Policy,
                 raise_internal_errors: bool = False, siblings: tuple[str, ...] = (),
                 group_id: str = "",
                 clock: Callable[[], float] | None = None) -> None:
        self.raise_internal_errors = raise_internal_errors
        self.router = router
        self.policy = policy
        self.forwarder = forwarder
        self.agent = agent
        self.apply = apply
        self.pending: list[Queued] = []
        self.dropped = 0
        self.conn = Connection(ConnectionId(0), strip_in=False, strip_out=False,
                               container_id=router.router_id, name="$management")
        self.consumers: list[OutLink] = []
        for address in MANAGEMENT_ADDRESSES:
            link = router.in_process_attached(self.conn, address, name=address)
            link.queue = Inbox(self._queued)
            self.consumers.append(link)
        # Responses enter routing as if a client had sent them, pre-settled.
        self.sender = InLink(LinkId(0), self.conn, name="$management-reply", address=None,
                             record=None)
        #: The other workers' agents (None: one worker); a part of the loop.
        self.workers: SiblingAgents | None = None
        if siblings:
            assert clock is not None
            self.workers = SiblingAgents(
                siblings=siblings, known=self.routed, attach=self.attach_answers,
                send=self.send, reply=self._reply, router_id=router.router_id,
                group_id=group_id, edge=router.edge_mode, clock=clock)

    # -- for the console, which asks other routers' agents ------------------------------

    def attach_answers(self, address: str, name: str,
                       take: Callable[[object, Response], None]) -> InLink:
        """An in-process consumer of ``address`` on the node's connection for
        the answers of management agents: each is accepted and given to
        ``take`` with its correlation-id (one that does not decode is logged
        and dropped); and the link the consumer's own requests enter routing
        on, pre-settled (``send``)."""
        def taken(data: bytes, ref: Transfer | Fanout | None) -> None:
            self.forwarder.consumed(ref, ACCEPTED)
            try:
                correlation, response = decode_response(data)
            except PeerProtocolError as exc:
                log.info("%s: undecodable answer dropped: %s", name, exc)
                return
            take(correlation, response)

        link = self.router.in_process_attached(self.conn, address, name=name)
        link.queue = Inbox(taken)
        return InLink(LinkId(0), self.conn, name=f"{name}-request", address=None, record=None)

    def send(self, sender: InLink, data: bytes) -> None:
        """Route a message of an in-process sender (``attach_answers``)."""
        self.forwarder.route(None, sender, data)

    def in_network(self, router_id: str) -> bool:
        """Whether ``router_id`` is a router of this one's network (any is,
        for a router that is in none)."""
        network = self.router.network
        return network is None or any(n.id == router_id for n in network.protocol.node_table())

    def routed(self, router_id: str) -> bool:
        """Whether this router has a route to ``router_id`` now (for an
        edge router: whether its uplink is up, which reaches every router)."""
        uplink = self.router.uplink
        if uplink is not None:
            return uplink.active is not None
        network = self.router.network
        return network is not None and any(
            n.id == router_id and n.cost is not None for n in network.protocol.node_table())

    def _queued(self, data: bytes, ref: Transfer | Fanout | None) -> None:
        self.pending.append((data, ref))

    def serve(self) -> None:
        """Answer every request delivered since the last call; one that fails
        unexpectedly is logged and costs nothing more."""
        pending, self.pending = self.pending, []
        for data, ref in pending:
            try:
                self._serve_one(data, ref)
            except Exception:
                log.exception("internal error answering a management request")
                if self.raise_internal_errors:
                    raise

    def _serve_one(self, data: bytes, ref: Transfer | Fanout | None) -> None:
        for link in self.consumers:
            link.delivered += 1
        try:
            request = decode_request(data, None if ref is None else ref.in_link.conn)
        except PeerProtocolError as exc:
            log.warning("management request dropped: %s", exc)
            self.forwarder.consumed(ref, REJECTED)
            return
        if request.reply_to is None:
            # Nowhere to send a status: the sender learns it from the outcome
            # (qdrouterd accepts such a request and drops it silently).
            self.dropped += 1
            log.info("management request without reply-to rejected")
            self.forwarder.consumed(ref, REJECTED)
            return
        self.forwarder.consumed(ref, ACCEPTED)
        operation = str(request.properties.get("operation", ""))
        refusal = self._refusal(ref, operation, str(request.properties.get("type", "")))
        if refusal is not None:
            log.info("management %s refused by policy: %s", operation, refusal)
            self._reply(request, Response(status=403, description=refusal))
            return
        how = plan(request.properties) if self.workers is not None else Plan.ALONE
        if how is Plan.QUERY:
            # Every worker's rows are paged once merged.
            props = {k: v for k, v in request.properties.items() if k not in ("offset", "count")}
            response = self.agent.handle(attrs.evolve(request, properties=props))
        else:
            response = self.agent.handle(request)
        if response.effects:
            self.apply(list(response.effects))
        if self.workers is not None:
            self.workers.answer(request, how, response)
        else:
            self._reply(request, response)

    def _reply(self, request: Request, response: Response) -> None:
        assert request.reply_to is not None
        reply = encode_response(response, to=request.reply_to,
                                correlation_id=request.correlation_id)
        self.forwarder.route(None, self.sender, reply)

    def _refusal(self, ref: Transfer | Fanout | None, operation: str,
                 entity_type: str) -> str | None:
        """Policy on a management request: why its sender may not make it."""
        grant = None
        if ref is not None:
            origin = ref.in_link.conn
            if origin.role is Role.INTER_ROUTER:
                return None  # the router the client is on applies its own policy
            conn = origin.handle
            grant = conn.grant if conn is not None and isinstance(conn.grant, Grant) else None
        denied = self.policy.may_manage(grant, operation, entity_type)
        return None if denied is None else denied.reason
