"""Link-route matching, keys, activation by connections, and learnt routes."""

from __future__ import annotations

import attrs
import pytest

from addressing import Direction
from linkroute import LinkRouteError, LinkRouteSpec, LinkRouteTable, key_pattern, route_key

IN, OUT = Direction.IN, Direction.OUT


@attrs.frozen
class Peer:
    container_id: str
    name: str | None = None


def spec(direction: Direction = IN, **kw: object) -> LinkRouteSpec:
    return LinkRouteSpec(direction=direction, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(("pattern", "direction", "key"), [
    ("a.b/#", IN, "Ca.b"),
    ("a.b/#", OUT, "Da.b"),
    ("$coordinator/#", IN, "C$coordinator"),
    ("a.*.b", IN, "Ea.*.b"),
    ("a.b", OUT, "Fa.b"),
    ("a.*/#", OUT, "Fa.*/#"),
    ("#", IN, "E#"),
])
def test_keys_are_prefix_style_only_for_a_trailing_glob(pattern: str, direction: Direction,
                                                        key: str) -> None:
    assert route_key(pattern, direction) == key


def test_advertised_keys_parse_back_to_their_pattern() -> None:
    assert key_pattern("Ca.b") == ("a.b/#", IN)
    assert key_pattern("Da.b") == ("a.b/#", OUT)
    assert key_pattern("Ea.*.b") == ("a.*.b", IN)
    assert key_pattern("Fx.#.#") == ("x.#", OUT)
    for bad in ("", "C", "M0a", "C..", "Qa"):
        assert key_pattern(bad) is None


def test_matching_by_direction_prefix_and_pattern() -> None:
    table: LinkRouteTable[Peer] = LinkRouteTable([
        spec(IN, prefix="broker"), spec(OUT, pattern="events.*.eu")])
    entry = table.match("broker.queue1", IN)
    assert entry is not None and entry.key == "Cbroker"
    assert table.match("broker.queue1", OUT) is None, "directions are separate"
    assert table.match("amqp://host/broker/q", IN) is entry, "scheme and authority ignored"
    assert table.match("broker", IN) is entry
    assert table.match("brokers.q", IN) is None, "prefixes match whole tokens"
    out = table.match("events.x.eu", OUT)
    assert out is not None and out.key == "Fevents.*.eu"
    assert table.match("events.x.y.eu", OUT) is None


def test_routes_with_the_same_pattern_share_an_entry() -> None:
    table: LinkRouteTable[Peer] = LinkRouteTable([
        spec(prefix="q", connection="one"), spec(pattern="q.#", connection="two")])
    entry = table.match("q.x", IN)
    assert entry is not None and len(entry.routes) == 2
    assert [r.identity for r in table] == ["1", "2"]


def test_a_serving_connection_activates_and_advertises_once() -> None:
    table: LinkRouteTable[Peer] = LinkRouteTable([
        spec(IN, prefix="b", container_id="rabbit"), spec(OUT, prefix="b", container_id="rabbit"),
        spec(IN, prefix="other", connection="elsewhere")])
    first = Peer("rabbit")
    gained = table.connection_opened(first)
    assert sorted(e.key for e in gained) == ["Cb", "Db"]
    assert [r.oper_status for r in table] == ["active", "active", "inactive"]
    second = Peer("rabbit")
    assert table.connection_opened(second) == [], "already advertised"
    entry = table.match("b.q", IN)
    assert entry is not None
    assert entry.next_peer() is first and entry.next_peer() is second, "round robin"
    assert entry.next_peer() is first
    assert table.connection_closed(first) == []
    assert sorted(e.key for e in table.connection_closed(second)) == ["Cb", "Db"]
    assert [r.oper_status for r in table] == ["inactive"] * 3
    assert entry.next_peer() is None


def test_connection_name_matching_uses_the_configured_name() -> None:
    table: LinkRouteTable[Peer] = LinkRouteTable([spec(prefix="b", connection="broker")])
    assert table.connection_opened(Peer("anything", None)) == []
    assert len(table.connection_opened(Peer("anything", "broker"))) == 1


def test_learnt_routes_match_until_forgotten_and_configured_ones_stay() -> None:
    table: LinkRouteTable[Peer] = LinkRouteTable([spec(OUT, prefix="mine")])
    assert table.match("far.q", IN) is None
    learnt = table.learn("Cfar")
    assert learnt is not None and learnt.learnt and not learnt.routes
    assert table.match("far.q", IN) is learnt
    table.forget("Cfar")
    assert table.match("far.q", IN) is None
    table.learn("Dmine")
    table.forget("Dmine")
    assert table.match("mine.q", OUT) is not None, "configuration outlives the advertisement"
    assert table.learn("M0nope") is None
    table.forget("Enever-learnt")


def test_names_must_be_unique() -> None:
    table: LinkRouteTable[Peer] = LinkRouteTable([spec(prefix="a", name="lr")])
    with pytest.raises(LinkRouteError, match="name conflicts"):
        table.add(spec(prefix="b", name="lr"))
    assert len(table) == 1


def test_a_route_added_at_run_time_is_taken_up_by_open_connections() -> None:
    table: LinkRouteTable[Peer] = LinkRouteTable()
    broker = Peer("rabbit")
    assert table.connection_opened(broker) == []
    route = table.add(spec(IN, prefix="late", container_id="rabbit"))
    assert [e.key for e in table.activate(route)] == ["Clate"]
    assert route.oper_status == "active"
    entry = table.match("late.q", IN)
    assert entry is not None and entry.next_peer() is broker
    assert table.connection_closed(broker) != []
    assert table.activate(table.add(spec(OUT, prefix="later", container_id="rabbit"))) == [], \
        "a closed connection takes nothing up"


def test_removing_a_route_withdraws_its_key_only_when_nothing_else_serves_it() -> None:
    first = spec(IN, prefix="q", container_id="a", name="first")
    second = spec(IN, pattern="q/#", container_id="b", name="second")
    table: LinkRouteTable[Peer] = LinkRouteTable([first, second])
    a, b = Peer("a"), Peer("b")
    table.connection_opened(a)
    table.connection_opened(b)
    route_a, route_b = list(table)
    assert table.remove(route_a) == [], "b still serves the pattern"
    entry = table.match("q.x", IN)
    assert entry is not None and entry.rotation == [b]
    assert [e.key for e in table.remove(route_b)] == ["Cq"]
    assert table.match("q.x", IN) is None
    assert len(table) == 0


def test_removing_a_route_keeps_a_learnt_entry() -> None:
    table: LinkRouteTable[Peer] = LinkRouteTable([spec(OUT, prefix="shared", connection="c")])
    table.learn("Dshared")
    [route] = list(table)
    assert table.remove(route) == []
    assert table.match("shared.q", OUT) is not None, "another router still advertises it"


@pytest.mark.parametrize(("kind", "text"), [("prefix", ""), ("prefix", "./"), ("pattern", "///")])
def test_a_prefix_or_pattern_without_tokens_is_no_link_route(kind: str, text: str) -> None:
    with pytest.raises(LinkRouteError, match=f"{kind} invalid - no tokens"):
        LinkRouteSpec(**{kind: text}, direction=IN, container_id="broker")
