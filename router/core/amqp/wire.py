"""The data plane's byte-level AMQP 1.0 type codec (AMQP 1.0 part 1.6): what
the per-message path reads and writes without building values.  The
control plane's codec of whole values is its neighbour ``values``.

Owns: the format-code table; skipping over one encoded value without
decoding it; reading the few things the router looks at (section
descriptors, strings, symbols, integers) and splitting a map by its symbol
keys; encoding strings, symbols, ints, lists and the message-annotations
section header; and ``MessageFormatError``.

Must not: import proton or anything outside the stdlib; build Python objects
for values it only skips; catch errors. Callers on the per-message path turn
``IndexError``, ``struct.error`` and ``UnicodeDecodeError`` into
``MessageFormatError`` once, at their public boundary, instead of
bounds-checking every byte here.
"""

import struct
from collections.abc import Iterable, Mapping
from typing import Final

__all__ = [
    "DECODE_ERROR",
    "DECODE_FAULTS",
    "DESCRIBED",
    "FORMAT_WIDTH",
    "INVALID",
    "INVALID_FIELD",
    "SECTION_END",
    "VAR1",
    "VAR4",
    "Buffer",
    "MessageFormatError",
    "decode_fault",
    "encode_int",
    "encode_list",
    "encode_ma_section",
    "encode_string",
    "encode_string_list",
    "encode_symbol",
    "read_int",
    "read_string",
    "section_descriptor",
    "section_error",
    "skip",
    "split_map",
    "u32",
    "u32x2",
]

Buffer = bytes | bytearray | memoryview


DECODE_ERROR: Final = "amqp:decode-error"
INVALID_FIELD: Final = "amqp:invalid-field"


class MessageFormatError(ValueError):
    """A message or one of its values is malformed (the peer's fault).

    ``condition`` is the AMQP error condition qdrouterd rejects such a
    delivery with: ``amqp:decode-error`` (description ``invalid message
    format``) for encoding faults, ``amqp:invalid-field`` with ``str(exc)``
    as the description for bad router annotations
    (docs/routing.md#receiving-a-message).
    """

    def __init__(self, message: str, condition: str = DECODE_ERROR) -> None:
        super().__init__(message)
        self.condition = condition


# FORMAT_WIDTH[code] says how many bytes follow a format code (part 1.6.1):
# >= 0 a fixed width; VAR1/VAR4 a 1- or 4-byte size, then that many bytes
# (binary, string, symbol, list, map and array alike); DESCRIBED a descriptor
# and a value; INVALID a reserved code.
VAR1: Final = -1
DESCRIBED: Final = -2
INVALID: Final = -3
VAR4: Final = -4


def _format_widths() -> tuple[int, ...]:
    width = [INVALID] * 256
    width[0x00] = DESCRIBED
    for code in range(0x40, 0x46):  # null, true, false, uint0, ulong0, list0
        width[code] = 0
    for code in range(0x50, 0x57):  # ubyte, byte, smalluint, smallulong, smallint, smalllong, bool
        width[code] = 1
    width[0x60] = width[0x61] = 2  # ushort, short
    for code in range(0x70, 0x75):  # uint, int, float, char, decimal32
        width[code] = 4
    for code in range(0x80, 0x85):  # ulong, long, double, timestamp, decimal64
        width[code] = 8
    width[0x94] = width[0x98] = 16  # decimal128, uuid
    for code in (0xA0, 0xA1, 0xA3, 0xC0, 0xC1, 0xE0):
        width[code] = VAR1
    for code in (0xB0, 0xB1, 0xB3, 0xD0, 0xD1, 0xF0):
        width[code] = VAR4
    return tuple(width)


FORMAT_WIDTH: Final = _format_widths()

# What decoding raises on truncated or invalid input, besides MessageFormatError.
DECODE_FAULTS: Final = (IndexError, struct.error, UnicodeDecodeError)

u32: Final = struct.Struct(">I").unpack_from
u32x2: Final = struct.Struct(">II").unpack_from
_I32: Final = struct.Struct(">i").pack
_U32: Final = struct.Struct(">I").pack
_U32X2: Final = struct.Struct(">II").pack

# A described value may carry a described descriptor (part 1.2); real peers
# never nest, so a deep nest is an attack on the recursion limit.
_MAX_DESCRIBED_DEPTH: Final = 8

# Integer format codes (part 1.6) -> whether the value is signed.
_INT_CODES: Final = {
    0x43: False, 0x44: False, 0x50: False, 0x51: True, 0x52: False, 0x53: False,
    0x54: True, 0x55: True, 0x60: False, 0x61: True, 0x70: False, 0x71: True,
    0x80: False, 0x81: True,
}


