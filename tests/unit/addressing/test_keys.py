"""Address string → routing key (docs/routing.md#routing-keys)."""

from __future__ import annotations

import pytest

from addressing import (
    AddressClass,
    AddressError,
    RoutingKey,
    classify,
    parse_key,
    routing_key,
    strip_address,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("amqp://host:port/a/b", "a/b"),
        ("amqp://host:5672/orders", "orders"),
        ("amqp:/a/b", "a/b"),
        ("//host/a", "a"),
        ("///a", "a"),
        ("/a/b", "a/b"),
        ("a/b", "a/b"),
        ("orders.eu", "orders.eu"),
        ("", ""),
        # one trailing separator only
        ("a/b/", "a/b"),
        ("a.b.", "a.b"),
        ("a.b..", "a.b."),
        ("amqp:/a/b/", "a/b"),
        ("/", ""),
        # an absolute prefix that ends early counts as relative
        ("//host", "//host"),
        ("amqp:/", "amqp:"),
        ("amqp://host", "amqp://host"),
        ("//host/", ""),
        # a ':' in the first character does not start a scheme
        (":/a", ":/a"),
        # qdrouterd's scanner: a ':' read right after ':' does not arm ':/'
        ("a::/b", "a::/b"),
        ("a:::/b", "b"),
        ("x:y:/z", "z"),
    ],
)
def test_strip_address(text: str, expected: str) -> None:
    assert strip_address(text) == expected


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("orders", "M0orders"),
        ("amqp:/orders", "M0orders"),
        ("amqp://host:5672/orders/", "M0orders"),
        ("_local/qdhello", "Lqdhello"),
        ("_topo/0/all/qdrouter", "Tqdrouter"),
        ("amqp:/_topo/0/all/qdrouter.ma", "Tqdrouter.ma"),
        ("_topo/0/Router.A/temp.abc", "Ltemp.abc"),
        ("_topo/0/Router.B/temp.abc", "RRouter.B"),
        ("_topo/0/Router.B/x/y/z", "RRouter.B"),
        ("_topo/0/Router.B", "RRouter.B"),
        ("_topo/1/Router.B/x", "A1"),
        ("_edge/Router.A/x", "Lx"),
        ("_edge/Edge.1/x/y", "HEdge.1"),
        ("_$temp.xyz", "M0_$temp.xyz"),
        ("_other/x", "M0_other/x"),
        ("_local", "M0_local"),
        ("_local/", "M0_local"),
        ("_topo", "M0_topo"),
        ("", "M0"),
    ],
)
def test_classify_on_interior_router(address: str, key: str) -> None:
    assert classify(address, router_id="Router.A").key == key


def test_topo_all_without_area_is_not_broadcast_quirk() -> None:
    assert classify("_topo/all/qdrouter", router_id="A").key == "Rqdrouter"
    assert classify("_topo/all/all/qdrouter", router_id="A").key == "Tqdrouter"
    assert classify("_topo/all/A/x", router_id="A").key == "Lx"


def test_router_class_text_keeps_a_leading_slash() -> None:
    # MODE_TO_SLASH stops at a '/' that follows at least one character.
    assert classify("_topo/0//x/y", router_id="A").key == "R/x"


def test_classify_on_edge_router_sends_foreign_topo_and_edge_up() -> None:
    def key(address: str) -> str:
        return classify(address, router_id="E1", edge_mode=True).key

    assert key("_edge/E1/x") == "Lx"
    assert key("_edge/E2/x") == "L_edge"
    assert key("_topo/0/R1/x") == "L_edge"
    assert key("_topo/1/x") == "L_edge"
    assert key("_topo/0/E1/x") == "Lx"
    assert key("_topo/0/all/qdrouter") == "Tqdrouter"
    assert key("orders") == "M0orders"


