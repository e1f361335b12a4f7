"""Edge routers in the core, without sockets (docs/networks.md#edge-routers):
the uplink an edge keeps and the links it attaches on it, the tracking
answers an interior gives an edge, the link-route lookups it answers, and
the heartbeat watch."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count

import pytest

from addressing import AddressSpec, AddressTable, Direction, Role
from autolink import AutoLinkSpec
from linkroute import LinkRouteSpec
from router.core import (
    AttachOwnLink,
    AttachRefused,
    BlockSender,
    CloseConnection,
    Connection,
    ConnectionId,
    DetachOwnLink,
    Effect,
    ForwardAttach,
    IncomingAccepted,
    InLink,
    LookupAnswered,
    OutgoingAccepted,
    OutLink,
    RouteMessage,
    Router,
    SendOnLink,
    UnblockSender,
    UplinkTarget,
)
from router.core.amqp import (
    APPLICATION_PROPERTIES,
    COMPACT,
    PROPERTIES,
    VALUE,
    PeerProtocolError,
    UInt,
    encode_section,
    split_sections,
)
from router.core.edges import (
    EDGE_DOWNLINK,
    EDGE_KEY,
    HEARTBEAT_ADDRESS,
    LOOKUP_ADDRESS,
    TRACKING_ADDRESS,
    decode_tracking,
    encode_heartbeat,
    encode_tracking,
    waypoint_capabilities,
)

_ids = count(100)


def conn(role: Role = Role.NORMAL, container: str = "client") -> Connection:
    return Connection(ConnectionId(next(_ids)), role=role, container_id=container)


def edge_router(*specs: AddressSpec, **kw: object) -> Router:
    table = AddressTable()
    for spec in specs:
        table.add(spec)
    return Router(router_id="E1", addresses=table, token=iter(f"t{n}" for n in count()).__next__,
                  edge=True, **kw)  # type: ignore[arg-type]


def interior_router(**kw: object) -> Router:
    return Router(router_id="I", addresses=AddressTable(), token=lambda: "tok", interior=True,
                  **kw)  # type: ignore[arg-type]


def attaches(effects: Sequence[object]) -> list[AttachOwnLink]:
    return [e for e in effects if isinstance(e, AttachOwnLink)]


def consumer(router: Router, c: Connection, address: str, **kw: object) -> OutLink:
    decision, _ = router.outgoing_link_attached(c, name="r", address=address, **kw)  # type: ignore[arg-type]
    assert isinstance(decision, OutgoingAccepted)
    return decision.link


def producer(router: Router, c: Connection, address: str | None, **kw: object
             ) -> tuple[InLink, list[Effect]]:
    decision, effects = router.incoming_link_attached(c, name="s", address=address, **kw)  # type: ignore[arg-type]
    assert isinstance(decision, IncomingAccepted)
    return decision.link, list(effects)


# -- wire formats ---------------------------------------------------------------------


def test_tracking_messages_round_trip_and_garbage_is_refused() -> None:
    assert decode_tracking(encode_tracking("M0orders", True)) == ("M0orders", True)
    assert decode_tracking(encode_tracking("MFdest", False)) == ("MFdest", False)
    with pytest.raises(PeerProtocolError):
        decode_tracking(encode_section(VALUE, ["M0x"], COMPACT))
    with pytest.raises(PeerProtocolError):
        decode_tracking(encode_section(VALUE, ["M0x", "yes"], COMPACT))
    with pytest.raises(PeerProtocolError):
        decode_tracking(b"\x00\x53")
    assert split_sections(encode_heartbeat(7))[VALUE] == 7


@pytest.mark.parametrize(("key", "phases", "incoming", "expected"), [
    ("MFdest", None, True, ("qd.fallback",)),
    ("M0plain", None, True, ()),
    ("M0wp", (0, 1), False, ()),             # a producer at the ingress phase: a client link
    ("M0wp", (0, 1), True, ("qd.waypoint.1",)),  # the queue's consumer side
    ("M1wp", (0, 1), False, ("qd.waypoint.1",)),  # the queue's producer side
    ("M1wp", (0, 1), True, ()),               # a consumer at the egress phase: a client link
    ("M5wp", (0, 1), True, ()),               # outside the phases
])
def test_uplink_links_of_phased_and_fallback_addresses_carry_capabilities(
        key: str, phases: tuple[int, int] | None, incoming: bool,
        expected: tuple[str, ...]) -> None:
    assert waypoint_capabilities(key, phases, incoming=incoming) == expected


# -- the edge: its uplink -------------------------------------------------------------------


def test_the_first_edge_connection_becomes_the_uplink_with_its_seven_links() -> None:
    router = edge_router()
    assert router.uplink is not None
    uplink = conn(Role.EDGE, "I1")
    effects = router.connection_opened(uplink, now=10.0)
    links = attaches(effects)
    assert len(links) == 7
    anon, down, tracking, beat, ask, replies, agent = links
    assert isinstance(anon.link, OutLink) and anon.source is None and anon.target is None
    assert isinstance(down.link, InLink) and down.source == "E1"
    assert down.capabilities == (EDGE_DOWNLINK,)
    assert tracking.source == TRACKING_ADDRESS
    assert isinstance(tracking.link, InLink) and tracking.link.control
    assert beat.target == HEARTBEAT_ADDRESS and isinstance(beat.link, OutLink)
    assert beat.link.presettle
    assert ask.target == LOOKUP_ADDRESS and isinstance(ask.link, OutLink)
    assert replies.dynamic and isinstance(replies.link, InLink) and replies.link.control
    assert agent.target == "$management" and isinstance(agent.link, OutLink)
    assert all(link.link.conn is uplink for link in links)
    # The anonymous link is the way beyond the edge.
    beyond = router.records[EDGE_KEY]
    assert [t.link for t in beyond.remotes] == [anon.link]
    assert router.lookup("nobody.knows") is beyond
    assert router.lookup("amqp:/_topo/0/Other/$management") is beyond
    assert router.lookup("amqp:/_edge/E2/temp.x") is beyond
    # A second edge connection waits as the alternate.
    assert router.connection_opened(conn(Role.EDGE, "I2"), now=10.0) == []


def test_losing_the_uplink_activates_the_alternate_and_rebuilds_the_links() -> None:
    router = edge_router()
    first, second = conn(Role.EDGE, "I1"), conn(Role.EDGE, "I2")
    router.connection_opened(first, now=0.0)
    router.connection_opened(second, now=0.0)
    local = consumer(router, conn(), "orders")
    sender, _ = producer(router, conn(), "orders")
    uplink = router.uplink
    assert uplink is not None and uplink.active is first
    effects = router.connection_closed(first, now=1.0)
    assert uplink.active is second
    links = attaches(effects)
    assert all(link.link.conn is second for link in links)
    sources = {link.source for link in links if isinstance(link.link, InLink)}
    targets = {link.target for link in links if isinstance(link.link, OutLink)}
    assert "orders" in sources and "orders" in targets
    assert local in router.records["M0orders"].consumers
    assert not sender.blocked  # the local consumer feeds it
    # With no alternate left, the edge routes on its own.
    router.connection_closed(second, now=2.0)
    assert uplink.active is None and router.lookup("nobody.knows") is None
    assert router.records[EDGE_KEY].remotes == [] if EDGE_KEY in router.records else True


def test_a_local_consumer_gets_a_receiving_link_on_the_uplink_while_it_exists() -> None:
    router = edge_router()
    uplink = conn(Role.EDGE, "I")
    router.connection_opened(uplink, now=0.0)
    client = conn()
    decision, effects = router.outgoing_link_attached(client, name="r", address="orders")
    assert isinstance(decision, OutgoingAccepted)
    (attach,) = attaches(effects)
    inlink = attach.link
    assert isinstance(inlink, InLink) and attach.source == "orders"
    assert inlink in router.records["M0orders"].senders and not inlink.blocked
    # A second consumer changes nothing on the uplink.
    _, more = router.outgoing_link_attached(client, name="r2", address="orders")
    assert attaches(more) == []
    router.link_detached(decision.link)
    effects = router.link_detached(next(iter(
        link for link in client.out_links.values())))
    assert DetachOwnLink(link=inlink) in effects
    assert "M0orders" not in router.records


def test_management_is_never_proxied_up_the_uplink() -> None:
    router = edge_router()
    # In-process consumers (the management node) are on connection 0.
    router.in_process_attached(Connection(ConnectionId(0)), "$management", "$management")
    router.connection_opened(conn(Role.EDGE, "I"), now=0.0)
    _, effects = producer(router, conn(), "$management")
    assert attaches(effects) == []


def test_a_producer_is_fed_through_the_uplink_only_when_the_interior_says_so() -> None:
    router = edge_router()
    uplink_conn = conn(Role.EDGE, "I")
    router.connection_opened(uplink_conn, now=0.0)
    uplink = router.uplink
    assert uplink is not None and uplink.tracking is not None
    sender, effects = producer(router, conn(), "orders")
    assert sender.blocked
    (attach,) = attaches(effects)
    out = attach.link
    assert isinstance(out, OutLink) and attach.target == "orders"
    record = router.records["M0orders"]
    assert record.remotes == []  # not a destination yet
    effects = took(router, uplink.tracking, encode_tracking("M0orders", True), 1.0)
    assert effects == [UnblockSender(link=sender)]
    assert [type(t) for t in record.remotes] == [UplinkTarget]
    effects = took(router, uplink.tracking, encode_tracking("M0orders", False), 2.0)
    assert effects == [BlockSender(link=sender)]
    # An answer for an address the edge does not produce to, or garbage, is ignored.
    assert took(router, uplink.tracking, encode_tracking("M0other", True), 3) == []
    assert took(router, uplink.tracking, b"\x00garbage", 3.0) == []
    # The producer leaves: its uplink link goes.
    effects = router.link_detached(sender)
    assert DetachOwnLink(link=out) in effects


def test_an_edge_dynamic_address_is_its_own_edge_address() -> None:
    router = edge_router()
    decision, _ = router.outgoing_link_attached(conn(), name="r", address=None, dynamic=True)
    assert isinstance(decision, OutgoingAccepted)
    assert decision.address == "amqp:/_edge/E1/temp.t0"
    assert router.lookup("amqp:/_edge/E1/temp.t0") is decision.link.record


def test_an_in_auto_link_producer_is_proxied_like_a_client_producer() -> None:
    spec = AutoLinkSpec(address="q.in", direction=Direction.IN, connection="broker")
    router = edge_router(auto_links=[spec])
    router.connection_opened(conn(Role.EDGE, "I"), now=0.0)
    broker = Connection(ConnectionId(50), role=Role.ROUTE_CONTAINER, name="broker")
    (attach_auto,) = router.connection_opened(broker, now=0.0)
    link, effects = router.auto_links.attached(attach_auto.autolink, name="al",  # type: ignore[union-attr]
                                               address="q.in", handle=None)
    assert isinstance(link, InLink)
    assert [a.target for a in attaches(effects)] == ["q.in"]


def test_heartbeats_go_every_two_seconds_while_the_interior_gives_credit() -> None:
    router = edge_router()
    router.connection_opened(conn(Role.EDGE, "I"), now=0.0)
    uplink = router.uplink
    assert uplink is not None and uplink.heartbeat is not None
    assert router.next_deadline() == 1.0
    assert router.tick(1.0) == []  # no credit yet
    uplink.heartbeat.credit = 2
    assert router.next_deadline() == 3.0
    (beat,) = router.tick(3.0)
    assert isinstance(beat, SendOnLink) and beat.link is uplink.heartbeat
    assert router.tick(4.0) == []
    assert len(router.tick(5.0)) == 1


# -- the interior: its edges ----------------------------------------------------------------


def edge_conn(router: Router, name: str = "E1") -> Connection:
    c = conn(Role.EDGE, name)
    assert router.connection_opened(c, now=0.0) == []
    return c


def test_an_edge_downlink_binds_the_edge_key_and_is_advertised() -> None:
    router = interior_router()
    e1 = edge_conn(router)
    decision, _ = router.outgoing_link_attached(
        e1, name="down", address="E1", capabilities=(EDGE_DOWNLINK,))
    assert isinstance(decision, OutgoingAccepted)
    record = router.records["HE1"]
    # The way beyond this router to the edge, as a remote router's would be.
    assert [t.link for t in record.remotes] == [decision.link] and record.consumers == []
    assert router.lookup("amqp:/_edge/E1/temp.x") is record
    assert router.network is not None
    assert "HE1" in router.network.protocol._mobile.local
    router.link_detached(decision.link, 1.0)
    assert "HE1" not in router.network.protocol._mobile.local
    assert "HE1" not in router.records
    # The same capability from a client is nothing special.
    client = conn()
    decision, _ = router.outgoing_link_attached(client, name="r", address="E1",
                                                capabilities=(EDGE_DOWNLINK,))
    assert isinstance(decision, OutgoingAccepted) and decision.link.record is not record


def test_tracking_answers_follow_destinations_beyond_the_edge() -> None:
    router = interior_router()
    e1, e2 = edge_conn(router, "E1"), edge_conn(router, "E2")
    decision, effects = router.outgoing_link_attached(e1, name="t", address=TRACKING_ADDRESS)
    assert isinstance(decision, OutgoingAccepted) and effects == []
    tracking = decision.link
    # E1's producer proxy: no destination yet, no answer.
    proxy, effects = producer(router, e1, "orders")
    assert proxy.blocked and [e for e in effects if isinstance(e, SendOnLink)] == []
    # A consumer on E1 itself does not count for E1's producer.
    consumer(router, e1, "orders")
    assert proxy.blocked
    # A consumer on E2 does.
    on_e2 = consumer(router, e2, "orders")
    assert not proxy.blocked
    router.link_detached(on_e2)
    assert proxy.blocked
    effects = router.outgoing_link_attached(e2, name="r", address="orders")[1]
    assert SendOnLink(link=tracking, data=encode_tracking("M0orders", True)) in effects
    # A client consumer on the interior too; its leaving keeps E2's.
    client_consumer = consumer(router, conn(), "orders")
    assert router.link_detached(client_consumer) == []


def test_a_fallback_destination_is_no_answer_and_the_answer_follows_the_primary() -> None:
    # qdrouterd answers for the address itself: with only a fallback consumer
    # (here on the edge itself, as qpid-dispatch's fallback_dest tests have
    # it) the edge must use its own fallback rather than send up.
    table = AddressTable()
    table.add(AddressSpec(prefix="dest", enable_fallback=True))
    router = Router(router_id="I", addresses=table, token=lambda: "tok", interior=True)
    e1 = edge_conn(router)
    decision, _ = router.outgoing_link_attached(e1, name="t", address=TRACKING_ADDRESS)
    assert isinstance(decision, OutgoingAccepted)
    tracking = decision.link
    proxy, effects = producer(router, e1, "dest.x")
    assert [e for e in effects if isinstance(e, SendOnLink)] == []
    consumer(router, e1, "dest.x", capabilities=("qd.fallback",))
    assert proxy.blocked, "its own fallback is not beyond the edge"
    fallback_elsewhere = consumer(router, conn(), "dest.x", capabilities=("qd.fallback",))
    assert not proxy.blocked and not proxy.tracked_reachable, "credit, but no answer"
    effects = router.outgoing_link_attached(conn(), name="r", address="dest.x")[1]
    assert SendOnLink(link=tracking, data=encode_tracking("M0dest.x", True)) in effects, \
        "a primary consumer while the sender already had credit"
    router.link_detached(fallback_elsewhere)
    assert proxy.tracked_reachable


def test_a_tracking_link_that_attaches_late_gets_the_current_answers() -> None:
    router = interior_router()
    e1 = edge_conn(router)
    consumer(router, conn(), "a")
    producer(router, e1, "a")
    producer(router, e1, "b")
    decision, effects = router.outgoing_link_attached(e1, name="t", address=TRACKING_ADDRESS)
    assert isinstance(decision, OutgoingAccepted)
    assert effects == [SendOnLink(link=decision.link, data=encode_tracking("M0a", True))]


def lookup_request(address: str, receiver: bool, *, version: int = 1, opcode: int = 1,
                   reply_to: str | None = "amqp:/_topo/0/I/temp.r") -> bytes:
    return b"".join((
        encode_section(PROPERTIES, [None, None, None, None, reply_to, 42], COMPACT),
        encode_section(APPLICATION_PROPERTIES, {"version": UInt(version),
                                                "opcode": UInt(opcode)}, COMPACT),
        encode_section(VALUE, [address, receiver], COMPACT),
    ))


def took(router: Router, link: InLink, data: bytes, now: float) -> list[Effect]:
    """The effects of a service message the router takes."""
    accepted, effects = router.service_received(link, data, now)
    assert accepted
    return effects


def answer(effects: Sequence[object]) -> tuple[dict[object, object], object, object]:
    (reply,) = effects
    assert isinstance(reply, RouteMessage)
    sections = split_sections(reply.data)
    props = sections[PROPERTIES]
    assert isinstance(props, list) and props[2] == "amqp:/_topo/0/I/temp.r" and props[5] == 42
    app = sections[APPLICATION_PROPERTIES]
    assert isinstance(app, dict)
    return app, sections[VALUE], props


def test_an_edge_lookup_says_whether_an_address_is_link_routed_with_destinations() -> None:
    routes = [LinkRouteSpec(prefix="broker", direction=Direction.IN, connection="rabbit"),
              LinkRouteSpec(prefix="broker", direction=Direction.OUT, connection="rabbit")]
    router = interior_router(link_routes=routes)
    e1 = edge_conn(router)
    decision, _ = router.incoming_link_attached(e1, name="l", address=LOOKUP_ADDRESS)
    assert isinstance(decision, IncomingAccepted) and decision.link.control
    lookup = decision.link
    app, body, _ = answer(took(router, lookup, lookup_request("broker.q", True), 0))
    assert app["status"] == 0 and body == [True, False]
    rabbit = Connection(ConnectionId(77), role=Role.ROUTE_CONTAINER, name="rabbit")
    router.connection_opened(rabbit, now=0.0)
    app, body, _ = answer(took(router, lookup, lookup_request("broker.q", False), 0))
    assert app["status"] == 0 and body == [True, True]
    app, body, _ = answer(took(router, lookup, lookup_request("plain.q", True), 0))
    assert app["status"] == 3 and body == [False, False]
    # What is not a request is refused (REJECTED), unanswered, as qdrouterd does.
    for bad in (lookup_request("x", True, version=9), lookup_request("x", True, opcode=5),
                lookup_request("x", True, reply_to=None), b"\x00\x53\x77"):
        assert router.service_received(lookup, bad, 0) == (False, [])


def test_an_edge_whose_heartbeats_stop_is_closed() -> None:
    router = interior_router()
    e1 = edge_conn(router)
    decision, _ = router.incoming_link_attached(e1, name="h", address=HEARTBEAT_ADDRESS)
    assert isinstance(decision, IncomingAccepted)
    beats = decision.link
    assert router.edges is not None
    for now in (2.0, 4.0, 6.0, 8.0):
        assert [e for e in router.tick(now) if isinstance(e, CloseConnection)] == []
        router.service_received(beats, encode_heartbeat(int(now)), now)
    assert [e for e in router.tick(16.0) if isinstance(e, CloseConnection)] == []
    closing = [e for e in router.tick(18.0) if isinstance(e, CloseConnection)]
    assert closing == [CloseConnection(conn=e1, description="Lost heartbeat from container E1")]
    # An edge without a heartbeat link (an older one) is not watched.
    e2 = edge_conn(router, "E2")
    assert all(e.conn is not e2 for e in router.tick(100.0)
               if isinstance(e, CloseConnection))
    router.connection_closed(e1)
    router.connection_closed(e2)
    assert router.edges.peers == {}


def test_any_client_may_send_heartbeats_to_an_interior_and_is_closed_when_they_stop() -> None:
    """As qdrouterd's heartbeat service: not only edge routers."""
    router = interior_router()
    client = conn(Role.NORMAL, "app")
    router.connection_opened(client, now=0.0)
    decision, _ = router.incoming_link_attached(client, name="h", address=HEARTBEAT_ADDRESS)
    assert isinstance(decision, IncomingAccepted) and decision.link.control
    assert client.edge is None  # watched, not an edge
    took(router, decision.link, encode_heartbeat(1), 2.0)
    assert [e for e in router.tick(10.0) if isinstance(e, CloseConnection)] == []
    closing = [e for e in router.tick(12.0) if isinstance(e, CloseConnection)]
    assert closing == [CloseConnection(conn=client,
                                       description="Lost heartbeat from container app")]
    router.connection_closed(client)
    assert router.edges is not None and router.edges.peers == {}


