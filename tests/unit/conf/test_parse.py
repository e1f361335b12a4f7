"""The conf syntax: sections, comments, values, JSON maps, name normalisation."""

from __future__ import annotations

import pytest

from addressing import AddressSpec
from conf import (
    ConfError,
    Distribution,
    ListenerSection,
    RouterMode,
    VhostSection,
    camel_case,
    parse,
)


def test_comments_full_line_and_trailing_are_ignored() -> None:
    conf = parse(
        """\
# a comment
   # an indented comment
router {   # after the brace
    mode: interior   # after a value
    id: R1#no-space-needed
}  # after the closing brace
""",
        "hopd.conf",
    )
    assert conf.router.mode is RouterMode.INTERIOR
    assert conf.router.id == "R1"


@pytest.mark.parametrize(
    ("line", "pattern"),
    [
        ("pattern: a.#.b", "a.#.b"),
        ("pattern: #", "#"),
        ("pattern: news/#   # trailing comment", "news/#"),
        ("pattern: a.*.#\t# tab then comment", "a.*.#"),
    ],
)
def test_hash_inside_a_pattern_value_is_part_of_the_value(line: str, pattern: str) -> None:
    conf = parse(f"address {{\n    {line}\n}}\n", "hopd.conf")
    assert conf.addresses[0].pattern == pattern


def test_hash_inside_a_binding_key_and_hostname_is_kept() -> None:
    conf = parse(
        """\
exchange {
    name: ex
    address: ex
}
binding {
    exchangeName: ex
    binding-key: a.#
    nextHopAddress: q
}
vhost {
    hostname: host#1  # comment
}
""",
        "hopd.conf",
    )
    assert conf.bindings[0].binding_key == "a.#"
    assert conf.vhosts[0] == VhostSection(hostname="host#1")


def test_hash_in_a_prefix_starts_a_comment() -> None:
    conf = parse("address {\n    prefix: a#b\n}\n", "hopd.conf")
    assert conf.addresses[0].prefix == "a"


def test_quoted_value_may_hold_a_hash_and_blanks() -> None:
    conf = parse('address {\n    prefix: " a#b "\n}\n', "hopd.conf")
    assert conf.addresses[0].prefix == " a#b "


def test_values_may_contain_blanks() -> None:
    conf = parse("listener {\n    saslMechanisms:   ANONYMOUS PLAIN   \n}\n", "hopd.conf")
    assert conf.listeners[0].sasl_mechanisms == "ANONYMOUS PLAIN"


def test_empty_value_is_the_empty_string() -> None:
    conf = parse("listener {\n    host:\n}\n", "hopd.conf")
    assert conf.listeners[0].host == ""


def test_crlf_line_ends_are_accepted() -> None:
    conf = parse("router {\r\n    id: R\r\n}\r\n", "hopd.conf")
    assert conf.router.id == "R"


def test_blank_lines_and_indentation_do_not_matter() -> None:
    conf = parse("\n\n   router    {\n\n\tid:R\n\n      }\n\n", "hopd.conf")
    assert conf.router.id == "R"


def test_multi_line_open_properties_are_raw_json() -> None:
    conf = parse(
        """\
listener {
    openProperties: {
        "cluster": "east",   # comments are allowed
        "limits": {
            "a": [1, 2.5, true, null],
        },
        "note": "has a # inside",
    }
    port: 0
}
""",
        "hopd.conf",
    )
    assert conf.listeners[0].open_properties == {
        "cluster": "east",
        "limits": {"a": [1, 2.5, True, None]},
        "note": "has a # inside",
    }
    assert conf.listeners[0].port == "0"


def test_json_map_may_close_on_the_line_of_its_last_entry() -> None:
    conf = parse('connector {\n    openProperties: {"n": {"a": 1}}\n}\n', "hopd.conf")
    assert conf.connectors[0].open_properties == {"n": {"a": 1}}