def skip(data: Buffer, pos: int, end: int, depth: int = 0) -> int:
    """Return the offset just past the encoded value starting at ``data[pos]``.

    Args:
        data: the encoded bytes.
        pos: offset of the value's constructor.
        end: offset the value must not extend beyond (its container's end).
        depth: described-type nesting so far (internal).

    Returns:
        The offset of the first byte after the value.

    Raises:
        MessageFormatError: reserved format code, over-deep nesting, or the value
            overruns ``end``.
        IndexError, struct.error: the value runs past the end of ``data``.
    """
    code = data[pos]
    width = FORMAT_WIDTH[code]
    if width >= 0:
        nxt = pos + 1 + width
    elif width == VAR1:
        nxt = pos + 2 + data[pos + 1]
    elif width == VAR4:
        nxt = pos + 5 + u32(data, pos + 1)[0]
    elif width == DESCRIBED:
        if depth >= _MAX_DESCRIBED_DEPTH:
            raise MessageFormatError(f"described types nested too deep at offset {pos}")
        nxt = skip(data, pos + 1, end, depth + 1)  # the descriptor
        nxt = skip(data, nxt, end, depth + 1)  # the described value
    else:
        raise MessageFormatError(f"invalid format code 0x{code:02x} at offset {pos}")
    if nxt > end:
        raise MessageFormatError(f"value at offset {pos} overruns its container (ends {end})")
    return nxt


def read_string(data: bytes | bytearray, pos: int, nxt: int) -> str | None:
    """Decode the string or symbol at ``data[pos:nxt]``; None if it is another type.

    ``nxt`` is the value's end, as returned by :func:`skip`.

    Raises:
        UnicodeDecodeError: the value is not UTF-8.
    """
    code = data[pos]
    if code == 0xA1 or code == 0xA3:
        return data[pos + 2 : nxt].decode()
    if code == 0xB1 or code == 0xB3:
        return data[pos + 5 : nxt].decode()
    return None


def read_int(data: Buffer, pos: int, nxt: int) -> int | None:
    """Decode the integer (any AMQP integer type) at ``data[pos:nxt]``; None if not one."""
    signed = _INT_CODES.get(data[pos])
    if signed is None:
        return None
    return int.from_bytes(data[pos + 1 : nxt], "big", signed=signed)


def _variable(small: int, large: int, payload: bytes) -> bytes:
    size = len(payload)
    if size < 256:
        return bytes((small, size)) + payload
    return bytes((large,)) + _U32(size) + payload


def encode_string(value: str) -> bytes:
    """Encode ``value`` as an AMQP string (str8-utf8, or str32-utf8 when longer)."""
    return _variable(0xA1, 0xB1, value.encode("utf-8"))


def encode_symbol(value: str) -> bytes:
    """Encode ``value`` as an AMQP symbol (sym8, or sym32); symbols are ASCII (part 1.6.22).

    Raises:
        UnicodeEncodeError: ``value`` is not ASCII.
    """
    return _variable(0xA3, 0xB3, value.encode("ascii"))


def encode_int(value: int) -> bytes:
    """Encode ``value`` as an AMQP int (smallint when it fits in a signed byte).

    Raises:
        struct.error: ``value`` does not fit in 32 bits.
    """
    if -128 <= value <= 127:
        return bytes((0x54, value & 0xFF))
    return b"\x71" + _I32(value)


def encode_list(items: bytes, count: int) -> bytes:
    """Wrap ``count`` already-encoded values as a list (list0, list8 or list32)."""
    if count == 0:
        return b"\x45"
    size = len(items) + 1
    if size < 256 and count < 256:
        return bytes((0xC0, size, count)) + items
    return b"\xd0" + _U32X2(size + 3, count) + items


def encode_string_list(values: Iterable[str]) -> bytes:
    """Encode ``values`` as a list of AMQP strings."""
    encoded = [encode_string(value) for value in values]
    return encode_list(b"".join(encoded), len(encoded))


_MA8: Final = b"\x00\x53\x72\xc1"
_MA32: Final = b"\x00\x53\x72\xd1"


def encode_ma_section(content_size: int, fields: int) -> bytes:
    """Return the start of a message-annotations section (part 3.2.3).

    The map holds ``fields`` values (keys and values counted apart) whose
    encodings, ``content_size`` bytes in all, follow the returned bytes.
    Uses map8 when it fits, else map32.
    """
    if content_size < 255 and fields < 256:
        return _MA8 + bytes((content_size + 1, fields))
    return _MA32 + _U32X2(content_size + 4, fields)


