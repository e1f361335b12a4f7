"""A small generic AMQP 1.0 value codec (AMQP 1.0 part 1, section 1.6) for the control plane.

Owns ``encode``, with the three encoding styles qdrouterd's composers
produce, and ``decode``. The value types live in
:mod:`router.core.amqp.types` and are re-exported here.

Must not: know anything about control messages or message sections (that is
:mod:`router.core.routing.codec`); be used on the per-message data path (it
builds Python objects for every value, see ``router.core.amqp.wire`` for the
zero-copy scanners); raise anything but ``PeerProtocolError`` from ``decode``.
``encode`` raises ``TypeError``/``ValueError`` for values it cannot represent:
those are bugs in the caller.

Decoding keeps the AMQP type: integers come back as the int subclass of
their type (``Long(7)``, which compares equal to ``7``), symbols as
``Symbol``, 32-bit floats as ``Float``, arrays as ``Array``, and char,
timestamp, decimals and uuid as ``Opaque``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final

import attrs

from router.core.amqp.errors import PeerProtocolError
from router.core.amqp.types import (
    Array,
    Byte,
    Described,
    Float,
    Int,
    Long,
    Opaque,
    Short,
    Symbol,
    UByte,
    UInt,
    ULong,
    UShort,
    type_name,
)

__all__ = [
    "COMPACT",
    "QD_C",
    "QD_PYTHON",
    "Array",
    "Byte",
    "Described",
    "EncodingStyle",
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
    "decode",
    "decode_one",
    "encode",
    "type_name",
]


@attrs.frozen
class EncodingStyle:
    """How composites are encoded.

    Attributes:
        wide: lists and maps always as list32/map32, as qdrouterd's
            ``qd_compose`` does (it back-fills 32-bit sizes); else the
            smallest encoding.
        empty_list0: an empty list as ``list0``; qdrouterd's Python bridge
            does this, its C composer writes a list32 with count 0.
    """

    wide: bool
    empty_list0: bool


COMPACT: Final = EncodingStyle(wide=False, empty_list0=True)
QD_PYTHON: Final = EncodingStyle(wide=True, empty_list0=True)
QD_C: Final = EncodingStyle(wide=True, empty_list0=False)

# --- encoding -----------------------------------------------------------------

_U32: Final = struct.Struct(">I").pack
_U32X2: Final = struct.Struct(">II").pack

# typed int class -> (format code of the full width, struct format).
_INT_FORMATS: Final[dict[type, tuple[int, str]]] = {
    UByte: (0x50, ">B"), Byte: (0x51, ">b"), UShort: (0x60, ">H"), Short: (0x61, ">h"),
    UInt: (0x70, ">I"), Int: (0x71, ">i"), ULong: (0x80, ">Q"), Long: (0x81, ">q"),
}


def _variable(small: int, large: int, payload: bytes) -> bytes:
    if len(payload) < 256:
        return bytes((small, len(payload))) + payload
    return bytes((large,)) + _U32(len(payload)) + payload


def _encode_int(value: int) -> bytes:
    cls: type = type(value)
    if cls not in _INT_FORMATS:  # qdrouterd's Python bridge: int if it fits 32 bits, else long
        cls = Int if Int.low <= value <= Int.high else Long
        value = cls(value)
    if cls in (UInt, ULong):
        if value == 0:
            return b"\x43" if cls is UInt else b"\x44"
        if value < 256:
            return bytes((0x52 if cls is UInt else 0x53, value))
    elif cls in (Int, Long) and -128 <= value <= 127:
        return bytes((0x54 if cls is Int else 0x55, value & 0xFF))
    code, fmt = _INT_FORMATS[cls]
    return bytes((code,)) + struct.pack(fmt, value)


def _composite(style: EncodingStyle, small: int, large: int, body: bytes, count: int) -> bytes:
    if not style.wide and len(body) + 1 < 256 and count < 256:
        return bytes((small, len(body) + 1, count)) + body
    return bytes((large,)) + _U32X2(len(body) + 4, count) + body


def _encode_array(value: Array) -> bytes:
    if value.code not in (0xA1, 0xB1, 0xA3, 0xB3):
        if value.raw is not None:
            return value.raw  # as it was decoded
        raise TypeError(f"cannot encode an array of format code 0x{value.code:02x}")
    symbol = value.code in (0xA3, 0xB3)
    payloads = []
    for item in value.items:
        if not isinstance(item, str):
            raise TypeError(f"array item must be str, got {type(item).__name__}")
        payloads.append(item.encode("ascii" if symbol else "utf-8"))
    narrow = all(len(p) < 256 for p in payloads)
    code = (0xA3 if symbol else 0xA1) if narrow else (0xB3 if symbol else 0xB1)
    body = b"".join(bytes((len(p),)) + p if narrow else _U32(len(p)) + p for p in payloads)
    body = bytes((code,)) + body
    count = len(payloads)
    if len(body) + 1 < 256 and count < 256:
        return bytes((0xE0, len(body) + 1, count)) + body
    return b"\xf0" + _U32X2(len(body) + 4, count) + body


def encode(value: object, style: EncodingStyle = COMPACT) -> bytes:
    """Encode one Python value as AMQP.

    Mapping: None→null, bool→boolean (0x41/0x42), the typed ints→their type,
    plain int→int (smallint when it fits a byte) or long when it needs 64
    bits, ``Float``→float, float→double, ``Symbol``→symbol, str→string,
    bytes→binary, list/tuple→list, dict→map, ``Array``, ``Described``,
    ``Opaque`` as themselves.

    Args:
        value: the value.
        style: how lists and maps are encoded.

    Returns:
        The encoded bytes.

    Raises:
        TypeError: a value of another type, or an unsupported array.
        ValueError: an int beyond 64 bits or a non-ASCII symbol.
    """
    if value is None:
        return b"\x40"
    if value is True:
        return b"\x41"
    if value is False:
        return b"\x42"
    if isinstance(value, int):
        try:
            return _encode_int(value)
        except (ValueError, struct.error):
            raise ValueError(f"integer out of range: {value}") from None
    if isinstance(value, Float):
        return b"\x72" + struct.pack(">f", value)
    if isinstance(value, float):
        return b"\x82" + struct.pack(">d", value)
    if isinstance(value, Symbol):
        try:
            return _variable(0xA3, 0xB3, value.encode("ascii"))
        except UnicodeEncodeError:
            raise ValueError(f"symbol must be ASCII: {value!r}") from None
    if isinstance(value, str):
        return _variable(0xA1, 0xB1, value.encode("utf-8"))
    if isinstance(value, bytes):
        return _variable(0xA0, 0xB0, value)
    if isinstance(value, list | tuple):
        if not value and style.empty_list0:
            return b"\x45"
        body = b"".join(encode(item, style) for item in value)
        return _composite(style, 0xC0, 0xD0, body, len(value))
    if isinstance(value, dict):
        body = b"".join(encode(k, style) + encode(v, style) for k, v in value.items())
        return _composite(style, 0xC1, 0xD1, body, 2 * len(value))
    if isinstance(value, Array):
        return _encode_array(value)
    if isinstance(value, Described):
        return b"\x00" + encode(value.descriptor, style) + encode(value.value, style)
    if isinstance(value, Opaque):
        return bytes((value.code,)) + value.raw
    raise TypeError(f"cannot encode {type(value).__name__} as AMQP")


# --- decoding -----------------------------------------------------------------

# Deep nesting is never legitimate in control traffic; bound it well below
# Python's recursion limit.
MAX_DEPTH: Final = 32

# Fixed-width scalars: format code -> (reader, width, wrapper).
_Reader = Callable[[bytes, int], tuple[Any, ...]]
_FIXED: Final[dict[int, tuple[_Reader, int, Callable[[Any], object]]]] = {
    0x50: (struct.Struct(">B").unpack_from, 1, UByte),
    0x51: (struct.Struct(">b").unpack_from, 1, Byte),
    0x60: (struct.Struct(">H").unpack_from, 2, UShort),
    0x61: (struct.Struct(">h").unpack_from, 2, Short),
    0x70: (struct.Struct(">I").unpack_from, 4, UInt),
    0x52: (struct.Struct(">B").unpack_from, 1, UInt),
    0x71: (struct.Struct(">i").unpack_from, 4, Int),
    0x54: (struct.Struct(">b").unpack_from, 1, Int),
    0x80: (struct.Struct(">Q").unpack_from, 8, ULong),
    0x53: (struct.Struct(">B").unpack_from, 1, ULong),
    0x81: (struct.Struct(">q").unpack_from, 8, Long),
    0x55: (struct.Struct(">b").unpack_from, 1, Long),
    0x72: (struct.Struct(">f").unpack_from, 4, Float),
    0x82: (struct.Struct(">d").unpack_from, 8, float),
}
_OPAQUE_WIDTHS: Final = {0x73: 4, 0x83: 8, 0x74: 4, 0x84: 8, 0x94: 16, 0x98: 16}
_CONSTANTS: Final[dict[int, object]] = {
    0x40: None, 0x41: True, 0x42: False, 0x43: UInt(0), 0x44: ULong(0),
}
# Arrays of zero-width elements (nulls, say) may hold more items than bytes, up to this.
_MAX_EMPTY_ITEMS: Final = 1024
_TEXT: Final = {0xA0: 1, 0xA1: 1, 0xA3: 1, 0xB0: 4, 0xB1: 4, 0xB3: 4}
_U32_AT: Final = struct.Struct(">I").unpack_from
_U32X2_AT: Final = struct.Struct(">II").unpack_from


def _truncated(pos: int) -> PeerProtocolError:
    return PeerProtocolError(f"amqp value truncated at offset {pos}")


def _header(data: bytes, code: int, pos: int, end: int) -> tuple[int, int, int]:
    """Read a composite's size and count at ``pos``: (count, first item, end of items)."""
    at = pos - 1
    if code & 0x10:  # list32, map32, array32
        if pos + 8 > end:
            raise _truncated(at)
        size, count = _U32X2_AT(data, pos)
        if size < 4:
            raise PeerProtocolError(f"composite at offset {at} has size {size} < 4")
        first, stop = pos + 8, pos + 4 + size
    else:
        if pos + 2 > end:
            raise _truncated(at)
        size, count = data[pos], data[pos + 1]
        if size < 1:
            raise PeerProtocolError(f"composite at offset {at} has size 0")
        first, stop = pos + 2, pos + 1 + size
    if stop > end:
        raise PeerProtocolError(f"composite at offset {at} runs past its container")
    if count > stop - first and not (code in (0xE0, 0xF0) and count <= _MAX_EMPTY_ITEMS):
        raise PeerProtocolError(f"composite at offset {at} claims {count} items in {size} bytes")
    return count, first, stop


