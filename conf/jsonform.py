"""The JSON form of the configuration (a file named ``*.json``, docs/operations.md#the-json-form).

Owns the file's shape: an array of ``["sectionName", {attributes}]`` pairs,
where lines whose first non-blank character is ``#`` are comments.  Values
keep their JSON types for the schema to convert.  Hop also ignores a ``#``
comment after JSON on a line (qdrouterd fails on it; nothing is lost by
accepting it).  It must not type values or know entity names.
"""

from __future__ import annotations

from conf.diagnostics import DiagnosticSink
from conf.document import ArrayValue, Node, ObjectValue, RawAttribute, RawSection, describe_kind
from conf.grammar import SyntaxProblem, parse_json_file

__all__ = ["read_json"]

_SHAPE = 'expected ["sectionName", {attributes}]'


def _blank_comment_lines(text: str) -> str:
    """Empty the comment lines, keeping line numbers (and columns) of the others."""
    lines = text.split("\n")
    return "\n".join("" if line.lstrip().startswith("#") else line for line in lines)


def _section(item: Node, sink: DiagnosticSink) -> RawSection | None:
    pair = item.value
    if not isinstance(pair, ArrayValue) or len(pair.items) != 2:
        shown = f"a list of {len(pair.items)} items" if isinstance(pair, ArrayValue) else None
        sink.error(item.pos, f"{_SHAPE}, got {shown or describe_kind(item)}")
        return None
    name, attributes = pair.items
    if not isinstance(name.value, str):
        sink.error(name.pos, f"expected a section name string, got {describe_kind(name)}")
        return None
    if not isinstance(attributes.value, ObjectValue):
        sink.error(
            attributes.pos,
            f"expected a map of attributes for section {name.value!r}, "
            f"got {describe_kind(attributes)}",
        )
        return None
    raw_attributes = []
    for key, value in attributes.value.members:
        assert isinstance(key.value, str)
        raw_attributes.append(RawAttribute(key=key.value, key_pos=key.pos, value=value))
    return RawSection(name=name.value, pos=name.pos, attributes=tuple(raw_attributes))


def read_json(text: str, sink: DiagnosticSink) -> list[RawSection]:
    """Read a JSON-form file into sections, recording problems in ``sink``."""
    try:
        root = parse_json_file(_blank_comment_lines(text))
    except SyntaxProblem as problem:
        sink.error(problem.pos, f"JSON syntax error: {problem.message}")
        return []
    if not isinstance(root.value, ArrayValue):
        sink.error(root.pos, f"expected a JSON list of sections, got {describe_kind(root)}")
        return []
    sections = []
    for item in root.value.items:
        section = _section(item, sink)
        if section is not None:
            sections.append(section)
    return sections
