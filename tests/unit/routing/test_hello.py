"""HELLO, neighbour discovery and neighbour loss (docs/networks.md#control-messages,
docs/networks.md#link-state-and-paths), with a fake clock."""

from __future__ import annotations

import logging

import pytest

from router.core.routing import (
    ALL,
    DuplicateRouterId,
    Effect,
    Hello,
    RouterAdded,
    RoutesChanged,
    RoutingProtocol,
    SendHello,
)
from tests.unit.routing.helpers import advertisements, establish, hellos, of, sent, ticks


def test_first_tick_is_due_at_once_then_every_second() -> None:
    p = RoutingProtocol("A", 100)
    assert p.next_deadline() == float("-inf")
    p.tick(10.0)
    assert p.next_deadline() == 11.0
    assert p.tick(10.5) == []
    p.tick(11.0)
    assert p.next_deadline() == 12.0
    p.tick(15.2)  # late: the next one is a second after now
    assert p.next_deadline() == pytest.approx(16.2)


def test_hello_goes_on_every_connected_link_every_interval() -> None:
    p = RoutingProtocol("A", 100, hello_interval_s=2)
    p.neighbor_connected(3, 1, 0.0)
    p.neighbor_connected(1, 5, 0.0)
    first = hellos(p.tick(0.0))
    assert [h.link_id for h in first] == [1, 3]
    assert first[0].message == Hello(id="A", instance=100, seen=())
    assert first[0].to == "amqp:/_local/qdhello"
    assert hellos(p.tick(1.0)) == []
    assert len(hellos(p.tick(2.0))) == 2


def test_seen_lists_routers_heard_within_max_age() -> None:
    p = RoutingProtocol("A", 100)
    p.neighbor_connected(1, 1, 0.0)
    p.control_received(Hello(id="B", instance=7), 1, 0.0)
    assert hellos(p.tick(0.0))[0].message.seen == ("B",)
    ticks(p, 1.0, 2.0)
    assert hellos(p.tick(3.0))[0].message.seen == ("B",)
    assert hellos(p.tick(4.0))[0].message.seen == ()


def test_a_link_to_a_new_router_is_greeted_on_the_next_tick() -> None:
    p = RoutingProtocol("A", 100)
    p.tick(0.0)
    assert p.neighbor_connected(2, 1, 0.1, peer="B") == []
    assert p.neighbor_connected(3, 1, 0.1) == []
    assert hellos(p.tick(1.0)) == [
        SendHello(link_id=2, message=Hello(id="A", instance=100, seen=())),
        SendHello(link_id=3, message=Hello(id="A", instance=100, seen=()))]


def test_a_link_to_a_router_known_already_is_greeted_at_once() -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B", link=1)
    p.neighbor_disconnected(1, 0.5)
    [hello] = p.neighbor_connected(2, 1, 1.5, peer="B")
    assert hello == SendHello(link_id=2, message=Hello(id="A", instance=100, seen=("B",)))


def test_hello_not_listing_us_does_not_make_a_neighbor_and_is_answered_at_once() -> None:
    p = RoutingProtocol("A", 100)
    p.neighbor_connected(1, 1, 0.0)
    p.neighbor_connected(2, 1, 0.0)
    effects = p.control_received(Hello(id="B", instance=7, seen=["C"]), 1, 0.0)
    assert effects == [SendHello(link_id=1, message=Hello(id="A", instance=100, seen=("B",)))]
    assert p.neighbors == {}
    # still not listing us a second later: answered again, so a lost answer costs a period
    assert len(hellos(p.control_received(Hello(id="B", instance=7), 1, 1.0))) == 1


def test_hello_from_a_router_heard_before_that_lists_us_is_not_answered() -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B")
    assert hellos(p.control_received(Hello(id="B", instance=200, seen=["A"]), 1, 0.5)) == []


