"""The conf syntax (``name { key: value }``), read line by line into a ``Document``.

Owns the line structure of the syntax: where logical lines end (a line that
ends inside a JSON map continues on the next one), how lines nest into
sections, and recovery after a bad line so that every error of a file is
reported.  What a single line may look like is ``grammar.lark``'s business;
what names and values mean is the schema's.  It must not type values.
"""

from __future__ import annotations

import re

import attrs
import lark

from conf.diagnostics import DiagnosticSink, Position
from conf.document import ArrayValue, Node, ObjectValue, RawAttribute, RawSection, Scalar
from conf.grammar import SyntaxProblem, json_node, parse_line, token_pos
from conf.names import ONE_WORD_KEYS, camel_case

__all__ = ["read_conf"]

# A line whose value opens a JSON map; it may continue on the following lines.
_JSON_START = re.compile(r"[ \t\f]*([A-Za-z0-9_.\-]+)[ \t\f]*:[ \t\f]*\{")
_KEY = re.compile(r"[ \t\f]*([A-Za-z0-9_.\-]+)[ \t\f]*:")


@attrs.frozen(kw_only=True)
class _SectionOpen:
    name: str
    pos: Position


@attrs.frozen(kw_only=True)
class _SectionClose:
    pos: Position


_LineItem = _SectionOpen | _SectionClose | RawAttribute


@attrs.define
class _OpenSection:
    name: str
    pos: Position
    attributes: list[RawAttribute] = attrs.field(factory=list)
    damaged: bool = False

    def close(self) -> RawSection:
        return RawSection(
            name=self.name, pos=self.pos, attributes=tuple(self.attributes), damaged=self.damaged
        )


def _shift(pos: Position, offset: int) -> Position:
    return Position(line=pos.line + offset, column=pos.column)


def _shift_node(node: Node, offset: int) -> Node:
    return attrs.evolve(node, pos=_shift(node.pos, offset), value=_shift_value(node, offset))


def _shift_value(node: Node, offset: int) -> Scalar | ObjectValue | ArrayValue:
    value = node.value
    if isinstance(value, ObjectValue):
        members = tuple((_shift_node(k, offset), _shift_node(v, offset)) for k, v in value.members)
        return ObjectValue(members=members)
    if isinstance(value, ArrayValue):
        return ArrayValue(items=tuple(_shift_node(item, offset) for item in value.items))
    return value


def _bracket_depth(line: str) -> int:
    """Net count of JSON brackets one line opens, ignoring strings and a ``#`` comment."""
    depth = 0
    in_string = escaped = False
    for char in line:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "#":
            break
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
    return depth


def _attribute(tree: lark.Tree[lark.Token], offset: int) -> RawAttribute:
    key_token = tree.children[0]
    assert isinstance(key_token, lark.Token)
    key_pos = _shift(token_pos(key_token), offset)
    if len(tree.children) == 1:
        value = Node(pos=key_pos, value="")
    else:
        item = tree.children[1]
        if isinstance(item, lark.Token) and item.type in ("VALUE", "HASH_VALUE"):
            value = Node(pos=_shift(token_pos(item), offset), value=str(item).rstrip())
        else:
            value = _shift_node(json_node(item), offset)
    return RawAttribute(key=str(key_token), key_pos=key_pos, value=value)


class _Reader:
    """Walks the physical lines once, keeping the section being filled."""

    def __init__(self, text: str, sink: DiagnosticSink) -> None:
        self.lines = [line.removesuffix("\r") for line in text.split("\n")]
        self.sink = sink
        self.index = 0
        self.current: _OpenSection | None = None
        self.sections: list[RawSection] = []

    def read(self) -> list[RawSection]:
        while self.index < len(self.lines):
            start = self.index
            self.index += 1
            stripped = self.lines[start].strip()
            if not stripped or stripped.startswith("#"):
                continue
            item = self._parse_logical_line(start)
            if item is not None:
                self._apply(item)
        if self.current is not None:
            self.sink.error(
                self.current.pos, f"section {self.current.name!r} is not closed (missing '}}')"
            )
            self.sections.append(self.current.close())
        return self.sections

    def _parse_logical_line(self, start: int) -> _LineItem | None:
        first = self.lines[start]
        json_start = _JSON_START.match(first)
        text = first
        while True:
            try:
                return _line_item(parse_line(text), start)
            except SyntaxProblem as problem:
                if problem.at_end and json_start is not None:
                    if self.index < len(self.lines):
                        text += "\n" + self.lines[self.index]
                        self.index += 1
                        continue
                    key = json_start.group(1)
                    self.sink.error(
                        Position(line=start + 1, column=json_start.end()),
                        f"map value of {key!r} is not closed (missing '}}')",
                    )
                    return None
                self._report(problem, start, first)
                if json_start is not None:
                    opened = text[json_start.end() - 1 :].split("\n")
                    self._skip_rest_of_map(sum(_bracket_depth(line) for line in opened))
                return None

    def _report(self, problem: SyntaxProblem, start: int, first: str) -> None:
        message = f"syntax error: {problem.message}"
        key = _KEY.match(first)
        if key is not None and camel_case(key.group(1)) in ONE_WORD_KEYS and not problem.at_end:
            message += f" (a {key.group(1)!r} value is one word; quote it to include blanks)"
        self.sink.error(_shift(problem.pos, start), message)
        if self.current is not None:
            self.current.damaged = True

    def _skip_rest_of_map(self, depth: int) -> None:
        """After an error inside a JSON map, skip to the line that closes it."""
        while depth > 0 and self.index < len(self.lines):
            depth += _bracket_depth(self.lines[self.index])
            self.index += 1

    def _apply(self, item: _LineItem) -> None:
        if isinstance(item, _SectionOpen):
            if self.current is not None:
                self.sink.error(
                    item.pos,
                    f"section {item.name!r} starts inside section {self.current.name!r} "
                    f"opened at {self.current.pos} (missing '}}' before this line)",
                )
                self.sections.append(self.current.close())
            self.current = _OpenSection(name=item.name, pos=item.pos)
        elif isinstance(item, _SectionClose):
            if self.current is None:
                self.sink.error(item.pos, "unmatched '}' outside any section")
            else:
                self.sections.append(self.current.close())
                self.current = None
        elif self.current is None:
            self.sink.error(
                item.key_pos,
                f"attribute {item.key!r} outside any section "
                "(expected a section header such as 'listener {')",
            )
        else:
            self.current.attributes.append(item)


def _line_item(tree: lark.Tree[lark.Token], offset: int) -> _LineItem:
    """Convert a parsed line; ``offset`` is the 0-based index of its first physical line.

    Raises:
        SyntaxProblem: for a quoted string with a bad escape.
    """
    (item,) = tree.children
    assert isinstance(item, lark.Tree)
    if item.data == "section_open":
        name = item.children[0]
        assert isinstance(name, lark.Token)
        return _SectionOpen(name=str(name), pos=_shift(token_pos(name), offset))
    if item.data == "section_close":
        brace = item.children[0]
        assert isinstance(brace, lark.Token)
        return _SectionClose(pos=_shift(token_pos(brace), offset))
    return _attribute(item, offset)


def read_conf(text: str, sink: DiagnosticSink) -> list[RawSection]:
    """Read conf-syntax ``text`` into sections, recording syntax errors in ``sink``.

    Sections are returned even when some lines were bad, so the schema can
    still report the problems of the good lines.
    """
    return _Reader(text, sink).read()
