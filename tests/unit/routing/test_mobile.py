"""Mobile-address synchronisation: MAU and MAR (docs/networks.md#mobile-addresses),
with a fake clock."""

from __future__ import annotations

import logging

import pytest

from router.core.routing import (
    ALL,
    NO_HINT,
    Effect,
    MobileAddressesChanged,
    MobileAddressRequest,
    MobileAddressUpdate,
    RoutingProtocol,
    SendControl,
)
from tests.unit.routing.helpers import establish, lsu, of, ra, sent


def router_a() -> RoutingProtocol:
    """A with neighbour B (instance 200) whose link state is known."""
    p = RoutingProtocol("A", 100)
    establish(p, "B")
    p.control_received(lsu("B", {"A": 1}, instance=200), None, 0.0)
    p.tick(0.0)
    return p


def mau(seq: int, add: list[str] | None = None, delete: list[str] | None = None,
        hints: list[int] | None = None, exist: list[str] | None = None) -> MobileAddressUpdate:
    return MobileAddressUpdate(id="B", mobile_seq=seq, add=add or [], delete=delete or [],
                               hints=hints or [], exist=exist)


def changes(effects: list[Effect]) -> list[MobileAddressesChanged]:
    return of(effects, MobileAddressesChanged)


# --- local side -------------------------------------------------------------------


def test_local_changes_are_batched_into_one_mau_per_tick_then_an_ra() -> None:
    p = router_a()
    assert p.local_address_added("M0a", 2, 0.1) == []
    p.local_address_added("Cb.c", 4, 0.2)
    effects = p.tick(1.0)
    mau_and_ra = [e for e in of(effects, SendControl) if e.message.opcode.value in ("MAU", "RA")]
    assert [e.message.opcode.value for e in mau_and_ra] == ["MAU", "RA"]
    update = mau_and_ra[0]
    assert update.destination is ALL and update.to == "_topo/0/all/qdrouter.ma"
    assert update.message == MobileAddressUpdate(
        id="A", mobile_seq=1, add=["M0a", "Cb.c"], delete=[], hints=[2, 4])
    assert mau_and_ra[1].message.mobile_seq == 1  # type: ignore[union-attr]
    assert sent(p.tick(2.0), "MAU") == []


def test_a_workers_changes_go_out_within_the_batch_time_not_at_the_tick() -> None:
    p = RoutingProtocol("A", 100, mobile_batch_s=0.01)
    establish(p, "B")
    p.control_received(lsu("B", {"A": 1}, instance=200), None, 0.0)
    p.tick(0.0)
    assert p.next_deadline() == 1.0
    p.local_address_added("M0a", 2, 0.1)
    p.local_address_added("M0b", 2, 0.105)
    assert p.next_deadline() == pytest.approx(0.11)
    assert p.tick(0.105) == []  # not yet due
    effects = p.tick(0.11)
    assert [e.message.opcode.value for e in of(effects, SendControl)] == ["MAU", "RA"]
    assert of(effects, SendControl)[0].message == MobileAddressUpdate(
        id="A", mobile_seq=1, add=["M0a", "M0b"], delete=[], hints=[2, 2])
    # Nothing more until the next change or the regular tick, which sends
    # no MAU of its own.
    assert p.next_deadline() == 1.0
    assert sent(p.tick(1.0), "MAU") == []
    p.local_address_removed("M0a", 1.5)
    assert [m.message for m in sent(p.tick(1.51), "MAU")] == [MobileAddressUpdate(
        id="A", mobile_seq=2, add=[], delete=["M0a"], hints=[])]


def test_removal_is_sent_as_del() -> None:
    p = router_a()
    p.local_address_added("M0a", 2, 0.1)
    p.tick(1.0)
    p.local_address_removed("M0a", 1.5)
    [update] = sent(p.tick(2.0), "MAU")
    assert update.message == MobileAddressUpdate(id="A", mobile_seq=2, add=[], delete=["M0a"])
    assert p.mobile_seq == 2


def test_add_and_remove_within_a_tick_cancel_out() -> None:
    p = router_a()
    p.local_address_added("M0a", 2, 0.1)
    p.local_address_removed("M0a", 0.2)
    assert sent(p.tick(1.0), "MAU") == []
    p.local_address_added("M0b", 2, 1.1)
    p.tick(2.0)
    p.local_address_removed("M0b", 2.1)
    p.local_address_added("M0b", 3, 2.2)
    assert sent(p.tick(3.0), "MAU") == []
    assert p.mobile_seq == 1


def test_mar_from_a_router_behind_gets_an_absolute_mau() -> None:
    p = router_a()
    p.local_address_added("M0a", 2, 0.1)
    p.local_address_added("M1b", 3, 0.1)
    p.tick(1.0)
    p.local_address_added("M0c", 2, 1.1)  # not yet announced: not in exist
    [reply] = p.control_received(MobileAddressRequest(id="B", have_seq=0), None, 1.5)
    assert isinstance(reply, SendControl)
    assert reply.destination == "B" and reply.to == "amqp:/_topo/0/B/qdrouter.ma"
    assert reply.message == MobileAddressUpdate(id="A", mobile_seq=1, exist=["M0a", "M1b"],
                                                hints=[2, 3])


def test_mar_from_a_router_up_to_date_gets_nothing() -> None:
    p = router_a()
    p.local_address_added("M0a", 2, 0.1)
    p.tick(1.0)
    assert p.control_received(MobileAddressRequest(id="B", have_seq=1), None, 1.5) == []


