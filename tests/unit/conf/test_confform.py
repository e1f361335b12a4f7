"""Reading the conf syntax fast: each distinct line parsed once, large files in batches.

Lines a file repeats share one parse, and the distinct lines of a large file
are parsed many at a time with ``lines.lark``; neither may change a result
or a diagnostic.
"""

from __future__ import annotations

from typing import Any

import pytest

from conf import ConfError, confform, grammar, parse


def outcome(text: str) -> str | list[str]:
    """The parsed configuration's repr, or the diagnostics."""
    try:
        return repr(parse(text, "hopd.conf"))
    except ConfError as error:
        return [str(d) for d in error.diagnostics]


def diagnostics(text: str) -> list[str]:
    result = outcome(text)
    assert isinstance(result, list), result
    return result


def test_a_repeated_line_is_reported_on_each_of_its_lines() -> None:
    text = "listener {\n    maxFrameSize: big\n}\nlistener {\n    maxFrameSize: big\n}\n"
    message = "invalid value for 'maxFrameSize' in section 'listener': expected an integer"
    assert diagnostics(text) == [
        f"hopd.conf:2:19: {message}, got 'big'",
        f"hopd.conf:5:19: {message}, got 'big'",
    ]


def test_a_repeated_attribute_names_the_line_of_the_first() -> None:
    assert diagnostics("listener {\n    port: 1\n    port: 1\n}\n") == [
        "hopd.conf:3:5: attribute 'port' given twice in section 'listener' (first at 2:5)"
    ]


def test_a_problem_inside_a_repeated_map_points_into_each_line() -> None:
    line = '    openProperties: {"product": 1}\n'
    message = "invalid value for 'openProperties' in section 'listener': "
    assert [d.split(": ", 1)[0] for d in diagnostics(f"listener {{\n{line}}}\n" * 2)] == [
        "hopd.conf:2:22",
        "hopd.conf:5:22",
    ]
    assert diagnostics(f"listener {{\n{line}}}\n")[0].startswith(f"hopd.conf:2:22: {message}")


def test_a_repeated_line_outside_a_section_is_reported_on_each_line() -> None:
    assert diagnostics("mode: interior\nmode: interior\nrouter {\n}\n") == [
        f"hopd.conf:{n}:1: attribute 'mode' outside any section "
        "(expected a section header such as 'listener {')"
        for n in (1, 2)
    ]


# Texts whose reading depends on how lines are cut into entries.
TRICKY_TEXTS = [
    "router {\n    mode: interior   # comment\n    id: R1#x\n}  # after\n",
    "address {\n    pattern: a.#.b\n}\naddress {\n    pattern: news/#   # c\n}\n",
    "address {\n    pattern: a b\n}\n",
    'address {\n    prefix: " a#b "\n}\naddress {\n    prefix: "a" b\n}\n',
    "listener {\n    host:\n    saslMechanisms:   ANONYMOUS PLAIN   \n}\n",
    "router {\r\n    id: R\r\n}\r\n",
    "\n\n   router    {\n\n\tid:R\n\n      }\n\n",
    'listener {\n    openProperties: {\n        "a": [1, 2.5, true, null],  # c\n    }\n'
    "    port: 0\n}\n",
    'connector {\n    openProperties: {"n": {"a": 1}}\n}\n',
    'connector {\n    openProperties: {"n": {"a": 1}} x\n    port: 1\n}\n',
    'listener {\n    openProperties: {"a": "\\q"}\n}\n',
    'listener {\n    openProperties: {\n        "a": 1,\n',
    'listener {\n    openProperties: {\n        "a" 1,\n        "b": {\n        }\n    }\n'
    "    prot: 1\n}\n",
    "router {\n    this is garbage\n}\n",
    "router\n{\n}\n",
    "router { mode: interior }\n",
    "router {\n}\n  }\n",
    "mode: interior\nrouter {\n}\n",
    "listener {\n    port: 5672\nrouter {\n    id: A\n}\n",
    "vhost {\n    hostname: host#1  # c\n}\nbinding {\n    binding-key: a.#\n}\n",
    "router {\n    id: a\x0bb\n}\n",
    "router {\n    id: a\rb\n}\n",
    "router {\n    id: a\x00b\n}\n",
    'router {\n    id: "unterminated\n}\n',
    "listener {\n    port: 1\n    port: 1\n}\n" * 3,
]


@pytest.mark.parametrize("text", TRICKY_TEXTS)
@pytest.mark.parametrize("size", [1, 2, 100])
def test_batches_read_every_text_as_single_lines_do(
    text: str, size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(confform, "_BATCH_MIN_LINES", 10**9)
    expected = outcome(text)
    monkeypatch.setattr(confform, "_BATCH_MIN_LINES", 0)
    monkeypatch.setattr(confform, "_BATCH_SIZE", size)
    monkeypatch.setattr(confform, "_BATCH_MAX_STOPS", 10**9)
    assert outcome(text) == expected


def test_a_large_file_is_reported_as_a_small_one_would_be() -> None:
    section = "address {{\n    prefix: svc{}\n    distribution: balanced\n}}\n"
    sections = [section.format(i) for i in range(2500)]
    sections[1000] = "address {\n    prefix: svc1000\n    distribution: balancd\n}\n"
    sections[1500] = "address {\n    prefix: svc1500\n    garbage here\n}\n"
    sections[2000] = "address {\n    pattern: a b\n}\n"
    assert len(set("".join(sections).split("\n"))) > confform._BATCH_MIN_LINES
    assert diagnostics("".join(sections)) == [
        "hopd.conf:4003:19: invalid value for 'distribution' in section 'address': "
        "expected one of 'multicast', 'closest', 'balanced', 'unavailable' "
        "(or an index 0..3), got 'balancd'",
        "hopd.conf:6003:13: syntax error: expected ':' or '{', got 'here'",
        "hopd.conf:8002:16: syntax error: expected end of line, got 'b' "
        "(a 'pattern' value is one word; quote it to include blanks)",
    ]


@pytest.mark.parametrize(
    ("lines", "parsed"),
    [
        (["a {", "  k: v # c", "pattern: a#b", "}"], 4),
        (["a {", "k: v", "this is bad", "k: w"], 2),
        (["k: v", "openProperties: {", '"a": 1', "}"], 1),
        (['k: {"a": [1]}', "k:", "k"], 2),
        (["oops here"], 0),
    ],
)
def test_a_batch_stops_before_the_first_line_not_an_entry_by_itself(
    lines: list[str], parsed: int
) -> None:
    assert len(grammar.parse_lines(lines)) == parsed


def test_the_batch_grammar_has_the_rules_and_terminals_of_the_line_grammar() -> None:
    line, lines = grammar._parser(), grammar._lines_parser()

    # Inlined rules, and the rules and ignored terminals lark makes up, start with "_".
    def rules(parser: Any, *starts: str) -> set[str]:
        names = {str(rule.origin.name) for rule in parser.rules}
        return {name for name in names if not name.startswith("_")} - set(starts)

    def terminals(parser: Any) -> set[str]:
        names = {str(terminal.name) for terminal in parser.terminals}
        return {name for name in names if not name.startswith("__")}

    assert rules(lines, "lines") == rules(line, "line", "json_file")
    assert terminals(lines) == terminals(line) | {"_NL"}
