"""The Python model of AMQP 1.0 values used by control messages (AMQP 1.0 part 1.6).

Owns the value types that plain Python cannot express: ``Symbol``, the
typed integers (``Long(7)`` compares equal to ``7`` but remembers its AMQP
type), ``Float`` (32-bit), ``Array``, ``Described`` and ``Opaque`` (types
the control protocol never uses, kept as their bytes), and ``type_name``.

Must not: encode or decode bytes (``values``), or know about control messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import attrs

__all__ = [
    "Array",
    "Byte",
    "Described",
    "Float",
    "Int",
    "Long",
    "Opaque",
    "Short",
    "Symbol",
    "UByte",
    "UInt",
    "ULong",
    "UShort",
    "type_name",
]


class Symbol(str):
    """An AMQP ``symbol`` (part 1.6.21); plain ``str`` encodes as ``string``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Symbol({str.__repr__(self)})"


class _TypedInt(int):
    """An int that remembers its AMQP integer type."""

    __slots__ = ()
    low: int = 0
    high: int = 0

    def __new__(cls, value: int = 0) -> _TypedInt:
        if not cls.low <= value <= cls.high:
            raise ValueError(f"{cls.__name__.lower()} out of range: {value}")
        return super().__new__(cls, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({int(self)})"


class UByte(_TypedInt):
    """AMQP ``ubyte``."""

    __slots__ = ()
    low, high = 0, 0xFF


class UShort(_TypedInt):
    """AMQP ``ushort``."""

    __slots__ = ()
    low, high = 0, 0xFFFF


class UInt(_TypedInt):
    """AMQP ``uint``."""

    __slots__ = ()
    low, high = 0, 0xFFFF_FFFF


class ULong(_TypedInt):
    """AMQP ``ulong``."""

    __slots__ = ()
    low, high = 0, 0xFFFF_FFFF_FFFF_FFFF


class Byte(_TypedInt):
    """AMQP ``byte``."""

    __slots__ = ()
    low, high = -0x80, 0x7F


class Short(_TypedInt):
    """AMQP ``short``."""

    __slots__ = ()
    low, high = -0x8000, 0x7FFF


class Int(_TypedInt):
    """AMQP ``int``."""

    __slots__ = ()
    low, high = -0x8000_0000, 0x7FFF_FFFF


class Long(_TypedInt):
    """AMQP ``long``."""

    __slots__ = ()
    low, high = -0x8000_0000_0000_0000, 0x7FFF_FFFF_FFFF_FFFF


class Float(float):
    """AMQP ``float`` (32-bit); plain ``float`` encodes as ``double``."""

    __slots__ = ()


def _as_tuple(items: Iterable[object]) -> tuple[object, ...]:
    return tuple(items)


# Constructors of the same type in another width -> the one ``Array.code`` keeps.
_SAME_TYPE: Final = {
    0xB0: 0xA0, 0xB1: 0xA1, 0xB3: 0xA3, 0xD0: 0xC0, 0xD1: 0xC1, 0xF0: 0xE0, 0x45: 0xC0,
    0x43: 0x70, 0x52: 0x70, 0x44: 0x80, 0x53: 0x80, 0x54: 0x71, 0x55: 0x81,
}


def _array_code(code: int) -> int:
    return _SAME_TYPE.get(code, code)


@attrs.frozen
class Array:
    """An AMQP ``array`` (part 1.6.24): ``items`` of one type, named by ``code``.

    ``code`` is the element constructor's format code (``0xA3`` symbol,
    ``0xA1`` string ...), normalised so that other widths of the same type
    (``0xB3``, ``0xB1`` ...) compare equal. Encoding supports string and
    symbol arrays, and writes an array of another type back as it was
    decoded (``raw``: its whole encoding, constructor included), so that a
    value the router only passes on, such as a request's correlation-id,
    goes back unchanged.
    """

    code: int = attrs.field(converter=_array_code)
    items: tuple[object, ...] = attrs.field(converter=_as_tuple)
    raw: bytes | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen
class Described:
    """A described value (part 1.2): ``descriptor`` then ``value``."""

    descriptor: object
    value: object


@attrs.frozen
class Opaque:
    """A value of a type the control protocol never uses, kept as its bytes."""

    code: int
    raw: bytes


_NAMES: Final[dict[type, str]] = {
    type(None): "null", bool: "bool", int: "int", UByte: "ubyte", UShort: "ushort",
    UInt: "uint", ULong: "ulong", Byte: "byte", Short: "short", Int: "int", Long: "long",
    Float: "float", float: "double", str: "str", Symbol: "symbol", bytes: "binary",
    list: "list", tuple: "list", dict: "map", Array: "array", Described: "described",
}
_OPAQUE_NAMES: Final = {
    0x73: "char", 0x83: "timestamp", 0x74: "decimal32", 0x84: "decimal64",
    0x94: "decimal128", 0x98: "uuid",
}


def type_name(value: object) -> str:
    """A short name of ``value``'s AMQP type for error messages (``long``, ``str``...)."""
    if isinstance(value, Opaque):
        return _OPAQUE_NAMES.get(value.code, "opaque")
    return _NAMES.get(type(value), type(value).__name__)
