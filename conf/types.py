"""Value types of configuration attributes: converting a written value, describing and writing it.

Owns the rules of docs/operations.md#values (strings, integers with ranges,
yes/no booleans, enumerations that also take their index, ports, JSON maps)
as Hop applies them.  A type only sees one value: it must not look at other
attributes or sections.

Also owns lists of names (a comma-separated string or a JSON list) and
``parse_boolean``, the one reading of a boolean word, which option strings
outside the conf use too.
"""

from __future__ import annotations

import abc
import enum
import json
import re
from collections.abc import Callable, Sequence

from conf.diagnostics import Position
from conf.document import ArrayValue, JsonValue, Node, ObjectValue, describe_kind, to_plain

UINT32_MAX = 4294967295
INT32_MAX = 2147483647

_INTEGER = re.compile(r"[+-]?[0-9]+")
_TRUE_WORDS = ("yes", "true", "on")
_FALSE_WORDS = ("no", "false", "off")
_SERVICE_PORTS = {"amqp": 5672, "amqps": 5671}


class ValueTypeError(Exception):
    """A value does not fit its type; ``pos`` points inside the value when known."""

    def __init__(self, message: str, pos: Position | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def parse_boolean(text: str, *, digits: bool = False) -> bool:
    """The boolean a word means: yes, true or on; no, false or off; in any case.

    The one reading of a boolean written as text, for the configuration and
    for option strings alike, so that a misspelt word is an error everywhere
    rather than false somewhere.

    Args:
        text: the word as written.
        digits: also take 1 and 0 (URL and option strings do).

    Raises:
        ValueError: for any other text, naming the words taken.
    """
    word = text.lower()
    if word in _TRUE_WORDS or (digits and word == "1"):
        return True
    if word in _FALSE_WORDS or (digits and word == "0"):
        return False
    true, false = "/".join(_TRUE_WORDS), "/".join(_FALSE_WORDS)
    if digits:
        true, false = true + "/1", false + "/0"
    raise ValueError(f"expected a boolean ({true} or {false}), got {text!r}")


def _text(node: Node, expected: str) -> str:
    """The value as text: strings as written, JSON integers as digits (qdrouterd's ``str()``)."""
    value = node.value
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise ValueTypeError(f"expected {expected}, got {describe_kind(node)}")


class ValueType(abc.ABC):
    """How one kind of attribute value is read, described and written."""

    #: The value is written as JSON text, never quoted as a string.
    writes_json = False

    @abc.abstractmethod
    def convert(self, node: Node) -> object:
        """Type the written value.

        Raises:
            ValueTypeError: when the value does not fit, saying what was expected and got.
        """

    @abc.abstractmethod
    def describe(self) -> str:
        """A short description for the manual page, e.g. ``integer 0..65535``."""

    def format(self, value: object) -> str:
        """The text of ``value`` in the conf syntax (before any quoting)."""
        return str(value)

    def management_type(self) -> str | tuple[str, ...]:
        """The type as qdrouterd's management schema names it (a tuple for an enum)."""
        return "string"

    def plain(self, value: object) -> object:
        """``value`` as management shows it: strings, numbers, booleans, maps."""
        return value

    def warnings(self, node: Node) -> list[tuple[Position, str]]:
        """What a value that converts still deserves a warning for (a part of
        it that is accepted and ignored), each at its position."""
        return []


class StringType(ValueType):
    """Any string; ``check`` may refuse some, returning the reason, and
    ``warn`` say what in one is ignored."""

    def __init__(
        self, description: str = "string", check: Callable[[str], str | None] | None = None,
        warn: Callable[[str], str | None] | None = None,
    ) -> None:
        self._description = description
        self._check = check
        self._warn = warn

    def convert(self, node: Node) -> str:
        text = _text(node, "a string")
        if self._check is not None:
            reason = self._check(text)
            if reason is not None:
                raise ValueTypeError(reason)
        return text

    def warnings(self, node: Node) -> list[tuple[Position, str]]:
        if self._warn is None or not isinstance(node.value, str):
            return []
        said = self._warn(node.value)
        return [] if said is None else [(node.pos, said)]

    def describe(self) -> str:
        return self._description

    def management_type(self) -> str | tuple[str, ...]:
        return "path" if self._description == "path" else "string"


class IntegerType(ValueType):
    """A base-10 integer between ``minimum`` and ``maximum`` inclusive.

    ``floor``: a value from ``minimum`` up to it is taken as ``floor``, with
    the warning ``floor_warning`` (``{value}`` in it is the value given),
    where qdrouterd raises such a value rather than refusing it.
    """

    def __init__(self, minimum: int, maximum: int, *, floor: int | None = None,
                 floor_warning: str = "") -> None:
        self.minimum = minimum
        self.maximum = maximum
        self.floor = floor
        self.floor_warning = floor_warning

    def _number(self, node: Node) -> int:
        text = _text(node, "an integer")
        if not _INTEGER.fullmatch(text.strip()):
            raise ValueTypeError(f"expected an integer, got {text!r}")
        number = int(text)
        if not self.minimum <= number <= self.maximum:
            raise ValueTypeError(
                f"expected an integer between {self.minimum} and {self.maximum}, got {number}"
            )
        return number

    def convert(self, node: Node) -> int:
        number = self._number(node)
        return self.floor if self.floor is not None and number < self.floor else number

    def warnings(self, node: Node) -> list[tuple[Position, str]]:
        if self.floor is None:
            return []
        try:
            number = self._number(node)
        except ValueTypeError:
            return []
        if number >= self.floor:
            return []
        return [(node.pos, self.floor_warning.format(value=number))]

    def describe(self) -> str:
        return f"integer {self.minimum}..{self.maximum}"

    def management_type(self) -> str | tuple[str, ...]:
        return "integer"


class FloatType(ValueType):
    """A decimal number between ``minimum`` and ``maximum`` inclusive."""

    def __init__(self, minimum: float, maximum: float) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def convert(self, node: Node) -> float:
        value = node.value
        if isinstance(value, bool):
            raise ValueTypeError(f"expected a number, got {describe_kind(node)}")
        if isinstance(value, int | float):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                raise ValueTypeError(f"expected a number, got {value!r}") from None
        else:
            raise ValueTypeError(f"expected a number, got {describe_kind(node)}")
        if not self.minimum <= number <= self.maximum:
            raise ValueTypeError(
                f"expected a number between {self.minimum:g} and {self.maximum:g}, got {number:g}")
        return number

    def describe(self) -> str:
        return f"number {self.minimum:g}..{self.maximum:g}"

    def management_type(self) -> str | tuple[str, ...]:
        return "float"

    def format(self, value: object) -> str:
        return repr(value) if isinstance(value, float) else str(value)


class BooleanType(ValueType):
    """``yes``/``true``/``on`` or ``no``/``false``/``off`` in any case, or a JSON boolean."""

    def convert(self, node: Node) -> bool:
        if isinstance(node.value, bool):
            return node.value
        if isinstance(node.value, str):
            try:
                return parse_boolean(node.value)
            except ValueError as error:
                raise ValueTypeError(str(error)) from None
        raise ValueTypeError(
            f"expected a boolean (yes/true/on or no/false/off), got {describe_kind(node)}")

    def describe(self) -> str:
        return "boolean"

    def management_type(self) -> str | tuple[str, ...]:
        return "boolean"

    def format(self, value: object) -> str:
        return "yes" if value else "no"


class EnumType(ValueType):
    """One of an enumeration's values, or (as qdrouterd allows) its 0-based index."""

    def __init__(self, enum_type: type[enum.Enum]) -> None:
        self.enum_type = enum_type
        self.members: Sequence[enum.Enum] = list(enum_type)
        self._by_value: dict[object, enum.Enum] = {m.value: m for m in self.members}

    def convert(self, node: Node) -> enum.Enum:
        text = _text(node, "a name")
        member = self._by_value.get(text)
        if member is not None:
            return member
        if _INTEGER.fullmatch(text) and 0 <= int(text) < len(self.members):
            return self.members[int(text)]
        choices = ", ".join(repr(m.value) for m in self.members)
        raise ValueTypeError(
            f"expected one of {choices} (or an index 0..{len(self.members) - 1}), got {text!r}"
        )

    def describe(self) -> str:
        return "one of " + ", ".join(str(m.value) for m in self.members)

    def format(self, value: object) -> str:
        assert isinstance(value, self.enum_type)
        return str(value.value)

    def management_type(self) -> str | tuple[str, ...]:
        return tuple(str(m.value) for m in self.members)

    def plain(self, value: object) -> object:
        return value.value if isinstance(value, enum.Enum) else value


class NameListType(ValueType):
    """Names, written as one comma-separated string or as a JSON list of names
    (qdrouterd takes both); blanks around names and empty names are dropped."""

    def convert(self, node: Node) -> tuple[str, ...]:
        if isinstance(node.value, ArrayValue):
            texts = []
            for item in node.value.items:
                try:
                    texts.append(_text(item, "a name"))
                except ValueTypeError as error:
                    raise ValueTypeError(error.message, item.pos) from None
        elif isinstance(node.value, str):
            texts = node.value.split(",")
        else:
            raise ValueTypeError("expected a comma-separated string or a JSON list of names, "
                                 f"got {describe_kind(node)}")
        return tuple(name for name in (text.strip() for text in texts) if name)

    def describe(self) -> str:
        return "names: a comma-separated string or a JSON list"

    def format(self, value: object) -> str:
        assert isinstance(value, tuple)
        return ", ".join(value)

    def plain(self, value: object) -> object:
        return None if value is None else self.format(value)


def port_number(port: str) -> int:
    """The TCP port a valid port value names: ``amqp`` is 5672, ``amqps`` 5671."""
    if port in _SERVICE_PORTS:
        return _SERVICE_PORTS[port]
    return int(port)


class PortType(ValueType):
    """A port number 0..65535 (1..65535 unless ``allow_zero``) or ``amqp``/``amqps``.

    qdrouterd resolves any service name through the services database; Hop
    knows only these two, so a configuration does not depend on
    ``/etc/services``.  The written text is kept (ports are strings).
    """

    def __init__(self, *, allow_zero: bool) -> None:
        self.minimum = 0 if allow_zero else 1

    def convert(self, node: Node) -> str:
        text = _text(node, "a port")
        if text in _SERVICE_PORTS:
            return text
        digits = _INTEGER.fullmatch(text) and not text.startswith(("+", "-"))
        if digits and self.minimum <= int(text) <= 65535:
            return text
        raise ValueTypeError(
            f"expected a port number {self.minimum}..65535, 'amqp' or 'amqps', got {text!r}"
        )

    def describe(self) -> str:
        return f"port: {self.minimum}..65535, amqp (5672) or amqps (5671)"


class TcpPortType(ValueType):
    """A TCP service's port number, 1..65535 (0..65535 with ``allow_zero``),
    for the TCP bridges (docs/tcp.md).  Service names are not looked up, so
    that a file means the same on every machine; the text is kept."""

    def __init__(self, *, allow_zero: bool) -> None:
        self.minimum = 0 if allow_zero else 1

    def convert(self, node: Node) -> str:
        text = _text(node, "a port number")
        if text.isascii() and text.isdigit() and self.minimum <= int(text) <= 65535:
            return text
        raise ValueTypeError(f"expected a port number {self.minimum}..65535, got {text!r}")

    def describe(self) -> str:
        return f"port number: {self.minimum}..65535"


class JsonMapType(ValueType):
    """A JSON object with string keys; ``check_key`` may refuse keys (returning why)."""

    writes_json = True

    def __init__(
        self,
        description: str,
        check_key: Callable[[str], str | None] | None = None,
        check_value: Callable[[str, Node], None] | None = None,
        warn_value: Callable[[str, Node], list[tuple[Position, str]]] | None = None,
    ) -> None:
        self._description = description
        self._check_key = check_key
        self._check_value = check_value
        self._warn_value = warn_value

    def convert(self, node: Node) -> dict[str, JsonValue]:
        if not isinstance(node.value, ObjectValue):
            raise ValueTypeError(f"expected a JSON map {{...}}, got {describe_kind(node)}")
        seen: set[str] = set()
        for key, value in node.value.members:
            assert isinstance(key.value, str)
            if key.value in seen:
                raise ValueTypeError(f"duplicate key {key.value!r}", key.pos)
            seen.add(key.value)
            reason = self._check_key(key.value) if self._check_key is not None else None
            if reason is not None:
                raise ValueTypeError(reason, key.pos)
            if self._check_value is not None:
                self._check_value(key.value, value)
        plain = to_plain(node)
        assert isinstance(plain, dict)
        return plain

    def describe(self) -> str:
        return self._description

    def warnings(self, node: Node) -> list[tuple[Position, str]]:
        if self._warn_value is None or not isinstance(node.value, ObjectValue):
            return []
        found = []
        for key, value in node.value.members:
            assert isinstance(key.value, str)
            found.extend(self._warn_value(key.value, value))
        return found

    def format(self, value: object) -> str:
        return json.dumps(value)

    def management_type(self) -> str | tuple[str, ...]:
        return "map"
