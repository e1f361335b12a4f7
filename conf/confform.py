"""The conf syntax (``name { key: value }``), read line by line into a ``Document``.

Owns the line structure of the syntax: where logical lines end (a line that
ends inside a JSON map continues on the next one), how lines nest into
sections, and recovery after a bad line so that every error of a file is
reported; also parsing each distinct line of a file only once.  What a
single line may look like is ``grammar.lark``'s business (``lines.lark``
reads many at once); what names and values mean is the schema's.  It must
not type values.
"""

from __future__ import annotations

import contextlib
import re

import attrs
import lark

from conf.diagnostics import DiagnosticSink, Position
from conf.document import ArrayValue, Node, ObjectValue, RawAttribute, RawSection, Scalar
from conf.grammar import SyntaxProblem, json_node, parse_line, parse_lines
from conf.names import ONE_WORD_KEYS, camel_case

__all__ = ["read_conf"]

# A line whose value opens a JSON map; it may continue on the following lines.
_JSON_START = re.compile(r"[ \t\f]*([A-Za-z0-9_.\-]+)[ \t\f]*:[ \t\f]*\{")
_KEY = re.compile(r"[ \t\f]*([A-Za-z0-9_.\-]+)[ \t\f]*:")
# Distinct lines from which a file's lines are parsed in batches first: a
# batch saves lark's fixed cost per parse, but needs a parser of its own.
_BATCH_MIN_LINES = 2000
_BATCH_SIZE = 100
# A batch that stops at a bad line (or a line of a multi-line map) is parsed
# again up to that line: past this many, the other lines are parsed alone.
_BATCH_MAX_STOPS = 10


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


def _token_pos(token: lark.Token, offset: int) -> Position:
    assert token.line is not None and token.column is not None
    return Position(line=token.line + offset, column=token.column)


def _attribute(tree: lark.Tree[lark.Token], offset: int) -> RawAttribute:
    key_token = tree.children[0]
    assert isinstance(key_token, lark.Token)
    key_pos = _token_pos(key_token, offset)
    if len(tree.children) == 1:
        value = Node(pos=key_pos, value="")
    else:
        item = tree.children[1]
        if isinstance(item, lark.Token) and item.type in ("VALUE", "HASH_VALUE"):
            value = Node(pos=_token_pos(item, offset), value=str(item).rstrip())
        else:
            value = json_node(item)
            if offset:
                value = _shift_node(value, offset)
    return RawAttribute(key=str(key_token), key_pos=key_pos, value=value)


class _Reader:
    """Walks the physical lines once, keeping the section being filled.

    Large files repeat most lines ("}", "address {", "direction: in"), and a
    lark parse costs far more than moving an item to another line, so each
    distinct logical line is parsed once (``parsed``) into an item placed on
    line 1; the attributes of the document share its nodes and say where they
    are with ``line_offset``.  The distinct lines of a large file are parsed
    in batches first; a line that a batch refuses is left to be parsed alone
    when reached, which reports its errors.
    """

    def __init__(self, text: str, sink: DiagnosticSink) -> None:
        self.lines = [line.removesuffix("\r") for line in text.split("\n")]
        self.sink = sink
        self.index = 0
        self.current: _OpenSection | None = None
        self.sections: list[RawSection] = []
        self.parsed: dict[str, _LineItem] = {}

    def read(self) -> list[RawSection]:
        lines = self.lines
        parsed = self.parsed
        self._parse_distinct_lines()
        while self.index < len(lines):
            start = self.index
            self.index += 1
            # A line parsed before is a whole logical line: nothing to check.
            item = parsed.get(lines[start])
            if item is None:
                stripped = lines[start].strip()
                if not stripped or stripped.startswith("#"):
                    continue
                item = self._parse_logical_line(start)
                if item is None:
                    continue
            self._apply(item, start)
        if self.current is not None:
            self.sink.error(
                self.current.pos, f"section {self.current.name!r} is not closed (missing '}}')"
            )
            self.sections.append(self.current.close())
        return self.sections

    def _parse_logical_line(self, start: int) -> _LineItem | None:
        """The item of the logical line starting at index ``start``, positioned on line 1."""
        first = self.lines[start]
        text = first
        while True:
            try:
                return self._parse(text)
            except SyntaxProblem as problem:
                json_start = _JSON_START.match(first)
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

    def _parse(self, text: str) -> _LineItem:
        """The item of logical line ``text``, positioned on line 1.

        Raises:
            SyntaxProblem: when ``text`` is not a complete, valid line.
        """
        item = self.parsed.get(text)
        if item is None:
            (entry,) = parse_line(text).children
            assert isinstance(entry, lark.Tree)
            item = _line_item(entry, 0)
            self.parsed[text] = item
        return item

    def _parse_distinct_lines(self) -> None:
        """Fill ``parsed`` for the one-line entries of a large file, a batch at a time."""
        pending = []
        for line in dict.fromkeys(self.lines):
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                pending.append(line)
        if len(pending) < _BATCH_MIN_LINES:
            return
        start = stops = 0
        while start < len(pending) and stops <= _BATCH_MAX_STOPS:
            batch = pending[start : start + _BATCH_SIZE]
            entries = parse_lines(batch)
            for index, entry in enumerate(entries):
                # A string with a bad escape is reported when its line is parsed alone.
                with contextlib.suppress(SyntaxProblem):
                    self.parsed[batch[index]] = _line_item(entry, -index)
            start += len(entries)
            if len(entries) < len(batch):
                start += 1  # the line that stopped the batch is parsed alone when reached
                stops += 1

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

    def _apply(self, item: _LineItem, offset: int) -> None:
        """Nest ``item``, whose logical line starts ``offset`` lines below line 1."""
        if isinstance(item, RawAttribute):
            if self.current is None:
                self.sink.error(
                    _shift(item.key_pos, offset),
                    f"attribute {item.key!r} outside any section "
                    "(expected a section header such as 'listener {')",
                )
            else:
                # The nodes are shared by every line with this text.
                self.current.attributes.append(
                    RawAttribute(
                        key=item.key, key_pos=item.key_pos, value=item.value, line_offset=offset
                    )
                )
        elif isinstance(item, _SectionOpen):
            pos = _shift(item.pos, offset)
            if self.current is not None:
                self.sink.error(
                    pos,
                    f"section {item.name!r} starts inside section {self.current.name!r} "
                    f"opened at {self.current.pos} (missing '}}' before this line)",
                )
                self.sections.append(self.current.close())
            self.current = _OpenSection(name=item.name, pos=pos)
        elif self.current is None:
            self.sink.error(_shift(item.pos, offset), "unmatched '}' outside any section")
        else:
            self.sections.append(self.current.close())
            self.current = None


def _line_item(entry: lark.Tree[lark.Token], offset: int) -> _LineItem:
    """Convert the entry of a parsed line, moving the positions lark gave it ``offset`` lines.

    Raises:
        SyntaxProblem: for a quoted string with a bad escape.
    """
    if entry.data == "section_open":
        name = entry.children[0]
        assert isinstance(name, lark.Token)
        return _SectionOpen(name=str(name), pos=_token_pos(name, offset))
    if entry.data == "section_close":
        brace = entry.children[0]
        assert isinstance(brace, lark.Token)
        return _SectionClose(pos=_token_pos(brace, offset))
    return _attribute(entry, offset)


def read_conf(text: str, sink: DiagnosticSink) -> list[RawSection]:
    """Read conf-syntax ``text`` into sections, recording syntax errors in ``sink``.

    Sections are returned even when some lines were bad, so the schema can
    still report the problems of the good lines.
    """
    return _Reader(text, sink).read()
