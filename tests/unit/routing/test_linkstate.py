"""RA, LSR and LSU exchange, restarts, expiry, deletion and flux mode
(docs/networks.md#link-state-and-paths)."""

from __future__ import annotations

import logging

import pytest

from router.core.routing import (
    ALL,
    LinkState,
    LinkStateRequest,
    LinkStateUpdate,
    MobileAddressesChanged,
    MobileAddressUpdate,
    RouterAdded,
    RouterLost,
    RoutesChanged,
    RoutingProtocol,
)
from tests.unit.routing.helpers import establish, lsu, of, ra, sent, ticks


def neighbor_b(now: float = 0.0) -> RoutingProtocol:
    """Router A with neighbour B established, B's link state known, one tick run."""
    p = RoutingProtocol("A", 100)
    establish(p, "B", now=now)
    p.control_received(lsu("B", {"A": 1}, instance=200), None, now)
    p.tick(now)
    return p


def test_lsr_is_answered_with_our_link_state() -> None:
    p = neighbor_b()
    [reply] = p.control_received(LinkStateRequest(id="B"), None, 0.5)
    assert reply.destination == "B"  # type: ignore[union-attr]
    assert reply.to == "amqp:/_topo/0/B/qdrouter"  # type: ignore[union-attr]
    assert reply.message == LinkStateUpdate(  # type: ignore[union-attr]
        id="A", instance=100, ls_seq=1, ls=LinkState(id="A", ls_seq=1, peers={"B": 1}))


def test_lsr_from_an_unknown_router_learns_it() -> None:
    p = RoutingProtocol("A", 100)
    effects = p.control_received(LinkStateRequest(id="Z"), None, 0.0)
    assert of(effects, RouterAdded) == [RouterAdded(id="Z")]
    assert [e.destination for e in sent(effects, "LSU")] == ["Z"]


def test_ra_with_newer_ls_seq_sends_an_lsr_at_once() -> None:
    p = neighbor_b()
    effects = p.control_received(ra("B", ls_seq=2, instance=200), None, 0.5)
    [lsr] = sent(effects, "LSR")
    assert lsr.destination == "B" and lsr.message == LinkStateRequest(id="A")
    assert lsr.to == "amqp:/_topo/0/B/qdrouter"
    assert p.control_received(ra("B", ls_seq=1, instance=200), None, 0.6) == []


def test_flooded_copies_of_one_ra_send_one_lsr() -> None:
    p = neighbor_b()
    first = p.control_received(ra("B", ls_seq=2, instance=200), None, 0.5)
    second = p.control_received(ra("B", ls_seq=2, instance=200), None, 0.6)
    assert len(sent(first, "LSR")) == 1 and sent(second, "LSR") == []
    assert len(sent(p.control_received(ra("B", ls_seq=2, instance=200), None, 2.0), "LSR")) == 1


def test_ra_from_an_unreachable_router_requests_as_soon_as_it_is_reachable() -> None:
    p = neighbor_b()
    effects = p.control_received(ra("C", ls_seq=3), None, 0.5)
    assert of(effects, RouterAdded) == [RouterAdded(id="C")]
    assert sent(effects, "LSR") == []
    assert sent(p.tick(1.0), "LSR") == []
    effects = p.control_received(lsu("B", {"A": 1, "C": 1}, ls_seq=2, instance=200), None, 1.5)
    assert [e.destination for e in sent(effects, "LSR")] == ["C"]
    assert of(effects, RoutesChanged)[-1].routes.next_hop("C") == "B"
    assert sent(p.tick(2.0), "LSR") == []