def test_the_lookup_service_answers_edges_only_and_the_services_take_no_receivers() -> None:
    router = interior_router()
    client = conn(Role.NORMAL, "app")
    router.connection_opened(client, now=0.0)
    refused, _ = router.incoming_link_attached(client, name="l", address=LOOKUP_ADDRESS)
    assert isinstance(refused, AttachRefused) and refused.null_terminus
    assert refused.condition == "amqp:unauthorized-access"
    for address in (HEARTBEAT_ADDRESS, LOOKUP_ADDRESS):
        answer, _ = router.outgoing_link_attached(client, name="r", address=address)
        assert isinstance(answer, AttachRefused) and answer.condition == "amqp:not-allowed"


# -- the edge: link-route lookups --------------------------------------------------------


def lookup_ready(router: Router) -> tuple[OutLink, InLink]:
    uplink = router.uplink
    assert uplink is not None and uplink.lookup_out is not None and uplink.lookup_in is not None
    assert uplink.reply_to is None and router.edge_lookup("h", "q", True, 0.0) is None
    router.own_link_answered(uplink.lookup_in, "amqp:/_topo/0/I/temp.reply")
    assert router.edge_lookup("h", "q", True, 0.0) is None  # no credit yet
    uplink.lookup_out.credit = 10
    return uplink.lookup_out, uplink.lookup_in


