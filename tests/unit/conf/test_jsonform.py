"""The JSON form: same sections and checks, JSON types, positions of keys and syntax errors."""

from __future__ import annotations

import pytest

from addressing import AddressSpec, Distribution
from conf import ConfError, ListenerSection, RouterMode, parse


def diagnostics(text: str) -> list[str]:
    with pytest.raises(ConfError) as info:
        parse(text, "hopd.json")
    return [str(d) for d in info.value.diagnostics]


def test_json_form_parses_with_json_types() -> None:
    conf = parse(
        """\
# comment lines are blanked
[
  ["router",   {"mode": "interior", "id": "R1"}],
    # an indented comment
  ["listener", {"port": 5672, "authenticatePeer": "no", "maxFrameSize": 1024,
                "openProperties": {"a": [1, 2]}}],
  ["address",  {"prefix": "b", "distribution": "closest"}]
]
""",
        "hopd.json",
    )
    assert conf.router.mode is RouterMode.INTERIOR
    assert conf.listeners == (
        ListenerSection(port="5672", max_frame_size=1024, open_properties={"a": [1, 2]}),
    )
    assert conf.addresses == (AddressSpec(prefix="b", distribution=Distribution.CLOSEST),)


def test_json_names_are_normalised() -> None:
    conf = parse(
        '[["link-route", {"prefix": "q", "dir": "in"}],\n ["listener", '
        '{"max_frame_size": 600, "authenticatePeer": true}]]',
        "x.json",
    )
    assert conf.link_routes[0].prefix == "q"
    assert conf.listeners[0].max_frame_size == 600
    assert conf.listeners[0].authenticate_peer is True


def test_json_enum_index_may_be_a_number() -> None:
    assert parse('[["router", {"mode": 2}]]', "x.json").router.mode is RouterMode.EDGE


def test_json_syntax_error_has_its_position() -> None:
    assert diagnostics('[\n  ["router", {"mode": "interior",}],\n  ["listener" {}]\n]\n') == [
        "hopd.json:3:15: JSON syntax error: expected ',' or ']', got '{'"
    ]


def test_json_unexpected_end_is_reported() -> None:
    assert diagnostics('[["router", {"mode": "interior"}]') == [
        "hopd.json:1:34: JSON syntax error: expected ',' or ']', got end of file"
    ]


def test_json_unknown_attribute_points_at_the_key() -> None:
    assert diagnostics('[\n  ["listener", {"port": 1,\n                "prot": 2}]\n]') == [
        "hopd.json:3:17: unknown attribute 'prot' in section 'listener' (did you mean 'port'?)"
    ]


def test_json_bad_value_points_at_the_value() -> None:
    assert diagnostics('[["listener", {"maxFrameSize": 1.5}]]') == [
        "hopd.json:1:32: invalid value for 'maxFrameSize' in section 'listener': "
        "expected an integer, got a number"
    ]


def test_json_boolean_must_be_a_boolean_or_word() -> None:
    assert diagnostics('[["listener", {"http": 1}]]') == [
        "hopd.json:1:24: invalid value for 'http' in section 'listener': "
        "expected a boolean (yes/true/on or no/false/off), got a number"
    ]


def test_json_string_attribute_refuses_a_boolean() -> None:
    assert diagnostics('[["router", {"id": true}]]') == [
        "hopd.json:1:20: invalid value for 'id' in section 'router': "
        "expected a string, got a boolean"
    ]


def test_json_section_must_be_a_pair() -> None:
    assert diagnostics('[["router"], {"a": 1}, ["log", []], [1, {}]]') == [
        'hopd.json:1:2: expected ["sectionName", {attributes}], got a list of 1 items',
        'hopd.json:1:14: expected ["sectionName", {attributes}], got a map',
        "hopd.json:1:32: expected a map of attributes for section 'log', got a list",
        "hopd.json:1:38: expected a section name string, got a number",
    ]


def test_json_top_level_must_be_a_list() -> None:
    assert diagnostics('{"router": {}}') == [
        "hopd.json:1:1: expected a JSON list of sections, got a map"
    ]


def test_json_semantic_errors_are_positioned() -> None:
    assert diagnostics(
        '[\n ["address", {"prefix": "a",\n  "pattern": "b"}],\n ["router", {}],\n ["router", {}]\n]'
    ) == [
        "hopd.json:3:3: invalid 'address' section: "
        "cannot specify both a 'prefix' and a 'pattern' attribute",
        "hopd.json:5:3: duplicate 'router' section: only one is allowed (the first is at 4:3)",
    ]


def test_empty_json_list_is_the_default_router() -> None:
    assert parse("[]", "hopd.json").listeners == ()