# Section descriptors (part 3.2) in symbol form; the ulong form is 0x70..0x78.
_SECTION_SYMBOLS: Final = {
    b"amqp:header:list": 0x70,
    b"amqp:delivery-annotations:map": 0x71,
    b"amqp:message-annotations:map": 0x72,
    b"amqp:properties:list": 0x73,
    b"amqp:application-properties:map": 0x74,
    b"amqp:data:binary": 0x75,
    b"amqp:amqp-sequence:list": 0x76,
    b"amqp:amqp-value:*": 0x77,
    b"amqp:footer:map": 0x78,
}
SECTION_END: Final = 0x100


def section_descriptor(data: Buffer, pos: int, n: int) -> tuple[int, int]:
    """Read the descriptor of the message section at ``pos``, in any of its forms.

    Returns:
        (section code, offset of the section's value); the code is -1 for an
        unknown descriptor and ``SECTION_END`` when ``pos`` is the end ``n``.

    Raises:
        MessageFormatError: ``data[pos]`` does not start a described type.
    """
    if pos >= n:
        return SECTION_END, pos
    if data[pos] != 0:
        raise MessageFormatError(
            f"expected a section at offset {pos}, got format code 0x{data[pos]:02x}"
        )
    code = data[pos + 1]
    if code == 0x53:
        return data[pos + 2], pos + 3
    if code == 0x80:
        if pos + 10 > n:
            raise MessageFormatError(f"section descriptor at offset {pos} is truncated")
        number = int.from_bytes(data[pos + 2 : pos + 10], "big")
        return (number if number <= 0x78 else -1), pos + 10
    if code == 0xA3 or code == 0xB3:
        end = skip(data, pos + 1, n)
        name = bytes(data[pos + (3 if code == 0xA3 else 6) : end])
        return _SECTION_SYMBOLS.get(name, -1), end
    return -1, pos


def decode_fault(exc: Exception) -> MessageFormatError:
    """The ``MessageFormatError`` for a low-level error met while decoding."""
    if isinstance(exc, UnicodeDecodeError):
        return MessageFormatError(f"invalid UTF-8 in a string: {exc.reason}")
    return MessageFormatError("message truncated: a section or value runs past its end")


def section_error(code: int, pos: int) -> MessageFormatError:
    """The error for section ``code`` met at ``pos`` where it may not appear."""
    if 0x70 <= code <= 0x73:  # header .. properties
        return MessageFormatError(f"section 0x{code:02x} at offset {pos} is out of order")
    return MessageFormatError(f"unknown section descriptor at offset {pos}")


def split_map(
    data: Buffer, start: int, end: int, pairs: int, wanted: Mapping[bytes, int], slots: int
) -> tuple[bytes, int, list[int]] | None:
    """Split the ``pairs`` map entries at ``data[start:end]`` by their symbol keys.

    Args:
        data: the encoded bytes.
        start, end: the map's entries (after its count).
        pairs: the number of entries (half the map's count).
        wanted: symbol keys (as bytes) to pick out, each with a slot number
            below ``slots``, or -2 to drop the entry without recording it.
        slots: the number of slots.

    Returns:
        None when no entry has a wanted key (every entry is still checked);
        else the other entries as received (joined, in order), their number,
        and per slot the offset of the value of the key's last entry, or -1.

    Raises:
        MessageFormatError: an entry is malformed or the entries do not fill
            the map exactly.
        IndexError, struct.error: an entry runs past the end of ``data``.
    """
    base = 0
    if type(data) is not bytes:  # keys are looked up by slice: slices must hash
        base = start
        data = bytes(data[start:end])
        start, end = 0, end - start
    found = [-1] * slots
    runs: list[bytes] = []  # stretches of other entries
    run = pos = start
    others = 0
    width = FORMAT_WIDTH
    for _ in range(pairs):
        entry = pos
        code = data[pos]
        if code == 0xA3:
            pos += 2 + data[pos + 1]
            slot = wanted.get(data[entry + 2 : pos], -1)
        elif code == 0xB3:
            pos = skip(data, pos, end)
            slot = wanted.get(data[entry + 5 : pos], -1)
        else:
            pos = skip(data, pos, end)
            slot = -1
        value = pos
        size = width[data[pos]]  # skip() inlined for the common value types
        if size >= 0:
            pos += 1 + size
        elif size == -1:  # VAR1
            pos += 2 + data[pos + 1]
        else:
            pos = skip(data, pos, end)
        if pos > end:
            raise MessageFormatError(f"map entry at offset {entry + base} overruns the map")
        if slot == -1:
            others += 1
            continue
        if slot >= 0:
            found[slot] = value + base
        if run < entry:
            runs.append(data[run:entry])
        run = pos
    if pos != end:
        raise MessageFormatError(f"map has {end - pos} bytes past its entries")
    if run == start:
        return None
    if run < end:
        runs.append(data[run:end])
    return b"".join(runs), others, found
