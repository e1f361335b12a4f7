"""The sections of an encoded AMQP message read directly, without proton's
``Message``: about 14 us a message less for the reader
(docs/spark.md#where-the-time-goes).

AMQP 1.0 part 1, section 1.6 (the type encodings) and part 3, section 3.2
(the sections of a message, each a described value: header 0x70,
delivery-annotations 0x71, message-annotations 0x72, properties 0x73,
application-properties 0x74, data 0x75, amqp-sequence 0x76, amqp-value
0x77, footer 0x78). Only what the data source's rows hold is read; a
message with anything this reader does not take (an array, a described
value inside a section, a char, a decimal, more than one data section, an
amqp-value other than text or binary, an amqp-sequence) raises
:class:`Unsupported`, and the caller decodes it with proton instead.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, Final

__all__ = ["Scanned", "Symbol", "Timestamp", "Unsupported", "scan"]


class Unsupported(Exception):
    """The message holds something this reader does not read."""


class Symbol(str):
    """An AMQP symbol (a string of ASCII characters)."""

    __slots__ = ()


class Timestamp(int):
    """An AMQP timestamp: milliseconds since the Unix epoch."""

    __slots__ = ()


_FIXED: Final = {
    0x50: (1, ">B"), 0x51: (1, ">b"), 0x52: (1, ">B"), 0x53: (1, ">B"), 0x54: (1, ">b"),
    0x55: (1, ">b"), 0x60: (2, ">H"), 0x61: (2, ">h"), 0x70: (4, ">I"), 0x71: (4, ">i"),
    0x72: (4, ">f"), 0x80: (8, ">Q"), 0x81: (8, ">q"), 0x82: (8, ">d"),
}


def _value(data: bytes, pos: int) -> tuple[Any, int]:
    """The value at ``pos`` and the position after it."""
    code = data[pos]
    pos += 1
    if code == 0x40:
        return None, pos
    if code in (0xa1, 0xa3, 0xa0):  # str8, sym8, vbin8
        size = data[pos]
        raw = data[pos + 1:pos + 1 + size]
        pos += 1 + size
    elif code in (0xb1, 0xb3, 0xb0):  # str32, sym32, vbin32
        (size,) = struct.unpack_from(">I", data, pos)
        raw = data[pos + 4:pos + 4 + size]
        pos += 4 + size
    else:
        return _other(data, pos, code)
    if len(raw) != size:
        raise Unsupported("truncated")
    if code in (0xa0, 0xb0):
        return bytes(raw), pos
    text = bytes(raw).decode("utf-8")
    return (Symbol(text) if code in (0xa3, 0xb3) else text), pos


def _other(data: bytes, pos: int, code: int) -> tuple[Any, int]:
    fixed = _FIXED.get(code)
    if fixed is not None:
        size, fmt = fixed
        (number,) = struct.unpack_from(fmt, data, pos)
        return number, pos + size
    if code == 0x41:
        return True, pos
    if code == 0x42:
        return False, pos
    if code == 0x56:
        return data[pos] != 0, pos + 1
    if code in (0x43, 0x44):
        return 0, pos
    if code == 0x83:
        (ms,) = struct.unpack_from(">q", data, pos)
        return Timestamp(ms), pos + 8
    if code == 0x98:
        return uuid.UUID(bytes=bytes(data[pos:pos + 16])), pos + 16
    if code == 0x45:
        return [], pos
    if code in (0xc0, 0xc1):  # list8, map8
        count, start = data[pos + 1], pos + 2
        end = pos + 1 + data[pos]
    elif code in (0xd0, 0xd1):  # list32, map32
        size, count = struct.unpack_from(">II", data, pos)
        start, end = pos + 8, pos + 4 + size
    else:
        raise Unsupported(f"type code 0x{code:02x}")
    items = []
    at = start
    for _ in range(count):
        item, at = _value(data, at)
        items.append(item)
    if at != end:
        raise Unsupported("a compound value's size does not match its items")
    if code in (0xc1, 0xd1):
        if count % 2:
            raise Unsupported("a map with an odd count")
        return dict(zip(items[0::2], items[1::2], strict=True)), end
    return items, end


class Scanned:
    """The sections of one message the data source reads."""

    __slots__ = ("annotations", "application_properties", "body", "properties")

    def __init__(self) -> None:
        self.properties: list[Any] = []
        self.application_properties: dict[Any, Any] | None = None
        self.annotations: dict[Any, Any] | None = None
        self.body: bytes | None = None


def scan(data: bytes) -> Scanned:
    """The message's properties (the list's fields), application
    properties, message annotations and body (bytes: a data section as it
    came, text in UTF-8). Raises :class:`Unsupported`."""
    out = Scanned()
    pos = 0
    end = len(data)
    body_seen = False
    try:
        while pos < end:
            if data[pos] != 0x00:
                raise Unsupported("not a section")
            code = data[pos + 1]
            if code == 0x53:
                section = data[pos + 2]
                pos += 3
            elif code == 0x80:
                (section,) = struct.unpack_from(">Q", data, pos + 2)
                pos += 10
            else:
                raise Unsupported("a section named by a symbol")
            value, pos = _value(data, pos)
            if section == 0x73:
                if not isinstance(value, list):
                    raise Unsupported("properties")
                out.properties = value
            elif section == 0x74:
                out.application_properties = value
            elif section == 0x72:
                out.annotations = value
            elif section in (0x75, 0x77):
                if body_seen:
                    raise Unsupported("more than one body section")
                body_seen = True
                if isinstance(value, str):
                    if section == 0x75:
                        raise Unsupported("a data section that is not binary")
                    out.body = value.encode("utf-8")
                elif isinstance(value, bytes):
                    out.body = value
                elif value is None and section == 0x77:
                    out.body = None
                else:
                    raise Unsupported("an amqp-value that is not text or binary")
            elif section in (0x70, 0x71, 0x78):
                pass  # header, delivery annotations, footer: not in the row
            else:
                raise Unsupported(f"section 0x{section:02x}")
    except (IndexError, struct.error, UnicodeDecodeError) as exc:
        raise Unsupported(f"malformed: {exc}") from None
    return out
