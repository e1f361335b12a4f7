"""Rendering: a RouterConf written as conf text parses back to an equal RouterConf."""

from __future__ import annotations

from pathlib import Path

import pytest

from addressing import AddressSpec, Direction
from autolink import AutoLinkSpec
from conf import (
    DEFAULT_CONF_TEXT,
    ListenerSection,
    LogModule,
    LogSection,
    PolicySection,
    RouterConf,
    RouterMode,
    RouterSection,
    VhostSection,
    load,
    parse,
    render,
)
from linkroute import LinkRouteSpec

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def roundtrip(conf: RouterConf) -> RouterConf:
    return parse(render(conf), "rendered.conf")


def test_default_configuration_renders_only_what_differs_from_defaults() -> None:
    assert render(parse(DEFAULT_CONF_TEXT, "default.conf")) == (
        "router {\n"
        "    id: Hop\n"
        "}\n"
        "\n"
        "listener {\n"
        "    host: 127.0.0.1\n"
        "    port: 5672\n"
        "    saslMechanisms: ANONYMOUS\n"
        "}\n"
    )


def test_empty_conf_renders_an_empty_router_section() -> None:
    assert render(RouterConf()) == "router {\n}\n"
    assert roundtrip(RouterConf()) == RouterConf()


def test_non_default_policy_is_rendered() -> None:
    conf = RouterConf(policy=PolicySection(max_connections=10))
    assert "policy {\n    maxConnections: 10\n}\n" in render(conf)
    assert roundtrip(conf) == conf


@pytest.mark.parametrize(
    "prefix",
    ["a#b", " lead", "trail ", '"quoted"', "{brace", "", "tab\there", "new\nline", "é/ü"],
)
def test_strings_the_plain_syntax_cannot_carry_are_quoted(prefix: str) -> None:
    conf = RouterConf(addresses=(AddressSpec(prefix=prefix or "x", name=prefix),))
    assert roundtrip(conf) == conf


@pytest.mark.parametrize("pattern", ["a.#.b", "#", "a b", "x#y z"])
def test_one_word_keys_are_quoted_only_when_they_contain_blanks(pattern: str) -> None:
    conf = RouterConf(addresses=(AddressSpec(pattern=pattern),))
    text = render(conf)
    assert (f"pattern: {pattern}\n" in text) is (" " not in pattern)
    assert roundtrip(conf) == conf


def test_everything_roundtrips() -> None:
    conf = RouterConf(
        router=RouterSection(id="R1", mode=RouterMode.INTERIOR, metadata="x # y"),
        listeners=(
            ListenerSection(
                name="l1",
                port="0",
                open_properties={"k": {"n": [1, 2.5, None, True, "s#"]}},
            ),
        ),
        link_routes=(LinkRouteSpec(pattern="q.#", direction=Direction.OUT, connection="c"),),
        auto_links=(AutoLinkSpec(address="a", direction=Direction.IN, phase=3),),
        logs=(LogSection(module=LogModule.SERVER, enable="debug+", include_source=False),),
        vhosts=(VhostSection(hostname="h#1", groups={"$default": {"users": "*"}}),),
    )
    assert roundtrip(conf) == conf


@pytest.mark.parametrize("name", ["hopd.conf", "hopd.json", "interior-a.conf",
                                  "interior-b.conf", "broker.conf"])
def test_examples_roundtrip(name: str) -> None:
    conf = load(EXAMPLES / name)
    assert roundtrip(conf) == conf


def test_example_conf_and_json_are_the_same_configuration() -> None:
    assert load(EXAMPLES / "hopd.conf") == load(EXAMPLES / "hopd.json")


def test_the_broker_example_has_its_waypoint_autolinks_and_link_routes() -> None:
    conf = load(EXAMPLES / "broker.conf")
    assert [c.name for c in conf.connectors] == ["broker"]
    assert [(a.address, a.direction.value) for a in conf.auto_links] == [
        ("orders", "out"), ("orders", "in")]
    assert [(r.prefix, r.direction.value, r.del_external_prefix) for r in conf.link_routes] == [
        ("broker", "in", "broker."), ("broker", "out", "broker.")]