def test_hello_listing_us_establishes_the_neighbor_with_the_connection_cost_at_once() -> None:
    p = RoutingProtocol("A", 100)
    effects = establish(p, "B", link=4, cost=7)
    assert of(effects, RouterAdded) == [RouterAdded(id="B")]
    # a new HELLO sender is answered, so it can list us without waiting a period
    assert [h.link_id for h in hellos(effects)] == [4]
    [changed] = of(effects, RoutesChanged)
    assert changed.neighbors == {"B": 4}
    assert changed.routes.next_hop("B") == "B" and changed.routes.cost("B") == 7
    assert p.link_state.peers == {"B": 7}
    assert p.neighbors["B"].cost == 7 and p.neighbors["B"].link_id == 4
    assert p.ls_seq == 1
    assert [e.destination for e in sent(effects, "LSR")] == ["B"]
    assert sent(effects, "RA")[-1].destination is ALL
    assert advertisements(effects)[-1].ls_seq == 1

    effects = p.tick(0.5)  # nothing left for the tick but its periodic work
    assert p.ls_seq == 1
    assert sent(effects, "LSR") == [] and of(effects, RoutesChanged) == []


def test_link_state_changes_between_ticks_bump_ls_seq_at_most_once_a_second() -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B", link=1, now=0.0)
    assert p.ls_seq == 1
    effects = establish(p, "C", link=2, now=0.4)
    assert p.ls_seq == 1 and sent(effects, "RA") == []
    assert p.routes.next_hop("C") == "C"  # the routes do not wait
    assert p.link_state.peers == {"B": 1, "C": 1}
    effects = p.tick(0.5)  # the held change goes out on the tick
    assert p.ls_seq == 2 and advertisements(effects)[-1].ls_seq == 2
    effects = p.neighbor_disconnected(2, 1.6)
    assert p.ls_seq == 3 and advertisements(effects)[-1].ls_seq == 3


def test_neighbor_lost_when_hellos_stop() -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B", now=0.0)
    ticks(p, 0.0, 3.0)
    assert "B" in p.neighbors
    effects = p.tick(4.0)  # last HELLO 4 s ago > hello_max_age_s
    assert p.neighbors == {}
    assert p.link_state.peers == {}
    assert p.ls_seq == 2
    assert advertisements(effects)[-1].ls_seq == 2
    assert of(effects, RoutesChanged)[-1].routes.routes == {}


def test_neighbor_kept_alive_by_hellos() -> None:
    p = RoutingProtocol("A", 100)
    for second in range(10):
        now = float(second)
        establish(p, "B", now=now)
        p.tick(now)
    assert "B" in p.neighbors and p.ls_seq == 1


def test_disconnect_loses_the_neighbor_at_once() -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B", link=2)
    p.tick(0.0)
    effects = p.neighbor_disconnected(2, 0.3)
    [changed] = of(effects, RoutesChanged)
    assert changed.neighbors == {}
    assert p.link_state.peers == {}
    assert hellos(p.tick(1.0)) == []
    assert p.ls_seq == 2


def test_losing_another_connection_keeps_the_neighbor() -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B", link=1)
    p.neighbor_connected(2, 1, 0.0)
    assert p.neighbor_disconnected(2, 0.1) == []
    assert "B" in p.neighbors


def test_cost_change_is_not_picked_up_until_the_neighbor_is_relearnt() -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B", link=1, cost=3)
    p.neighbor_disconnected(1, 0.1)
    establish(p, "B", link=2, cost=5, now=0.2)
    assert p.link_state.peers == {"B": 5}
    establish(p, "B", link=3, cost=9, now=0.3)  # QUIRK: still 5
    assert p.link_state.peers == {"B": 5}


def test_hello_on_unknown_link_is_ignored(caplog: pytest.LogCaptureFixture) -> None:
    p = RoutingProtocol("A", 100)
    with caplog.at_level(logging.WARNING):
        assert p.control_received(Hello(id="B", seen=["A"]), 9, 0.0) == []
        assert p.control_received(Hello(id="B", seen=["A"]), None, 0.0) == []
    assert len(caplog.records) == 1


def test_duplicate_router_id_is_reported_once_at_critical(caplog: pytest.LogCaptureFixture) -> None:
    p = RoutingProtocol("A", 100)
    p.neighbor_connected(1, 1, 0.0)
    with caplog.at_level(logging.CRITICAL):
        first = p.control_received(Hello(id="A", instance=999, seen=["A"]), 1, 0.0)
        again = p.control_received(Hello(id="A", instance=999), 1, 1.0)
    assert first == [DuplicateRouterId(id="A", instance=999, link_id=1)]
    assert again == []
    assert [r.getMessage() for r in caplog.records] == [
        "[A] Detected Neighbor Router with a Duplicate ID - A"]
    assert p.neighbors == {}