def test_vhost_groups_are_raw_json() -> None:
    conf = parse(
        """\
vhost {
    hostname: example.com
    groups: {
        "$default": {
            "users": "*",
            "maxSenders": 10,
            "allowAnonymousSender": true
        }
    }
}
""",
        "hopd.conf",
    )
    assert conf.vhosts[0].groups == {
        "$default": {"users": "*", "maxSenders": 10, "allowAnonymousSender": True}
    }


@pytest.mark.parametrize("spelling", ["linkRoute", "link-route", "link_route", "link.route"])
def test_section_names_are_normalised(spelling: str) -> None:
    conf = parse(f"{spelling} {{\n    prefix: q\n    direction: in\n}}\n", "hopd.conf")
    assert conf.link_routes[0].prefix == "q"


@pytest.mark.parametrize(
    "spelling", ["maxFrameSize", "max-frame-size", "max_frame_size", "max-FRAME-size"]
)
def test_attribute_names_are_normalised(spelling: str) -> None:
    conf = parse(f"listener {{\n    {spelling}: 1024\n}}\n", "hopd.conf")
    assert conf.listeners[0].max_frame_size == 1024


def test_ssl_profile_section_dash_spelling() -> None:
    conf = parse("ssl-profile {\n    name: tls\n    ca-cert-file: /ca.pem\n}\n", "hopd.conf")
    assert conf.ssl_profiles[0].ca_cert_file == "/ca.pem"


def test_first_word_keeps_its_case() -> None:
    assert camel_case("Max-frame-size") == "MaxFrameSize"
    with pytest.raises(ConfError, match="unknown attribute 'MaxFrameSize'"):
        parse("listener {\n    MaxFrameSize: 1024\n}\n", "hopd.conf")


def test_sections_keep_file_order() -> None:
    conf = parse(
        """\
address {
    prefix: b
    distribution: closest
}
address {
    pattern: a.*
}
""",
        "hopd.conf",
    )
    assert conf.addresses == (
        AddressSpec(prefix="b", distribution=Distribution.CLOSEST),
        AddressSpec(pattern="a.*"),
    )


def test_one_listener_with_defaults() -> None:
    conf = parse("listener {\n}\n", "hopd.conf")
    assert conf.listeners == (ListenerSection(),)


def test_json_string_escape_error_is_reported() -> None:
    with pytest.raises(ConfError, match=r"hopd.conf:2:27: syntax error: invalid escape"):
        parse('listener {\n    openProperties: {"a": "\\q"}\n}\n', "hopd.conf")


def test_unclosed_json_map_is_reported_at_its_brace() -> None:
    with pytest.raises(ConfError) as info:
        parse('listener {\n    openProperties: {\n        "a": 1,\n', "hopd.conf")
    assert [str(d) for d in info.value.diagnostics] == [
        "hopd.conf:1:1: section 'listener' is not closed (missing '}')",
        "hopd.conf:2:21: map value of 'openProperties' is not closed (missing '}')",
    ]


def test_bad_json_inside_a_map_skips_to_its_end() -> None:
    with pytest.raises(ConfError) as info:
        parse(
            """\
listener {
    openProperties: {
        "a" 1,
        "b": {
        }
    }
    prot: 1
}
""",
            "hopd.conf",
        )
    assert [str(d) for d in info.value.diagnostics] == [
        "hopd.conf:3:13: syntax error: expected ':', got '1'",
        "hopd.conf:7:5: unknown attribute 'prot' in section 'listener' (did you mean 'port'?)",
    ]


def test_pattern_value_with_blanks_gets_a_hint() -> None:
    with pytest.raises(ConfError) as info:
        parse("address {\n    pattern: a b\n}\n", "hopd.conf")
    assert str(info.value) == (
        "hopd.conf:2:16: syntax error: expected end of line, got 'b' "
        "(a 'pattern' value is one word; quote it to include blanks)"
    )


def test_quoted_value_followed_by_text_is_refused() -> None:
    with pytest.raises(ConfError, match=r"hopd.conf:2:17: syntax error: expected end of line"):
        parse('address {\n    prefix: "a" b\n}\n', "hopd.conf")