def test_mobile_phase_and_fallback() -> None:
    assert classify("q", router_id="A", phase=1).key == "M1q"
    assert classify("q", router_id="A", phase=9).key == "M9q"
    assert classify("dest", router_id="A", fallback=True).key == "MFdest"
    assert classify("q", router_id="A", phase=1) == RoutingKey(
        cls=AddressClass.MOBILE, phase="1", text="q"
    )


def test_phase_does_not_apply_to_non_mobile_keys() -> None:
    key = classify("_local/x", router_id="A", phase=3)
    assert key.phase is None
    assert key.key == "Lx"


@pytest.mark.parametrize("phase", [-1, 10])
def test_bad_phase_is_refused(phase: int) -> None:
    with pytest.raises(AddressError, match="phase must be between 0 and 9"):
        classify("q", router_id="A", phase=phase)
    with pytest.raises(AddressError):
        routing_key("_local/q", router_id="A", phase=phase)


@pytest.mark.parametrize(
    "address",
    ["orders", "amqp:/a/b/", "_local/x", "_topo/0/all/x", "_topo/0/B/x", "_topo/3/x", "_edge/E/x"],
)
@pytest.mark.parametrize("phase", [0, 4])
@pytest.mark.parametrize("fallback", [False, True])
def test_routing_key_is_classify_key(address: str, phase: int, fallback: bool) -> None:
    expected = classify(address, router_id="A", phase=phase, fallback=fallback).key
    assert routing_key(address, router_id="A", phase=phase, fallback=fallback) == expected


@pytest.mark.parametrize(
    ("key", "cls", "phase", "text"),
    [
        ("M0orders", AddressClass.MOBILE, "0", "orders"),
        ("MFdest", AddressClass.MOBILE, "F", "dest"),
        ("M9", AddressClass.MOBILE, "9", ""),
        ("Ltemp.abc", AddressClass.LOCAL, None, "temp.abc"),
        ("RRouter.B", AddressClass.ROUTER, None, "Router.B"),
        ("Tqdrouter", AddressClass.TOPO, None, "qdrouter"),
        ("A1", AddressClass.AREA, None, "1"),
        ("HEdge.1", AddressClass.EDGE, None, "Edge.1"),
        ("Ca.b", AddressClass.LINK_IN_PREFIX, None, "a.b"),
        ("Da.b", AddressClass.LINK_OUT_PREFIX, None, "a.b"),
        ("Ea.*.b", AddressClass.LINK_IN_PATTERN, None, "a.*.b"),
        ("Fa.*.b", AddressClass.LINK_OUT_PATTERN, None, "a.*.b"),
    ],
)
def test_parse_key(key: str, cls: AddressClass, phase: str | None, text: str) -> None:
    parsed = parse_key(key)
    assert parsed == RoutingKey(cls=cls, phase=phase, text=text)
    assert parsed.key == key


@pytest.mark.parametrize("key", ["", "X0a", "Gx", "M", "Mxorders", "m0orders"])
def test_parse_key_refuses_malformed_keys(key: str) -> None:
    with pytest.raises(AddressError):
        parse_key(key)


def test_parse_key_inverts_classify() -> None:
    for address in ["orders", "_local/x", "_topo/0/all/x", "_topo/0/B/x", "_edge/E/x"]:
        key = classify(address, router_id="A", phase=2)
        assert parse_key(key.key) == key


def test_routing_key_record_checks_its_phase() -> None:
    with pytest.raises(AddressError, match="mobile routing key"):
        RoutingKey(cls=AddressClass.MOBILE, text="x")
    with pytest.raises(AddressError, match="mobile routing key"):
        RoutingKey(cls=AddressClass.MOBILE, phase="10", text="x")
    with pytest.raises(AddressError, match="local routing key"):
        RoutingKey(cls=AddressClass.LOCAL, phase="0", text="x")


def test_routing_key_repr_is_short() -> None:
    assert repr(classify("orders", router_id="A")) == "RoutingKey('M0orders')"
