"""The lark side of the parser: loading ``grammar.lark``, turning trees into nodes, wording errors.

Owns every use of lark in Hop, including ``lines.lark``, which parses many
lines of the conf syntax at once with ``grammar.lark``'s rules.  Trees and
tokens are converted here into ``conf.document`` nodes and lark exceptions
into messages; neither may leave this module.  It must not assemble
sections or know entity types.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path

import lark

from conf.diagnostics import Position
from conf.document import ArrayValue, Node, ObjectValue

__all__ = [
    "SyntaxProblem",
    "json_node",
    "parse_json_file",
    "parse_line",
    "parse_lines",
    "token_pos",
]

_EXPECTED_WORDS = {
    "COLON": "':'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "LSQB": "'['",
    "RSQB": "']'",
    "COMMA": "','",
    "STRING": "a quoted string",
    "NUMBER": "a number",
    "TRUE": "'true'",
    "FALSE": "'false'",
    "NULL": "'null'",
    "NAME": "a name",
    "HASH_KEY": "a name",
    "VALUE": "a value",
    "HASH_VALUE": "a value",
}
_JSON_VALUE_STARTS = frozenset({"STRING", "NUMBER", "TRUE", "FALSE", "NULL", "LBRACE", "LSQB"})
_END_TYPES = frozenset({"$END", "<END-OF-FILE>"})
# The fallback lexer may return a long token; messages show its first word.
_FIRST_WORD = re.compile(r'"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.\-+]+|\S')


class SyntaxProblem(Exception):
    """A syntax error at ``pos``; ``at_end`` tells that the input ended too early."""

    def __init__(self, pos: Position, message: str, *, at_end: bool = False) -> None:
        super().__init__(message)
        self.pos = pos
        self.message = message
        self.at_end = at_end


@functools.cache
def _parser() -> lark.Lark:
    text = (Path(__file__).parent / "grammar.lark").read_text(encoding="utf-8")
    return lark.Lark(
        text,
        parser="lalr",
        lexer="contextual",
        start=["line", "json_file"],
        maybe_placeholders=False,
    )


@functools.cache
def _lines_parser() -> lark.Lark:
    return lark.Lark.open(
        str(Path(__file__).parent / "lines.lark"),
        parser="lalr",
        lexer="contextual",
        start="lines",
        maybe_placeholders=False,
    )


def token_pos(token: lark.Token) -> Position:
    """The position of ``token``."""
    assert token.line is not None and token.column is not None
    return Position(line=token.line, column=token.column)


def _expected(names: set[str], end_word: str) -> str:
    names = set(names)
    words: list[str] = []
    if names >= _JSON_VALUE_STARTS:
        names -= _JSON_VALUE_STARTS
        words.append("a JSON value")
    if names & _END_TYPES:
        names -= _END_TYPES
        words.append(end_word)
    others = {_EXPECTED_WORDS.get(n, n) for n in names}
    words.extend(sorted(others, key=lambda word: (word.startswith("'"), word)))
    if len(words) <= 1:
        return "".join(words) or "nothing"
    return ", ".join(words[:-1]) + " or " + words[-1]


def _accepted(error: lark.UnexpectedToken) -> set[str]:
    """The terminals really acceptable here (LALR lookahead sets of merged states are wider)."""
    if error.interactive_parser is not None:
        # lark leaves InteractiveParser.accepts unannotated.
        return set(error.interactive_parser.accepts())  # type: ignore[no-untyped-call]
    return set(error.expected)


def _problem(error: lark.UnexpectedInput, text: str, end_word: str) -> SyntaxProblem:
    """Word a lark error; positions at the end of the input point just past its last character."""
    if isinstance(error, lark.UnexpectedToken) and error.token.type not in _END_TYPES:
        token = error.token
        word = _FIRST_WORD.match(str(token))
        shown = word.group(0) if word else str(token)
        return SyntaxProblem(
            token_pos(token), f"expected {_expected(_accepted(error), end_word)}, got {shown!r}"
        )
    if isinstance(error, lark.UnexpectedCharacters):
        char = text[error.pos_in_stream or 0]
        return SyntaxProblem(
            Position(line=error.line, column=error.column),
            f"unexpected character {char!r}; expected {_expected(error.allowed, end_word)}",
        )
    expected: set[str] = set()
    if isinstance(error, lark.UnexpectedToken):
        expected = _accepted(error)
    elif isinstance(error, lark.UnexpectedEOF):
        expected = set(error.expected)
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    column = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return SyntaxProblem(
        Position(line=line, column=column),
        f"expected {_expected(expected, end_word)}, got {end_word}",
        at_end=True,
    )


def parse_line(text: str) -> lark.Tree[lark.Token]:
    """Parse one logical conf line (it may span physical lines inside a JSON map).

    Raises:
        SyntaxProblem: with a position relative to ``text``.
    """
    try:
        return _parser().parse(text, start="line")
    except lark.UnexpectedInput as error:
        raise _problem(error, text, "end of line") from None


def parse_lines(lines: Sequence[str]) -> list[lark.Tree[lark.Token]]:
    """Parse physical lines in one lark call (``lines.lark``), as ``parse_line`` would each.

    Tokens count lines from 1 at ``lines[0]``.  A tree is the entry of a line
    (the one child of the tree ``parse_line`` returns).

    Args:
        lines: lines without a newline, none blank or only a comment.

    Returns:
        The trees of the lines before the first one that ``parse_line`` would
        refuse or that continues on the next line: one per line when every
        line is a valid entry by itself.
    """
    count = len(lines)
    while count:
        try:
            tree = _lines_parser().parse("\n".join(lines[:count]))
        except lark.UnexpectedInput as error:
            # Every newline before the error was shifted, so each line before
            # the error's is an entry by itself: parse just those (at least
            # one line fewer, so that this ends).
            line = error.line if isinstance(error.line, int) and error.line > 0 else count
            count = min(line, count) - 1
            continue
        entries = [child for child in tree.children if isinstance(child, lark.Tree)]
        assert len(entries) == count
        return entries
    return []


def parse_json_file(text: str) -> Node:
    """Parse a whole JSON-form file into one node.

    Raises:
        SyntaxProblem: for a JSON syntax error, with its position.
    """
    try:
        tree = _parser().parse(text, start="json_file")
    except lark.UnexpectedInput as error:
        raise _problem(error, text, "end of file") from None
    (child,) = tree.children
    return json_node(child)


def json_node(item: lark.Tree[lark.Token] | lark.Token) -> Node:
    """Convert a JSON subtree or token of the grammar into a node.

    Raises:
        SyntaxProblem: for a string with an invalid escape.
    """
    if isinstance(item, lark.Token):
        return Node(pos=token_pos(item), value=_scalar(item))
    opener = item.children[0]
    assert isinstance(opener, lark.Token)
    if item.data == "object":
        members: list[tuple[Node, Node]] = []
        for member in item.children[1:]:
            assert isinstance(member, lark.Tree)
            key, value = member.children
            members.append((json_node(key), json_node(value)))
        return Node(pos=token_pos(opener), value=ObjectValue(members=tuple(members)))
    assert item.data == "array"
    items = tuple(json_node(child) for child in item.children[1:])
    return Node(pos=token_pos(opener), value=ArrayValue(items=items))


def _scalar(token: lark.Token) -> str | int | float | bool | None:
    if token.type == "STRING":
        try:
            decoded = json.loads(str(token))
        except ValueError:
            raise SyntaxProblem(
                token_pos(token), f"invalid escape sequence in string {token!s}"
            ) from None
        assert isinstance(decoded, str)
        return decoded
    if token.type == "NUMBER":
        text = str(token)
        return float(text) if any(c in text for c in ".eE") else int(text)
    return {"TRUE": True, "FALSE": False, "NULL": None}[token.type]
