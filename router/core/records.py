"""Mutable holders the data plane works on: connections, links, address
records and in-flight transfers.

Owns the state that changes per message (credit, queues, unsettled maps).
The objects are plain ``__slots__`` classes rather than attrs classes: they
are touched tens of thousands of times a second and must stay cheap.  They
hold an opaque ``handle`` for the adapter (a proton pointer) and never call
into it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from addressing import Distribution, Role
from autolink import AutoLink
from linkroute import LinkRouteSpec, RoutedLink, Side
from router.core.ids import ConnectionId, LinkId

PRIORITIES = 10
DEFAULT_PRIORITY = 4


#: ``max_message_size`` when no policy limits it.
NO_SIZE_LIMIT = 2**62


class Connection:
    """One AMQP connection as the routing core sees it."""

    __slots__ = (
        "conn_id",
        "container_id",
        "delivered_gone",
        "dlv_at",
        "dlv_count",
        "edge",
        "handle",
        "in_links",
        "link_capacity",
        "logged_fields",
        "max_message_size",
        "name",
        "out_links",
        "partials",
        "role",
        "routed",
        "streaming_links",
        "strip_in",
        "strip_out",
        "tenant",
        "user_id",
    )

    def __init__(
        self,
        conn_id: ConnectionId,
        *,
        role: Role = Role.NORMAL,
        link_capacity: int = 250,
        strip_in: bool = True,
        strip_out: bool = True,
        container_id: str = "",
        name: str | None = None,
        handle: Any = None,
    ) -> None:
        self.conn_id = conn_id
        self.role = role
        self.link_capacity = link_capacity
        self.strip_in = strip_in
        self.strip_out = strip_out
        self.container_id = container_id
        # The configured name of the listener or connector it came through
        # (route-container matching, docs/brokers.md#route-containers); None when
        # not given.
        self.name = name
        self.handle = handle
        self.in_links: dict[LinkId, InLink] = {}
        self.out_links: dict[LinkId, OutLink] = {}
        self.routed: dict[LinkId, RoutedEnd] = {}
        # How many of its incoming links are in the middle of a message
        # (``InLink.partial`` set): the adapter then reads more at a time.
        self.partials = 0
        # The message fields logged for each message it carries
        # (``messageLoggingComponents``); empty: none.
        self.logged_fields: tuple[str, ...] = ()
        # The largest message its senders may send (policy), in bytes.
        self.max_message_size = NO_SIZE_LIMIT
        # The only non-empty user-id its messages may carry (policy without
        # allowUserIdProxy, docs/routing.md#receiving-a-message); None: not checked.
        self.user_id: bytes | None = None
        # On an interior router, the state of an edge router's connection
        # (``router.core.edges.EdgePeer``); None on any other connection.
        self.edge: Any = None
        # The peer (another router) takes a link of its own per streamed
        # message (it offered ``qd.streaming-links``).
        self.streaming_links = False
        # On a multi-tenant listener, ``"<vhost>/"``: the namespace its mobile
        # addresses live in (docs/routing.md#multi-tenant-listeners).
        self.tenant: str | None = None
        # Deliveries counted on its links that are gone, the total last
        # looked at and when it last grew (``note_deliveries``): the time of
        # the last delivery, kept off the per-message path.
        self.delivered_gone = 0
        self.dlv_count = 0
        self.dlv_at: float | None = None

    def __repr__(self) -> str:
        return f"C{self.conn_id}"

    def note_deliveries(self, now: float) -> None:
        """Look at its links' delivery counts: if they grew since the last
        look, a delivery happened since then (the adapter looks every second
        and when management asks)."""
        count = self.delivered_gone
        for links in (self.in_links, self.out_links, self.routed):
            for link in links.values():
                count += link.delivered
        if count > self.dlv_count:
            self.dlv_at = now
        self.dlv_count = count

    def last_delivery_seconds(self, now: float) -> int | None:
        """Whole seconds since its last delivery (at the resolution of the
        looks); None when it has carried none."""
        self.note_deliveries(now)
        return None if self.dlv_at is None else int(now - self.dlv_at)


class AddressRecord:
    """Routing state of one routing key (``M0orders``, ``Ltemp.x`` ...).

    ``consumers`` are the router-outgoing links bound to the key, in the
    order balanced/closest rotate through.  ``senders`` are the targeted
    router-incoming links bound to it (they get credit only while the
    record has a destination).  An address with ``enableFallback`` has a
    companion record ``MF<address>``: ``fallback`` on the primary,
    ``primary`` on the companion (docs/routing.md#fallback).
    """

    __slots__ = ("address", "closest_remotes", "consumers", "demand_senders", "distribution",
                 "fallback", "key", "primary", "priority", "redelivered", "redelivery_limit",
                 "redirected", "remotes", "retired_in", "retired_out", "senders", "to_container",
                 "transit")

    def __init__(
        self, key: str, address: str, distribution: Distribution, priority: int | None = None,
        redelivery_limit: int = 0,
    ) -> None:
        self.key = key
        self.address = address
        self.distribution = distribution
        self.priority = priority
        #: How many times a released delivery is forwarded again here
        #: (docs/routing.md#re-forwarding-released-deliveries); 0 for none,
        #: always 0 for multicast.
        self.redelivery_limit = redelivery_limit
        self.consumers: list[OutLink] = []
        self.senders: list[InLink] = []
        # Remote routers that have this key, reachable now (``RemoteTarget``s
        # kept by ``router.core.network``), and the cheapest of them.
        self.remotes: list[Any] = []
        self.closest_remotes: list[Any] = []
        self.fallback: AddressRecord | None = None
        self.primary: AddressRecord | None = None
        # Senders whose credit follows what the local consumers can take
        # (``InLink.demand``); kept by ``router.core.destinations``.
        self.demand_senders: list[InLink] = []
        # Counters (docs/operations.md#counters) that links cannot keep: deliveries of links
        # that have detached, sent to other routers, to in-process consumers,
        # and redirected to the fallback.  Live links count their own.
        self.retired_in = 0
        self.retired_out = 0
        self.transit = 0
        self.to_container = 0
        self.redirected = 0
        self.redelivered = 0

    @property
    def has_destination(self) -> bool:
        return bool(self.consumers or self.remotes)

    @property
    def in_use(self) -> bool:
        """Local links use the record (remote routers may keep it too)."""
        return bool(self.consumers or self.senders)

    def may_feed(self, sender: InLink) -> bool:
        """Whether ``sender`` gets credit (docs/routing.md#credit and
        docs/routing.md#fallback): the address has a destination, or its
        fallback has one and the sender is not itself a fallback link (whose
        messages must not go back where they came from).  A sender on an edge
        connection counts only destinations that are not on that connection
        (docs/networks.md#edge-routers).
        """
        fallback = self.fallback
        if sender.conn.role is Role.EDGE:
            if self.reaches_beyond(sender.conn):
                return True
            return fallback is not None and not sender.fallback \
                and fallback.reaches_beyond(sender.conn)
        if self.consumers or self.remotes:
            return True
        return fallback is not None and not sender.fallback and fallback.has_destination

    def reaches_beyond(self, conn: Connection) -> bool:
        """Whether the record has a destination that is not on ``conn``."""
        return any(c.conn is not conn for c in self.consumers) \
            or any(r.link.conn is not conn for r in self.remotes)

    def __repr__(self) -> str:
        return f"AddressRecord({self.key!r}, {self.distribution.value})"


class InLink:
    """A router-incoming link: a client sender, as the router receives it.

    ``window`` is the credit the router keeps outstanding (linkCapacity);
    ``unsettled`` maps the adapter's incoming delivery handle to the
    transfer routed from it, until the router settles it.
    """

    __slots__ = (
        "address",
        "autolink",
        "blocked",
        "conn",
        "control",
        "credit",
        "delayed1",
        "delayed10",
        "delivered",
        "demand",
        "dropped_presettled",
        "fallback",
        "handle",
        "link_id",
        "logged",
        "max_size",
        "may_modify",
        "name",
        "outcomes",
        "partial",
        "phase",
        "presettled",
        "priority",
        "record",
        "router_link",
        "starved",
        "starved_since",
        "stuck",
        "stuck_now",
        "target_allowed",
        "tracked_reachable",
        "transit",
        "unsettled",
        "user_id",
        "watched",
        "window",
    )

    def __init__(
        self,
        link_id: LinkId,
        conn: Connection,
        *,
        name: str,
        address: str | None,
        record: AddressRecord | None,
        phase: int = 0,
        fallback: bool = False,
        autolink: AutoLink[Connection] | None = None,
        handle: Any = None,
    ) -> None:
        self.link_id = link_id
        self.conn = conn
        self.name = name
        self.address = address
        self.record = record
        self.phase = phase
        self.handle = handle
        # A fallback producer (capability qd.fallback, or a fallback in
        # auto-link): never redirected to the fallback (docs/routing.md#fallback).
        self.fallback = fallback
        # The ``autolink.AutoLink`` whose link this is, if any.
        self.autolink = autolink
        self.window = conn.link_capacity
        # Larger messages are refused (policy maxMessageSize,
        # docs/routing.md#receiving-a-message).
        self.max_size = conn.max_message_size
        # Its messages are logged (router.adapter.forwarding.message_log).
        self.logged = bool(conn.logged_fields)
        # Messages with another user's user-id are refused
        # (docs/routing.md#receiving-a-message).
        self.user_id = conn.user_id
        # An anonymous link under a policy that restricts targets: whether a
        # message may go to an address (docs/security.md#vhosts); None: any.
        self.target_allowed: Callable[[str], bool] | None = None
        self.blocked = record is not None and not record.may_feed(self)
        # An edge's producer: what the edge was last told of its address's
        # destinations beyond it (``router.core.edges.EdgePeer.tracked``).
        self.tracked_reachable = False
        # Credit bounded by the local consumers' credit, not only the window
        # (see ``router.core.destinations.senders_changed``).
        self.demand = False
        # Whether the sender takes MODIFIED; if not, the router gives it
        # RELEASED instead (its source lists the outcomes it supports).
        self.may_modify = True
        # Counters (docs/operations.md#counters): deliveries received, of them pre-settled,
        # the pre-settled ones dropped for want of a destination, and the
        # outcomes the router gave the sender (see ``count_outcome``).
        self.delivered = 0
        self.presettled = 0
        self.dropped_presettled = 0
        self.outcomes = [0, 0, 0, 0]
        self.unsettled: dict[Any, Transfer | Fanout] = {}
        self.partial: bytearray | None = None
        # Kept by ``router.core.watch`` once a second, never per message.
        self.watched: dict[Transfer | Fanout, tuple[float, bool]] = {}
        self.delayed1 = 0
        self.delayed10 = 0
        self.stuck = 0
        #: Of its deliveries, those flagged stuck that are still unsettled.
        self.stuck_now = 0
        # The credit the router has given the sender, as sampled by the
        # adapter once a second and when management asks
        # (``router.adapter.endpoints.links.sample_credit``), and since when it has been
        # zero (``router.core.watch``).
        self.credit = 0
        self.starved_since: float | None = None
        self.starved = False
        # Inter-router links: ``router_link`` is the connection's RouterLink;
        # ``control`` marks the router-control link; ``transit`` links get
        # their credit back as soon as a delivery is forwarded (docs/routing.md#credit).
        self.router_link: Any = None
        self.control = False
        #: An inter-router data link's priority (0-9, its attach order), else None.
        self.priority: int | None = None
        # Links of an edge connection get their credit back on forwarding
        # too, and never feed a link of that connection (docs/networks.md#edge-routers).
        self.transit = conn.role is Role.EDGE

    @property
    def anonymous(self) -> bool:
        return self.record is None

    def __repr__(self) -> str:
        return f"{self.conn!r}[L{self.link_id}] in {self.address!r}"


class OutLink:
    """A router-outgoing link: a consumer the router sends to.

    ``queue`` holds copies waiting for credit as ``(bytes, transfer)``
    pairs (``transfer`` is ``None`` for pre-settled copies; a streamed
    message's copy is queued as its ``Stream``); ``unsettled`` maps the
    adapter's outgoing delivery handle to its transfer.
    """

    __slots__ = (
        "address",
        "autolink",
        "capacity",
        "conn",
        "credit",
        "delayed1",
        "delayed10",
        "delivered",
        "dropped_presettled",
        "flow_mark",
        "handle",
        "ingress",
        "link_id",
        "logged",
        "name",
        "outcomes",
        "prepared",
        "presettle",
        "presettled",
        "priority",
        "queue",
        "record",
        "starved",
        "starved_since",
        "stuck",
        "stuck_now",
        "unsettled",
        "watched",
        "withheld",
    )

    def __init__(
        self,
        link_id: LinkId,
        conn: Connection,
        *,
        name: str,
        address: str,
        record: AddressRecord | None,
        presettle: bool = False,
        autolink: AutoLink[Connection] | None = None,
        handle: Any = None,
    ) -> None:
        self.link_id = link_id
        self.conn = conn
        self.name = name
        self.address = address
        self.record = record
        self.presettle = presettle
        self.handle = handle
        # The ``autolink.AutoLink`` whose link this is, if any.
        self.autolink = autolink
        self.capacity = conn.link_capacity
        self.credit = 0
        # Its messages are logged (router.adapter.forwarding.message_log).
        self.logged = bool(conn.logged_fields)
        #: An inter-router data link's priority (0-9), else None.
        self.priority: int | None = None
        self.queue: deque[tuple[bytes | Stream, Transfer | Fanout | None]] = deque()
        self.unsettled: dict[Any, Transfer | Fanout] = {}
        # Inter-router links carry messages already annotated for the next
        # router: the forwarder sends them as they are.
        self.prepared = False
        # Counters (docs/operations.md#counters): deliveries sent, of them pre-settled,
        # pre-settled ones dropped from the queue, and the consumer's outcomes.
        self.delivered = 0
        self.presettled = 0
        self.dropped_presettled = 0
        self.outcomes = [0, 0, 0, 0]
        # Of the deliveries, those that entered the network at another
        # router, by its id (management's ingressHistogram; the rest entered
        # here): counted only for messages that carry router annotations.
        self.ingress: dict[str, int] | None = None
        # Kept by ``router.core.watch`` once a second, never per message:
        # ages of unsettled deliveries, and since when credit has been zero.
        self.watched: dict[Transfer | Fanout, tuple[float, bool]] = {}
        self.delayed1 = 0
        self.delayed10 = 0
        self.stuck = 0
        #: Of its deliveries, those flagged stuck that are still unsettled.
        self.stuck_now = 0
        self.starved_since: float | None = None
        self.starved = False
        # Whether the consumer keeps it without credit: true until its first
        # credit, and again when a flow of its own leaves none (it took its
        # credit back, or drained).  Credit the router spent is not withheld:
        # a consumer that has not yet sent more is not blocked unless copies
        # wait for it (``router.core.watch``).  ``flow_mark`` is ``delivered``
        # as of the last flow: a flow that finds no credit left after
        # deliveries went out since (proton may tell of a flow after the
        # router spent what it brought) is not a withdrawal.
        self.withheld = True
        self.flow_mark = 0

    @property
    def load(self) -> int:
        """Queued plus sent-unsettled deliveries (balanced, docs/routing.md#distributions)."""
        return len(self.queue) + len(self.unsettled)

    def __repr__(self) -> str:
        return f"{self.conn!r}[L{self.link_id}] out {self.address!r}"


class Transfer:
    """An unsettled anycast delivery: the incoming delivery and its one copy.

    ``in_delivery`` becomes ``None`` when the producer side is gone or has
    settled; the copy then completes on its own and its outcome goes nowhere.
    """

    __slots__ = ("held", "in_delivery", "in_link", "out_delivery", "out_link", "state",
                 "target")

    def __init__(self, in_delivery: Any, in_link: InLink) -> None:
        self.in_delivery = in_delivery
        self.in_link = in_link
        self.out_delivery: Any = None
        self.out_link: OutLink | None = None
        #: The state the producer's transfer carried (a non-terminal one,
        #: such as an extension state), which its copies carry too; 0: none.
        self.state = 0
        # The next-hop load (``HopLoad``) a balanced delivery sent to another
        # router counts in until it is settled
        # (docs/networks.md#messages-across-routers).
        self.target: Any = None
        #: The message kept to be forwarded again if its copy comes back
        #: released, for an address with a ``redeliveryLimit``.
        self.held: Held | None = None


class Held:
    """A message the router keeps while its one copy is unsettled, to forward
    it again if that copy comes back released or modified
    (docs/routing.md#re-forwarding-released-deliveries).

    ``data`` is the message as routing read it (router annotations as they
    arrived); ``tried`` the router-outgoing links its copies went on, never
    chosen again; ``failed`` is set once a consumer said ``delivery-failed``.
    """

    __slots__ = ("attempts", "data", "failed", "phase", "record", "to", "tried")

    def __init__(self, data: bytes, record: AddressRecord, phase: int | None = None,
                 to: str | None = None) -> None:
        self.data = data
        self.record = record
        #: The phase the message was redirected to (its fallback), else None.
        self.phase = phase
        #: The address routing read for a message from an anonymous link
        #: (``x-opt-qd.to``, or a multi-tenant vhost's), else None.
        self.to = to
        self.attempts = 0
        self.failed = False
        #: Made when a copy first comes back: most never do.
        self.tried: list[OutLink] | None = None


class Fanout:
    """An unsettled multicast delivery and the state of its copies.

    ``pending`` counts copies not yet settled; ``reported`` counts copies
    that gave a terminal outcome, folded into ``outcome``
    (docs/routing.md#multicast-outcomes).
    """

    __slots__ = ("copies", "in_delivery", "in_link", "outcome", "pending", "reported", "state",
                 "terminal")

    def __init__(self, in_delivery: Any, in_link: InLink) -> None:
        self.in_delivery = in_delivery
        self.in_link = in_link
        #: As ``Transfer.state``.
        self.state = 0
        self.pending = 0
        self.reported = 0
        self.outcome: int | None = None
        self.copies: dict[Any, OutLink] = {}
        # Outgoing deliveries that already reported a terminal outcome
        # before settling (a consumer in settle mode "second").
        self.terminal: set[Any] | None = None


class Stream:
    """A message forwarded while it still arrives: a transfer of many frames
    whose copies are sent frame by frame instead of once it is complete.

    ``in_delivery`` is the producer's delivery (an adapter handle), settled
    only once its last frame is in: an outcome that comes earlier sets
    ``settle``.  ``active`` maps each out link whose copy is being written
    to that copy's outgoing delivery and its transfer (``None`` when
    pre-settled), and whether the router settles the copy itself at its end
    (else its consumer's outcome does); the link sends nothing else meanwhile.  ``waiting`` are
    the out links whose copy waits for credit in their queue, with its
    first bytes in ``heads``; while any waits, ``backlog`` keeps the bytes
    that arrived after them.  ``paused`` is set while the producer's
    connection is not read because a copy is too far behind.
    """

    __slots__ = ("active", "backlog", "complete", "heads", "in_delivery", "in_link", "paused",
                 "settle", "size", "waiting")

    def __init__(self, in_delivery: Any, in_link: InLink, size: int) -> None:
        self.in_delivery = in_delivery
        self.in_link = in_link
        self.size = size
        self.active: dict[OutLink, tuple[Any, Transfer | Fanout | None, bool]] = {}
        self.waiting: list[OutLink] = []
        self.heads: dict[OutLink, bytes] = {}
        self.backlog = bytearray()
        self.complete = False
        self.settle = False
        self.paused = False


class RouterLink:
    """One inter-router connection and the links the routers use on it.

    ``link_id`` is what the routing protocol calls the connection (qdrouterd's
    mask bit); ``peer`` is the neighbour's router id once its HELLO arrived.
    ``data`` holds the router-outgoing data link of each priority (None until
    attached); the priority of a data link is its attach order
    (docs/networks.md#inter-router-connections).
    """

    __slots__ = ("conn", "control", "cost", "data", "data_in", "link_id", "peer",
                 "ready")

    def __init__(self, link_id: int, conn: Connection, cost: int) -> None:
        self.link_id = link_id
        self.conn = conn
        self.cost = cost
        self.peer: str | None = None
        self.control: OutLink | None = None
        self.data: list[OutLink | None] = [None] * PRIORITIES
        #: Router-incoming data links attached so far (the next one's priority).
        self.data_in = 0
        self.ready = False

    def data_link(self, priority: int) -> OutLink | None:
        """The data link for ``priority``, or the next lower one that exists."""
        for p in range(priority, -1, -1):
            link = self.data[p]
            if link is not None:
                return link
        for link in self.data:
            if link is not None:
                return link
        return None

    def __repr__(self) -> str:
        return f"RouterLink({self.link_id} {self.conn!r} peer={self.peer} cost={self.cost})"


class HopLoad:
    """An address's unsettled deliveries sent over one next-hop link,
    whichever router beyond it they went to (qdrouterd counts them per
    address and connection, docs/networks.md#messages-across-routers)."""

    __slots__ = ("outstanding",)

    def __init__(self) -> None:
        self.outstanding = 0


class RemoteTarget:
    """A remote router that has an address, as balanced/closest see it.

    ``hop`` counts this address's unsettled deliveries over ``link``, the
    next hop toward the router, shared by every router reached through it;
    ``load`` and ``capacity`` let ``choose_balanced`` weigh it against local
    consumers (outstanding plus path cost).
    """

    __slots__ = ("capacity", "cost", "hop", "link", "router_id")

    def __init__(self, router_id: str, link: RouterLink, cost: int, hop: HopLoad) -> None:
        self.router_id = router_id
        self.link = link
        self.cost = cost
        self.hop = hop
        self.capacity = link.conn.link_capacity + cost

    @property
    def load(self) -> int:
        return self.hop.outstanding + self.cost

    def __repr__(self) -> str:
        return f"RemoteTarget({self.router_id} via {self.link.peer} cost={self.cost})"


class UplinkTarget:
    """An edge router's way to an address's destinations beyond it: one link
    of its active uplink (docs/networks.md#edge-routers), as balanced and
    closest see it.  ``load`` and ``capacity`` are the link's, plus one for
    the hop, so that an idle consumer on the edge itself is preferred.
    """

    __slots__ = ("link",)

    def __init__(self, link: OutLink) -> None:
        self.link = link

    @property
    def load(self) -> int:
        return self.link.load + 1

    @property
    def capacity(self) -> int:
        return self.link.capacity + 1

    @property
    def router_id(self) -> str:
        """The interior router at the other end (management's remote hosts)."""
        return self.link.conn.container_id

    def __repr__(self) -> str:
        return f"UplinkTarget({self.link!r})"


class RoutedEnd:
    """One link of a link-routed pair, as the relay sees it (docs/brokers.md#the-routed-pair).

    What arrives on it is passed to ``partner`` as it is: transfers with
    their tags, credit, drain and dispositions.  ``receiving``: the router
    receives on this link (the peer is a sender).  ``deliveries`` maps each
    unsettled delivery on this link to its copy on the partner.  ``route``
    is the link route whose rewriting applies, on the end facing the
    container; ``drain`` is the drain flag last passed on to this link.
    """

    __slots__ = (
        "address",
        "conn",
        "delivered",
        "deliveries",
        "drain",
        "handle",
        "link_id",
        "max_size",
        "may_modify",
        "name",
        "outcomes",
        "pair",
        "partner",
        "presettled",
        "receiving",
        "route",
        "size",
    )

    def __init__(self, link_id: LinkId, conn: Connection, *, name: str, receiving: bool,
                 handle: Any = None, address: str | None = None) -> None:
        self.link_id = link_id
        self.conn = conn
        self.name = name
        # The terminus address this end's peer attached with (or is asked to).
        self.address = address
        self.receiving = receiving
        self.handle = handle
        self.partner: RoutedEnd | None = None
        self.pair: RoutedLink[RoutedEnd] | None = None
        self.route: LinkRouteSpec | None = None
        self.deliveries: dict[Any, Any] = {}
        self.drain = False
        # Whether the sender on a receiving end takes MODIFIED (as InLink's).
        self.may_modify = True
        # The largest message its sender may send (policy, as InLink's;
        # -1 once one was larger), and the bytes of the message passing now.
        self.max_size = conn.max_message_size
        self.size = 0
        # Counters: deliveries passed through this link, of them pre-settled,
        # and the outcomes seen on it.
        self.delivered = 0
        self.presettled = 0
        self.outcomes = [0, 0, 0, 0]

    def __repr__(self) -> str:
        return f"{self.conn!r}[L{self.link_id}] routed {'in' if self.receiving else 'out'}"

    def _closing(self) -> bool | None:
        # Whether this end is the side of its pair that detached first (None:
        # the pair is not closing; linkroute.pairing).
        pair = self.pair
        side = None if pair is None else pair.closing_side
        if side is None:
            return None
        assert pair is not None
        return (side is Side.NEAR) == (self is pair.near)

    @property
    def answer_awaited(self) -> bool:
        """Its peer detached it: the other side's detach, passed on, answers it."""
        return self._closing() is True

    @property
    def answer_asked(self) -> bool:
        """The router passed the other side's detach on to it and awaits its answer."""
        return self._closing() is False


# Where each terminal outcome is counted in a link's ``outcomes``: accepted,
# rejected, released, modified (AMQP 1.0 section 3.4 descriptors 0x24-0x27).
OUTCOME_INDEX = {0x24: 0, 0x25: 1, 0x26: 2, 0x27: 3}


def count_outcome(link: InLink | OutLink | RoutedEnd, state: int) -> None:
    """Count a terminal outcome on ``link`` (other states are not counted)."""
    index = OUTCOME_INDEX.get(state)
    if index is not None:
        link.outcomes[index] += 1


#: The router-wide delivery totals ``tally`` adds to (management's ``router`` entity).
TALLY_KEYS = ("accepted", "rejected", "released", "modified", "presettled", "ingress",
              "egress", "ingress_rc", "egress_rc", "delayed1", "delayed10", "transit")


def tally(totals: dict[str, int], link: InLink | OutLink | RoutedEnd) -> None:
    """Add an endpoint link's counters to router-wide ``totals`` (keys ``TALLY_KEYS``):
    the outcomes the router gave producers, deliveries in and out, and those on
    route-container connections.  As in qdrouterd, the outcomes of every
    incoming link count, those from other routers too, so a message that
    crosses three routers counts as accepted on each.  A link-routed link
    counts on any connection: what arrives on it is ingress, what leaves on
    it toward another router transit, else egress."""
    container = link.conn.role is Role.ROUTE_CONTAINER
    if isinstance(link, RoutedEnd):
        if link.receiving:
            acc, rej, rel, mod = link.outcomes
            totals["accepted"] += acc
            totals["rejected"] += rej
            totals["released"] += rel
            totals["modified"] += mod
            totals["presettled"] += link.presettled
            totals["ingress"] += link.delivered
            if container:
                totals["ingress_rc"] += link.delivered
        elif link.conn.role is Role.INTER_ROUTER:
            totals["transit"] += link.delivered
        else:
            totals["egress"] += link.delivered
            if container:
                totals["egress_rc"] += link.delivered
        return
    if isinstance(link, InLink):
        acc, rej, rel, mod = link.outcomes
        totals["accepted"] += acc
        totals["rejected"] += rej
        totals["released"] += rel
        totals["modified"] += mod
        if link.conn.role is Role.INTER_ROUTER:
            return  # a message from another router: only its outcome counts here
        totals["presettled"] += link.presettled
        totals["ingress"] += link.delivered
        totals["delayed1"] += link.delayed1
        totals["delayed10"] += link.delayed10
        if container:
            totals["ingress_rc"] += link.delivered
    elif link.conn.role is not Role.INTER_ROUTER:
        totals["egress"] += link.delivered
        if container:
            totals["egress_rc"] += link.delivered


def describe_counters(link: InLink | OutLink | RoutedEnd) -> str:
    """The counters as qdrouterd's link-close log line shows them."""
    acc, rej, rel, mod = link.outcomes
    dropped = 0 if isinstance(link, RoutedEnd) else link.dropped_presettled
    line = (f"del={link.delivered} presett={link.presettled} psdrop={dropped} "
            f"acc={acc} rej={rej} rel={rel} mod={mod}")
    if isinstance(link, RoutedEnd):
        return line
    blocked = "yes" if link.starved else "no"
    return f"{line} delay1={link.delayed1} delay10={link.delayed10} blocked={blocked}"