def test_an_unanswered_lsr_is_sent_again_when_the_route_to_its_router_changes() -> None:
    """A - B - D and A - C - D, B the cheaper way: D's RA sends the LSR by B;
    when B is lost it may have died with the link, so it goes again by C."""
    p = RoutingProtocol("A", 100)
    establish(p, "B", link=1, cost=1)
    establish(p, "C", link=2, cost=5)
    p.control_received(lsu("B", {"A": 1, "D": 1}, ls_seq=1, instance=200), None, 0.1)
    p.control_received(lsu("C", {"A": 5, "D": 1}, ls_seq=1, instance=201), None, 0.1)
    p.control_received(lsu("D", {"B": 1, "C": 1}, ls_seq=1, instance=202), None, 0.1)
    assert p.routes.next_hop("D") == "B"
    [lsr] = sent(p.control_received(ra("D", ls_seq=2, instance=202), None, 2.0), "LSR")
    assert lsr.destination == "D"
    effects = p.neighbor_disconnected(1, 2.1)
    assert p.routes.next_hop("D") == "C"
    assert [e.destination for e in sent(effects, "LSR")] == ["D"]
    # answered: a later route change asks nothing more
    p.control_received(lsu("D", {"C": 1}, ls_seq=2, instance=202), None, 2.2)
    assert sent(p.neighbor_disconnected(2, 3.5), "LSR") == []


def test_lsu_is_accepted_only_when_newer() -> None:
    p = neighbor_b()
    p.control_received(lsu("B", {"A": 1, "C": 2}, ls_seq=3, instance=200), None, 0.5)
    p.tick(1.0)
    assert p.routes.cost("C") == 3
    p.control_received(lsu("B", {"A": 1}, ls_seq=3, instance=200), None, 1.5)
    p.control_received(lsu("B", {"A": 1}, ls_seq=2, instance=200), None, 1.6)
    assert of(p.tick(2.0), RoutesChanged) == []
    assert p.routes.cost("C") == 3


def test_lsu_learns_routers_listed_as_peers() -> None:
    p = neighbor_b()
    effects = p.control_received(lsu("B", {"A": 1, "C": 1, "D": 4}, ls_seq=2, instance=200),
                                 None, 0.5)
    assert of(effects, RouterAdded) == [RouterAdded(id="C"), RouterAdded(id="D")]
    assert sorted(e.destination for e in sent(effects, "LSR")) == ["C", "D"]  # type: ignore[type-var]
    [changed] = of(effects, RoutesChanged)
    assert changed.routes.cost("D") == 5 and changed.routes.next_hop("D") == "B"
    assert changed.neighbors == {"B": 1}


def test_own_messages_coming_back_are_ignored() -> None:
    p = neighbor_b()
    assert p.control_received(ra("A", ls_seq=9), None, 0.5) == []
    assert p.control_received(lsu("A", {"X": 1}, ls_seq=9), None, 0.5) == []
    assert p.control_received(LinkStateRequest(id="A"), None, 0.5) == []


def test_ra_goes_out_every_flux_interval_then_every_stable_interval() -> None:
    p = RoutingProtocol("A", 100, ra_interval_s=30, ra_interval_flux_s=4)
    ra_times = []
    for now in range(0, 80):
        effects = establish(p, "B", now=float(now))
        if sent(effects + p.tick(float(now)), "RA"):
            ra_times.append(now)
    # the change at t=0 starts flux mode until t=8; RA at 0 (the new link state
    # at once, then the tick's), 4, 8, then every 30 s
    assert ra_times == [0, 4, 8, 38, 68]
    assert not p.in_flux(20.0)


def test_ra_carries_both_sequence_numbers() -> None:
    p = neighbor_b()
    p.local_address_added("M0x", 2, 0.1)
    ras = sent(p.tick(1.0), "RA")
    assert ras[-1].message == ra("A", ls_seq=1, mobile_seq=1, instance=100)
    assert ras[-1].to == "amqp:/_topo/0/all/qdrouter" and ras[-1].destination is ALL


def test_restart_seen_in_ra_clears_state_withdraws_addresses_and_rerequests() -> None:
    p = neighbor_b()
    p.control_received(ra("B", ls_seq=1, mobile_seq=1, instance=200), None, 0.2)
    p.control_received(
        MobileAddressUpdate(id="B", mobile_seq=1, add=["M0q"], delete=[], hints=[2]), None, 0.3)
    effects = p.control_received(ra("B", ls_seq=1, mobile_seq=0, instance=201), None, 0.5)
    assert of(effects, MobileAddressesChanged) == [
        MobileAddressesChanged(router_id="B", removed=("M0q",))]
    assert [e.destination for e in sent(effects, "LSR")] == ["B"]
    record = {r.id: r for r in p.node_table()}["B"]
    assert record.instance == 201 and record.ls_seq == 0 and record.peers == ()
    assert record.mobile_seq == 0
    assert p.remote_addresses == {}


