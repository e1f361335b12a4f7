"""hopmanage's command line: ``name=value`` attributes, type names, JSON output."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from router.tools.client import PREFIX
from router.tools.hopmanage import (
    attribute_value,
    hopmanage,
    long_type,
    parse_attributes,
    plain,
    to_json,
)


@pytest.mark.parametrize(("text", "value"), [
    ("10", 10), ("-3", -3), ("1.5", 1.5), ("true", True), ("false", False), ("null", None),
    ('["a", 1]', ["a", 1]), ('{"k": 2}', {"k": 2}), ('"10"', "10"),
    ("multicast", "multicast"), ("a b", "a b"), ("", ""), ("{broken", "{broken"),
    ("NaN", "NaN"), ("Infinity", "Infinity"),
])
def test_values_are_json_when_they_parse_else_text(text: str, value: object) -> None:
    assert attribute_value("prefix", text) == value


@pytest.mark.parametrize("key", ["name", "identity", "type"])
def test_names_are_always_text(key: str) -> None:
    assert attribute_value(key, "123") == "123"
    assert attribute_value(key, "true") == "true"


def test_parse_attributes() -> None:
    assert parse_attributes(["prefix=a=b", "waypoint=true", "phase=1", "cost"]) == {
        "prefix": "a=b", "waypoint": True, "phase": 1, "cost": None}


def test_an_attribute_needs_a_name() -> None:
    with pytest.raises(click.BadParameter):
        parse_attributes(["=x"])


@pytest.mark.parametrize(("short", "full"), [
    ("address", PREFIX + "router.config.address"),
    ("linkRoute", PREFIX + "router.config.linkRoute"),
    ("autoLink", PREFIX + "router.config.autoLink"),
    ("link", PREFIX + "router.link"),
    ("node", PREFIX + "router.node"),
    ("router.link", PREFIX + "router.link"),
    ("connection", PREFIX + "connection"),
    ("listener", PREFIX + "listener"),
    (PREFIX + "log", PREFIX + "log"),
    ("org.amqp.management", "org.amqp.management"),
    (None, None),
])
def test_short_type_names_are_qualified_as_qdmanage_does(short: str | None,
                                                         full: str | None) -> None:
    assert long_type(short) == full


def test_plain_turns_amqp_values_into_json_ones() -> None:
    class Symbol(str):
        pass

    class Int32(int):
        pass

    value = {Symbol("k"): [Int32(5), b"bytes", (1, 2)], "n": None, "t": True}
    assert plain(value) == {"k": [5, "bytes", [1, 2]], "n": None, "t": True}
    assert type(plain(Int32(3))) is int


def test_json_is_indented_with_keys_in_the_routers_order() -> None:
    assert to_json({"b": 1, "a": [2]}, 2) == '{\n  "b": 1,\n  "a": [\n    2\n  ]\n}'
    assert to_json({"b": 1, "a": 2}, -1) == '{"b": 1, "a": 2}'
    assert json.loads(to_json({"x": object()}, 2))["x"].startswith("<object")


def test_operations_take_any_case_and_unknown_ones_are_usage_errors() -> None:
    runner = CliRunner()
    assert runner.invoke(hopmanage, ["QUERY", "--help"]).exit_code == 0
    assert runner.invoke(hopmanage, ["Get-Types", "--help"]).exit_code == 0
    result = runner.invoke(hopmanage, ["frobnicate"])
    assert result.exit_code == 2 and "No such command" in result.output


def test_a_bad_attribute_is_a_usage_error() -> None:
    result = CliRunner().invoke(hopmanage, ["create", "--type", "address", "=x"])
    assert result.exit_code == 2
    assert "has no attribute name" in result.output