def lookup_reply(request: bytes, status: int, body: list[bool]) -> bytes:
    props = split_sections(request)[PROPERTIES]
    assert isinstance(props, list)
    return b"".join((
        encode_section(PROPERTIES, [None, None, props[4], None, None, props[5]], COMPACT),
        encode_section(APPLICATION_PROPERTIES, {"version": UInt(1), "opcode": UInt(1),
                                                "status": UInt(status)}, COMPACT),
        encode_section(VALUE, body, COMPACT),
    ))


def test_an_edge_asks_its_interior_about_link_routes_and_relays_the_answer() -> None:
    router = edge_router()
    router.connection_opened(conn(Role.EDGE, "I"), now=0.0)
    ask, replies = lookup_ready(router)
    (request,) = router.edge_lookup("attach-1", "broker.q", True, 1.0) or []
    assert isinstance(request, SendOnLink) and request.link is ask
    sections = split_sections(request.data)
    assert sections[VALUE] == ["broker.q", True]
    app = sections[APPLICATION_PROPERTIES]
    assert isinstance(app, dict) and app["version"] == 1 and app["opcode"] == 1
    props = sections[PROPERTIES]
    assert isinstance(props, list) and props[4] == "amqp:/_topo/0/I/temp.reply"
    assert took(router, replies, lookup_reply(request.data, 0, [True, True]), 1) == [
        LookupAnswered(handle="attach-1", link_route=True, destinations=True)]
    # An answer nobody waits for, a "not found" and garbage.
    assert took(router, replies, lookup_reply(request.data, 0, [True, True]), 1) == []
    (second,) = router.edge_lookup("attach-2", "plain", False, 1.0) or []
    assert isinstance(second, SendOnLink)
    assert took(router, replies, lookup_reply(second.data, 3, [False, False]), 1) == [
        LookupAnswered(handle="attach-2", link_route=False, destinations=False)]
    assert took(router, replies, b"\x00\x53\x70\x45", 1.0) == []