def test_restart_seen_in_hello_rerequests_link_state() -> None:
    p = neighbor_b()
    effects = establish(p, "B", now=0.5, instance=201)
    assert of(effects, RouterAdded) == []
    assert [e.destination for e in sent(effects, "LSR")] == ["B"]


def test_remote_link_state_expires() -> None:
    p = RoutingProtocol("A", 100, remote_ls_max_age_s=10)
    establish(p, "B")
    p.control_received(lsu("B", {"A": 1, "C": 1}, instance=200), None, 0.0)
    p.tick(0.0)
    assert p.routes.next_hop("C") == "B"
    for second in range(1, 12):
        establish(p, "B", now=float(second))
        effects = p.tick(float(second))
    assert p.routes.next_hop("C") is None
    assert {r.id: r for r in p.node_table()}["B"].peers == ()
    assert of(effects, RouterLost) == []  # B is still a neighbour


def test_unreachable_forgotten_router_is_deleted_after_three_ticks() -> None:
    p = neighbor_b()
    p.control_received(lsu("B", {"A": 1, "C": 1}, ls_seq=2, instance=200), None, 0.1)
    p.tick(1.0)
    p.control_received(lsu("B", {"A": 1}, ls_seq=3, instance=200), None, 1.5)
    lost = [(now, of(p.tick(float(now)), RouterLost)) for now in range(2, 7)]
    assert [(now, e) for now, e in lost if e] == [(4, [RouterLost(id="C")])]
    assert "C" not in {r.id for r in p.node_table()}


def test_deleted_router_gets_its_index_back() -> None:
    p = neighbor_b()
    p.control_received(LinkStateRequest(id="Z"), None, 0.1)
    ticks(p, 1.0, 5.0)
    assert {n.id: n.index for n in p._nodes.nodes.values()} == {"B": 1}
    p.control_received(LinkStateRequest(id="Y"), None, 5.5)
    assert {n.id: n.index for n in p._nodes.nodes.values()} == {"B": 1, "Y": 2}


def test_the_node_table_lists_a_router_only_once_it_has_a_route() -> None:
    p = neighbor_b()
    p.control_received(ra("C", ls_seq=1), None, 0.5)
    assert "C" not in {r.id for r in p.node_table()}


def test_protocol_version_above_ours_is_ignored_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    p = neighbor_b()
    with caplog.at_level(logging.WARNING):
        assert p.control_received(ra("X", ls_seq=5, pv=2), None, 0.5) == []
        assert p.control_received(LinkStateRequest(id="X", pv=2), None, 0.6) == []
    assert [r.getMessage() for r in caplog.records] == [
        "[A] Received RA at protocol version 2 from X.  Ignoring."]
    assert "X" not in {r.id for r in p.node_table()}


def test_protocol_version_zero_is_accepted() -> None:
    p = neighbor_b()
    effects = p.control_received(ra("C", pv=0), None, 0.5)
    assert of(effects, RouterAdded) == [RouterAdded(id="C")]


def test_node_table_reports_management_view() -> None:
    p = neighbor_b()
    p.control_received(lsu("B", {"A": 1, "C": 2}, ls_seq=2, instance=200), None, 0.5)
    p.tick(1.0)
    own, b, c = p.node_table()
    assert (own.id, own.index, own.is_self, own.instance, own.peers, own.ls_seq) == (
        "A", 0, True, 100, (("B", 1),), 1)
    assert own.last_topology_change == 0.5 == p.last_topology_change
    assert (b.id, b.index, b.link_id, b.next_hop, b.cost, b.protocol_version, b.instance) == (
        "B", 1, 1, "B", 1, 1, 200)
    assert (c.id, c.link_id, c.next_hop, c.cost, c.valid_origins) == ("C", None, "B", 3, ())
