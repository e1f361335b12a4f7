"""The network side of the core: remote destinations per address and the
relaying of control messages (docs/networks.md#mobile-addresses,
docs/networks.md#forwarding-control-messages), without sockets.

Topology used below (costs on the edges)::

        B
      1/ \\1
      A   C
      5\\ /5
        D
"""

from __future__ import annotations

from addressing import AddressSpec, Distribution
from router.core import (
    BlockSender,
    Connection,
    ConnectionId,
    IncomingAccepted,
    SendFrame,
    UnblockSender,
)
from router.core.network import HELD_S
from router.core.routing import (
    LinkStateRequest,
    LinkStateUpdate,
    MobileAddressesChanged,
    RouterAdvertisement,
    RoutesChanged,
    compute_routes,
    decode_envelope,
    encode_control,
)
from tests.unit.router.helpers import LINK_STATES, converge, interior, neighbour


def test_remote_consumer_unblocks_a_sender_and_its_withdrawal_blocks_it() -> None:
    router = interior()
    converge(router)
    sender = router.incoming_link_attached(Connection(ConnectionId(9)), name="s", address="q")[0]
    assert isinstance(sender, IncomingAccepted) and sender.link.blocked
    assert router.network is not None
    effects = router.network.apply_protocol(
        [MobileAddressesChanged(router_id="C", added=(("M0q", 3),))], 0.0)
    assert effects == [UnblockSender(link=sender.link)]
    record = router.records["M0q"]
    assert [t.router_id for t in record.remotes] == ["C"]
    assert record.remotes[0].link.peer == "B", "C is reached through B (cost 2 < 10)"
    assert record.remotes[0].cost == 2
    effects = router.network.apply_protocol(
        [MobileAddressesChanged(router_id="C", removed=("M0q",))], 0.0)
    assert effects == [BlockSender(link=sender.link)]
    assert router.records["M0q"].remotes == []


def test_closest_keeps_only_the_cheapest_remote_routers() -> None:
    router = interior(AddressSpec(prefix="near", distribution=Distribution.CLOSEST))
    converge(router)
    assert router.network is not None
    router.network.apply_protocol([MobileAddressesChanged(router_id="C", added=(("M0near.x", 2),)),
                           MobileAddressesChanged(router_id="B", added=(("M0near.x", 2),)),
                           MobileAddressesChanged(router_id="D", added=(("M0near.x", 2),))],
                          0.0)
    record = router.records["M0near.x"]
    assert record.distribution is Distribution.CLOSEST
    assert sorted(t.router_id for t in record.remotes) == ["B", "C", "D"]
    assert [t.router_id for t in record.closest_remotes] == ["B"]


def test_routers_behind_one_next_hop_share_its_count_of_unsettled_deliveries() -> None:
    # qdrouterd counts a balanced address's unsettled deliveries per next-hop
    # connection: a delivery to C (through B) loads B's candidacy as well.
    router = interior()
    converge(router)
    assert router.network is not None
    router.network.apply_protocol([MobileAddressesChanged(router_id="B", added=(("M0q", 3),)),
                           MobileAddressesChanged(router_id="C", added=(("M0q", 3),)),
                           MobileAddressesChanged(router_id="D", added=(("M0q", 3),))], 0.0)
    b, c, d = router.records["M0q"].remotes
    assert (b.router_id, c.router_id, d.router_id) == ("B", "C", "D")
    assert b.hop is c.hop and d.hop is not b.hop
    c.hop.outstanding += 2
    assert (b.load, c.load, d.load) == (2 + 1, 2 + 2, 0 + 5)
    router.network.apply_protocol([MobileAddressesChanged(router_id="C", removed=("M0q",))], 0.0)
    [b_again, _] = router.records["M0q"].remotes
    assert b_again.hop.outstanding == 2, "the count stays with the next hop"


def test_treatment_of_a_learnt_address_comes_from_the_hint_without_local_config() -> None:
    router = interior()
    converge(router)
    assert router.network is not None
    router.network.apply_protocol(
        [MobileAddressesChanged(router_id="C", added=(("M0news", 1),))], 0.0)
    assert router.records["M0news"].distribution is Distribution.MULTICAST


def test_route_change_moves_remote_destinations_to_the_new_next_hop() -> None:
    router = interior()
    converge(router)
    assert router.network is not None
    router.network.apply_protocol([MobileAddressesChanged(router_id="C", added=(("M0q", 3),))], 0.0)
    without_b = {"A": {"D": 5}, "C": {"D": 5}, "D": {"A": 5, "C": 5}}
    router.network.apply_protocol([RoutesChanged(routes=compute_routes(without_b, "A"),
                                         neighbors={"D": 2})], 0.0)
    target = router.records["M0q"].remotes[0]
    assert (target.link.peer, target.cost) == ("D", 10)