def test_an_unanswered_lookup_times_out_and_a_lost_uplink_answers_all() -> None:
    router = edge_router()
    uplink_conn = conn(Role.EDGE, "I")
    router.connection_opened(uplink_conn, now=0.0)
    lookup_ready(router)
    router.edge_lookup("slow", "q", True, 10.0)
    assert router.next_deadline() == 1.0  # the heartbeat still comes first
    answers = [e for e in router.tick(13.0) if isinstance(e, LookupAnswered)]
    assert answers == [LookupAnswered(handle="slow", link_route=False, destinations=False)]
    router.edge_lookup("a", "q", True, 20.0)
    router.edge_lookup("b", "q", False, 20.0)
    effects = router.connection_closed(uplink_conn, now=21.0)
    assert sorted(str(e.handle) for e in effects if isinstance(e, LookupAnswered)) == ["a", "b"]
    assert router.edge_lookup("c", "q", True, 22.0) is None


def test_an_edge_serves_its_own_link_routes_without_asking() -> None:
    routes = [LinkRouteSpec(prefix="mine", direction=Direction.IN, connection="broker")]
    router = edge_router(link_routes=routes)
    router.connection_opened(conn(Role.EDGE, "I"), now=0.0)
    lookup_ready(router)
    assert router.edge_lookup("x", "mine.q", True, 0.0) is not None  # not connected: ask
    broker = Connection(ConnectionId(60), role=Role.ROUTE_CONTAINER, name="broker")
    router.connection_opened(broker, now=0.0)
    assert router.edge_lookup("y", "mine.q", True, 0.0) is None
    assert router.edge_lookup("z", "mine.q", False, 0.0) is not None  # no 'out' route here


def test_a_client_attach_is_link_routed_straight_up_the_uplink() -> None:
    router = edge_router()
    uplink_conn = conn(Role.EDGE, "I")
    router.connection_opened(uplink_conn, now=0.0)
    client = conn(container="app")
    near, (forward,) = router.link_routing.forward_direct(
        client, uplink_conn, name="lnk", address="broker.q", receiving=True, handle="lptr")
    assert isinstance(forward, ForwardAttach)
    assert forward.far.conn is uplink_conn and forward.address == "broker.q"
    assert forward.name == "lnk@app" and not forward.far.receiving
    assert near.partner is forward.far and near.conn is client