def test_own_hello_echo_with_our_instance_is_silently_ignored() -> None:
    p = RoutingProtocol("A", 100)
    p.neighbor_connected(1, 1, 0.0)
    assert p.control_received(Hello(id="A", instance=100), 1, 0.0) == []


def test_log_lines_carry_the_router_id(caplog: pytest.LogCaptureFixture) -> None:
    p = RoutingProtocol("A", 100)
    with caplog.at_level(logging.INFO, logger="router.core.routing"):
        establish(p, "B")
    assert any(r.name == "router.core.routing.linkstate"
               and r.getMessage() == "[A] neighbor B established on link 1, cost 1"
               for r in caplog.records)


def test_a_stall_of_the_routers_own_does_not_drop_its_neighbours() -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B", now=0.0)
    ticks(p, 0.0, 1.0)
    effects = p.tick(6.0)  # the loop was held 4 s past the tick due at 2.0
    assert "B" in p.neighbors, "the HELLOs waiting unread are not missing"
    assert of(effects, RoutesChanged) == []
    effects = p.tick(7.0)
    assert "B" in p.neighbors
    effects = p.tick(8.0)  # 3 s of listening with no HELLO from B
    assert p.neighbors == {}
    assert of(effects, RoutesChanged)[-1].routes.routes == {}


def _heard_each_second(p: RoutingProtocol, start: float, stop: float) -> list[Effect]:
    """Frames (no HELLO) arrive on link 1 before each tick from ``start`` to ``stop``."""
    effects: list[Effect] = []
    now = start
    while now <= stop:
        p.neighbor_heard(1, now)
        effects += p.tick(now)
        now += 1.0
    return effects


def test_a_slow_neighbour_whose_connection_still_brings_frames_is_kept(
        caplog: pytest.LogCaptureFixture) -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B", now=0.0)
    ticks(p, 0.0, 1.0)
    with caplog.at_level(logging.WARNING, logger="router.core.routing"):
        effects = _heard_each_second(p, 2.0, 12.0)
    assert "B" in p.neighbors, "a HELLO 12 s late is excused while frames come"
    assert of(effects, RoutesChanged) == []
    # What A sends B keeps listing B, so that B keeps A as its neighbour too.
    assert hellos(effects)[-1].message.seen == ("B",)
    excused = [r.getMessage() for r in caplog.records if "still brings frames" in r.getMessage()]
    assert excused == ["[A] no HELLO from B for 4.0s, but its connection still brings frames: "
                       "kept as a neighbour while it does, for up to 12s"]
    # A HELLO is back: the next late one is excused (and said) again.
    p.control_received(Hello(id="B", instance=200, seen=["A"]), 1, 12.5)
    ticks(p, 13.0, 15.0)
    assert "B" in p.neighbors


def test_a_neighbour_that_sends_frames_but_no_hello_is_dropped_after_four_max_ages() -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B", now=0.0)
    ticks(p, 0.0, 1.0)
    _heard_each_second(p, 2.0, 12.0)
    assert "B" in p.neighbors
    p.neighbor_heard(1, 13.0)
    effects = p.tick(13.0)  # the HELLO is 13 s old: past 4 x hello_max_age_s
    assert p.neighbors == {}
    assert of(effects, RoutesChanged)[-1].routes.routes == {}
    assert hellos(p.tick(14.0))[0].message.seen == ()


def test_frames_that_stopped_do_not_keep_a_neighbour_past_its_max_age() -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B", now=0.0)
    ticks(p, 0.0, 1.0)
    _heard_each_second(p, 2.0, 4.0)  # frames until 4.0, then nothing
    ticks(p, 5.0, 7.0)
    assert "B" in p.neighbors
    p.tick(8.0)  # nothing heard for more than 3 s
    assert p.neighbors == {}


def test_frames_on_another_link_do_not_excuse_a_neighbour() -> None:
    p = RoutingProtocol("A", 100)
    establish(p, "B", now=0.0, link=1)
    establish(p, "C", now=0.0, link=2)
    ticks(p, 0.0, 3.0)
    p.control_received(Hello(id="C", instance=200, seen=["A"]), 2, 3.5)
    p.neighbor_heard(2, 4.0)
    p.tick(4.0)
    assert set(p.neighbors) == {"C"}