def test_mar_from_an_unknown_router_is_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    p = router_a()
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            assert p.control_received(MobileAddressRequest(id="Z", have_seq=0), None, 1.0) == []
    assert [r.getMessage() for r in caplog.records] == [
        "[A] Received MAR from an unknown router with router id Z"]


# --- remote side -------------------------------------------------------------------


def test_differential_mau_in_sequence_is_applied() -> None:
    p = router_a()
    effects = p.control_received(mau(1, add=["M0a", "M0b"], hints=[2, 3]), None, 0.5)
    assert changes(effects) == [MobileAddressesChanged(
        router_id="B", added=(("M0a", 2), ("M0b", 3)))]
    effects = p.control_received(mau(2, add=["M0c"], delete=["M0a"], hints=[1]), None, 0.6)
    assert changes(effects) == [MobileAddressesChanged(
        router_id="B", added=(("M0c", 1),), removed=("M0a",))]
    assert p.remote_addresses == {"B": {"M0b": 3, "M0c": 1}}
    assert {r.id: r for r in p.node_table()}["B"].mobile_seq == 2


def test_out_of_sequence_mau_is_ignored_and_answered_with_one_mar() -> None:
    p = router_a()
    effects = p.control_received(mau(3, add=["M0a"]), None, 0.5)
    assert changes(effects) == []
    [request] = sent(effects, "MAR")
    assert request.destination == "B"
    assert request.message == MobileAddressRequest(id="A", have_seq=0)
    assert p.control_received(mau(4, add=["M0b"]), None, 0.6) == []  # one MAR only
    effects = p.control_received(mau(4, exist=["M0a", "M0b"]), None, 0.7)
    assert changes(effects) == [MobileAddressesChanged(
        router_id="B", added=(("M0a", NO_HINT), ("M0b", NO_HINT)))]
    # a usable MAU clears the flag: the next gap asks again
    assert len(sent(p.control_received(mau(9, add=["M0z"]), None, 0.8), "MAR")) == 1


def test_absolute_mau_replaces_the_set() -> None:
    p = router_a()
    p.control_received(mau(1, add=["M0a", "M0b"], hints=[2, 2]), None, 0.5)
    effects = p.control_received(mau(5, exist=["M0b", "M0c"], hints=[2, 3]), None, 0.6)
    assert changes(effects) == [MobileAddressesChanged(
        router_id="B", added=(("M0c", 3),), removed=("M0a",))]
    assert p.remote_addresses == {"B": {"M0b": 2, "M0c": 3}}


def test_hints_that_do_not_match_the_keys_are_ignored() -> None:
    p = router_a()
    effects = p.control_received(mau(1, add=["M0a", "M0b"], hints=[2]), None, 0.5)
    assert changes(effects)[0].added == (("M0a", NO_HINT), ("M0b", NO_HINT))


def test_mau_from_an_unknown_router_is_dropped() -> None:
    p = router_a()
    assert p.control_received(
        MobileAddressUpdate(id="Z", mobile_seq=1, add=["M0a"]), None, 0.5) == []


def test_ra_with_newer_mobile_seq_sends_a_mar_at_the_tick() -> None:
    p = router_a()
    assert sent(p.control_received(ra("B", mobile_seq=2, instance=200), None, 0.5), "MAR") == []
    [request] = sent(p.tick(1.0), "MAR")
    assert request.message == MobileAddressRequest(id="A", have_seq=0)
    assert sent(p.tick(2.0), "MAR") == []


def test_no_mar_when_a_differential_mau_caught_us_up_before_the_tick() -> None:
    p = router_a()
    p.control_received(ra("B", mobile_seq=1, instance=200), None, 0.5)
    p.control_received(mau(1, add=["M0a"]), None, 0.6)
    assert sent(p.tick(1.0), "MAR") == []


def test_mar_waits_until_the_router_is_reachable() -> None:
    p = router_a()
    p.control_received(ra("C", mobile_seq=1), None, 0.5)
    assert sent(p.tick(1.0), "MAR") == []
    p.control_received(lsu("B", {"A": 1, "C": 1}, ls_seq=2, instance=200), None, 1.5)
    assert [e.destination for e in sent(p.tick(2.0), "MAR")] == ["C"]


def test_addresses_are_withdrawn_when_the_router_is_deleted() -> None:
    p = router_a()
    p.control_received(lsu("B", {"A": 1, "C": 1}, ls_seq=2, instance=200), None, 0.1)
    p.tick(1.0)
    p.control_received(
        MobileAddressUpdate(id="C", mobile_seq=1, add=["M0c"], delete=[]), None, 1.1)
    assert p.remote_addresses == {"C": {"M0c": NO_HINT}}
    p.control_received(lsu("B", {"A": 1}, ls_seq=3, instance=200), None, 1.5)
    withdrawn = [c for now in range(2, 6) for c in changes(p.tick(float(now)))]
    assert withdrawn == [MobileAddressesChanged(router_id="C", removed=("M0c",))]
    assert p.remote_addresses == {}


def test_addresses_are_withdrawn_when_the_link_state_expires() -> None:
    p = RoutingProtocol("A", 100, remote_ls_max_age_s=5)
    establish(p, "B")
    p.control_received(lsu("B", {"A": 1}, instance=200), None, 0.0)
    p.control_received(mau(1, add=["M0a"]), None, 0.0)
    withdrawn = []
    for now in range(0, 8):
        establish(p, "B", now=float(now))
        withdrawn += changes(p.tick(float(now)))
    assert withdrawn == [MobileAddressesChanged(router_id="B", removed=("M0a",))]