def test_router_addresses_are_known_for_every_reachable_router() -> None:
    router = interior()
    converge(router)
    assert router.network is not None
    router.network._router_added("C")
    found = router.lookup("amqp:/_topo/0/C/temp.abc")
    assert found is router.records["RC"]
    assert [t.router_id for t in router.records["RC"].remotes] == ["C"]


def _ra(origin: str) -> bytes:
    message = RouterAdvertisement(id=origin, pv=1, area="0", instance=7, ls_seq=3, mobile_seq=0)
    return encode_control(message, to="amqp:/_topo/0/all/qdrouter", ingress=f"0/{origin}",
                          trace=[f"0/{origin}"])


def test_flooded_ra_is_relayed_to_neighbours_not_in_the_trace_with_us_appended() -> None:
    router = interior()
    to_b, to_d = converge(router)
    assert router.network is not None
    effects = router.network.control_received(to_b, _ra("B"), 0.0)
    frames = [e for e in effects if isinstance(e, SendFrame)]
    assert [f.link for f in frames] == [to_d]
    relayed = decode_envelope(frames[0].data)
    assert list(relayed.trace) == ["0/B", "0/A"]
    assert relayed.ingress == "0/B"


def test_unicast_control_goes_toward_its_router_only() -> None:
    router = interior()
    to_b, to_d = converge(router)
    assert router.network is not None
    message = RouterAdvertisement(id="D", pv=1, area="0", instance=7, ls_seq=3, mobile_seq=0)
    data = encode_control(message, to="amqp:/_topo/0/C/qdrouter", ingress="0/D",
                          trace=["0/D"])
    effects = router.network.control_received(to_d, data, 0.0)
    assert [e.link for e in effects if isinstance(e, SendFrame)] == [to_b]


def test_a_reply_to_a_router_not_yet_routable_goes_once_the_route_is_known() -> None:
    router = interior()
    to_b, _ = converge(router)
    network = router.network
    assert network is not None
    # E asks through B before A has B's link state naming E: no route to E yet.
    lsr = encode_control(LinkStateRequest(id="E"), to="amqp:/_topo/0/A/qdrouter",
                         ingress="0/E", trace=["0/E", "0/B"])
    assert [e for e in network.control_received(to_b, lsr, 1.0) if isinstance(e, SendFrame)] == []
    states = {**LINK_STATES, "B": {**LINK_STATES["B"], "E": 1}, "E": {"B": 1}}
    effects = network.apply_protocol([RoutesChanged(routes=compute_routes(states, "A"),
                                                    neighbors={"B": 1, "D": 2})], 2.0)
    frames = [e for e in effects if isinstance(e, SendFrame)]
    assert [f.link for f in frames] == [to_b]
    reply = decode_envelope(frames[0].data)
    assert reply.to == "amqp:/_topo/0/E/qdrouter"
    assert isinstance(reply.message, LinkStateUpdate) and reply.message.id == "A"
    # Sent once; a reply still without a route after HELD_S is dropped.
    assert not [e for e in network.apply_protocol(
        [RoutesChanged(routes=compute_routes(states, "A"), neighbors={"B": 1, "D": 2})], 3.0)
        if isinstance(e, SendFrame)]
    network.control_received(to_b, encode_control(
        LinkStateRequest(id="F"), to="amqp:/_topo/0/A/qdrouter", ingress="0/F",
        trace=["0/F", "0/B"]), 4.0)
    late = {**states, "B": {**states["B"], "F": 1}, "F": {"B": 1}}
    assert not [e for e in network.apply_protocol(
        [RoutesChanged(routes=compute_routes(late, "A"), neighbors={"B": 1, "D": 2})],
        4.0 + HELD_S + 1) if isinstance(e, SendFrame)]


def test_garbage_on_a_control_link_is_dropped() -> None:
    router = interior()
    to_b, _ = converge(router)
    assert router.network is not None
    assert router.network.control_received(to_b, b"\x00Sp\xff garbage", 0.0) == []


def test_losing_the_only_path_blocks_senders() -> None:
    router = interior()
    converge(router)
    sender = router.incoming_link_attached(Connection(ConnectionId(9)), name="s", address="q")[0]
    assert isinstance(sender, IncomingAccepted)
    assert router.network is not None
    router.network.apply_protocol([MobileAddressesChanged(router_id="B", added=(("M0q", 3),))], 0.0)
    assert not sender.link.blocked
    effects = router.network.apply_protocol([RoutesChanged(routes=compute_routes({"A": {}}, "A"),
                                                   neighbors={})], 0.0)
    assert effects == [BlockSender(link=sender.link)]


def test_data_links_take_their_attach_order_as_priority_both_ways() -> None:
    router = interior()
    rlink = neighbour(router, 1, 1)
    assert [out.priority for out in rlink.data if out is not None] == list(range(10))
    assert router.network is not None
    incoming = [router.network.data_link_attached(rlink.conn, outgoing=False, name=f"i{n}",
                                                  handle=object(), cost=1) for n in range(10)]
    assert [link.priority for link in incoming] == list(range(10))