def _items(
    data: bytes, code: int | None, count: int, pos: int, stop: int, depth: int, at: int
) -> list[object]:
    """Decode ``count`` values from ``pos``; with ``code``, all share that constructor."""
    items = []
    for _ in range(count):
        if code is None:
            if pos >= stop:
                raise _truncated(pos)
            item, pos = _body(data, data[pos], pos + 1, stop, depth)
        else:
            item, pos = _body(data, code, pos, stop, depth)
        items.append(item)
    if pos != stop:
        raise PeerProtocolError(f"composite at offset {at} has {stop - pos} bytes past its items")
    return items


def _body(data: bytes, code: int, pos: int, end: int, depth: int) -> tuple[object, int]:
    """Decode the value whose constructor ``code`` precedes ``pos``; return it and its end."""
    width = _TEXT.get(code)
    if width is not None:  # binary, string, symbol
        if pos + width > end:
            raise _truncated(pos - 1)
        size = data[pos] if width == 1 else _U32_AT(data, pos)[0]
        start = pos + width
        stop = start + size
        if stop > end:
            raise _truncated(pos - 1)
        raw = data[start:stop]
        if code == 0xA0 or code == 0xB0:
            return raw, stop
        symbol = bool(code & 0x02)
        try:
            text = raw.decode("ascii" if symbol else "utf-8")
        except UnicodeDecodeError:
            # A symbol is ASCII (AMQP 1.0 part 1, section 1.6.21), a string UTF-8.
            what = "symbol" if symbol else "text"
            raise PeerProtocolError(f"{what} at offset {pos - 1} is not valid "
                                    f"{'ASCII' if symbol else 'UTF-8'}") from None
        return (Symbol(text) if symbol else text), stop
    fixed = _FIXED.get(code)
    if fixed is not None:
        read, size, wrap = fixed
        if pos + size > end:
            raise _truncated(pos - 1)
        return wrap(read(data, pos)[0]), pos + size
    if code in _CONSTANTS:
        return _CONSTANTS[code], pos
    if code == 0x45:
        return [], pos
    if code == 0x56:
        if pos >= end or data[pos] > 1:
            raise PeerProtocolError(f"invalid boolean at offset {pos - 1}")
        return data[pos] == 1, pos + 1
    if code in _OPAQUE_WIDTHS:
        stop = pos + _OPAQUE_WIDTHS[code]
        if stop > end:
            raise _truncated(pos - 1)
        return Opaque(code, data[pos:stop]), stop
    at = pos - 1
    if depth >= MAX_DEPTH:
        raise PeerProtocolError(f"amqp value at offset {at} nested deeper than {MAX_DEPTH}")
    if code in (0xC0, 0xD0):
        count, first, stop = _header(data, code, pos, end)
        return _items(data, None, count, first, stop, depth + 1, at), stop
    if code in (0xC1, 0xD1):
        count, first, stop = _header(data, code, pos, end)
        if count % 2:
            raise PeerProtocolError(f"map at offset {at} has an odd count {count}")
        flat = _items(data, None, count, first, stop, depth + 1, at)
        result: dict[object, object] = {}
        for index in range(0, count, 2):
            try:
                result[flat[index]] = flat[index + 1]
            except TypeError:  # a list or map used as a key
                raise PeerProtocolError(f"map at offset {at} has an unhashable key") from None
        return result, stop
    if code in (0xE0, 0xF0):
        count, first, stop = _header(data, code, pos, end)
        if first >= stop:
            raise _truncated(at)
        element = data[first]
        if element == 0x00:  # described elements: one descriptor, then the values
            descriptor, first = _value(data, first + 1, stop, depth + 1)
            if first >= stop:
                raise _truncated(at)
            inner = data[first]
            items = _items(data, inner, count, first + 1, stop, depth + 1, at)
            return Array(element, [Described(descriptor, item) for item in items],
                         bytes(data[at:stop])), stop
        return Array(element, _items(data, element, count, first + 1, stop, depth + 1, at),
                     bytes(data[at:stop])), stop
    if code == 0x00:
        descriptor, pos = _value(data, pos, end, depth + 1)
        value, pos = _value(data, pos, end, depth + 1)
        return Described(descriptor, value), pos
    raise PeerProtocolError(f"invalid amqp format code 0x{code:02x} at offset {at}")


def _value(data: bytes, pos: int, end: int, depth: int) -> tuple[object, int]:
    if pos >= end:
        raise _truncated(pos)
    return _body(data, data[pos], pos + 1, end, depth)


def decode(data: bytes, pos: int = 0, end: int | None = None) -> tuple[object, int]:
    """Decode the AMQP value starting at ``data[pos]``.

    Args:
        data: the encoded bytes.
        pos: offset of the value's constructor.
        end: offset the value must not extend beyond (default: the end of ``data``).

    Returns:
        (the value, offset just past it).

    Raises:
        PeerProtocolError: truncated, invalid or over-nested input.
    """
    stop = len(data) if end is None else min(end, len(data))
    return _value(bytes(data), pos, stop, 0)


def decode_one(data: bytes) -> object:
    """Decode ``data``, which must hold exactly one AMQP value.

    Raises:
        PeerProtocolError: as :func:`decode`, or bytes left over after the value.
    """
    value, pos = decode(data)
    if pos != len(data):
        raise PeerProtocolError(f"{len(data) - pos} bytes after the amqp value")
    return value
