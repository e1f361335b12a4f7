"""The parsed but untyped configuration: sections of ``key: value`` attributes with positions.

Both syntaxes (the conf syntax and the JSON form) produce this document, so
the schema checks one shape.  Values are strings (conf syntax) or JSON values
(JSON form, and the JSON maps of ``openProperties``/``groups``) until the
schema types them.  This module must not know about entity types, attribute
names or lark: it is the boundary where lark trees stop.
"""

from __future__ import annotations

from typing import TypeAlias

import attrs

from conf.diagnostics import Position

Scalar: TypeAlias = str | int | float | bool | None
JsonValue: TypeAlias = str | int | float | bool | dict[str, "JsonValue"] | list["JsonValue"] | None


@attrs.frozen(kw_only=True)
class ObjectValue:
    """A JSON object; members keep their order and their key positions."""

    members: tuple[tuple[Node, Node], ...]


@attrs.frozen(kw_only=True)
class ArrayValue:
    """A JSON array."""

    items: tuple[Node, ...]


@attrs.frozen(kw_only=True)
class Node:
    """A value as written, with the position of its first character."""

    pos: Position
    value: Scalar | ObjectValue | ArrayValue


@attrs.frozen(kw_only=True)
class RawAttribute:
    """One ``key: value`` line (or JSON member) of a section, key as written.

    ``key_pos`` and the positions inside ``value`` are ``line_offset`` lines
    above those in the file; ``at`` gives the latter.  This lets the conf
    reader parse a line that a file repeats once, and share its nodes.
    """

    key: str
    key_pos: Position
    value: Node
    line_offset: int = 0

    def at(self, pos: Position) -> Position:
        """The position in the file of ``pos``, ``key_pos`` or a position inside ``value``."""
        if not self.line_offset:
            return pos
        return Position(line=pos.line + self.line_offset, column=pos.column)

    @property
    def key_position(self) -> Position:
        """The position of the key in the file."""
        return self.at(self.key_pos)


@attrs.frozen(kw_only=True)
class RawSection:
    """One section (``name { ... }`` or ``["name", {...}]``), name as written."""

    name: str
    pos: Position
    attributes: tuple[RawAttribute, ...]
    #: A line of the section was unreadable: checks that need every attribute are skipped.
    damaged: bool = False


def to_plain(node: Node) -> JsonValue:
    """The plain Python value of ``node`` (objects become dicts, arrays lists).

    Object keys must be strings; the grammar guarantees that.
    """
    value = node.value
    if isinstance(value, ObjectValue):
        result: dict[str, JsonValue] = {}
        for key, member in value.members:
            assert isinstance(key.value, str)
            result[key.value] = to_plain(member)
        return result
    if isinstance(value, ArrayValue):
        return [to_plain(item) for item in value.items]
    return value


def from_plain(value: object, pos: Position) -> Node:
    """The node of a plain Python value (the inverse of ``to_plain``); every part
    is at ``pos``, and values of other types become their text."""
    if isinstance(value, dict):
        members = tuple((Node(pos=pos, value=str(k)), from_plain(v, pos))
                        for k, v in value.items())
        return Node(pos=pos, value=ObjectValue(members=members))
    if isinstance(value, list | tuple):
        return Node(pos=pos, value=ArrayValue(items=tuple(from_plain(v, pos) for v in value)))
    if value is None or isinstance(value, bool):
        return Node(pos=pos, value=value)
    # Subclasses (typed AMQP values such as a decoded Long or Symbol) become
    # the plain type, so that they read and print as JSON would.
    for plain in (str, int, float):
        if isinstance(value, plain):
            return Node(pos=pos, value=plain(value))
    return Node(pos=pos, value=str(value))


def describe_kind(node: Node) -> str:
    """A short noun for the JSON kind of ``node``, for messages ("a map", "a number")."""
    value = node.value
    if isinstance(value, ObjectValue):
        return "a map"
    if isinstance(value, ArrayValue):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if value is None:
        return "null"
    return "a string"
