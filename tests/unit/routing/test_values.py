"""The generic AMQP value codec used for control messages (AMQP 1.0 part 1.6)."""

from __future__ import annotations

import pytest

from router.core.amqp.values import (
    COMPACT,
    QD_C,
    QD_PYTHON,
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
    decode,
    decode_one,
    encode,
    type_name,
)
from router.core.routing import PeerProtocolError

VALUES: list[object] = [
    None, True, False, UByte(200), Byte(-5), UShort(60000), Short(-30000), UInt(0), UInt(7),
    UInt(70000), ULong(0), ULong(9), ULong(2**63), Int(-3), Int(100000), Long(5), Long(-2**40),
    Float(1.5), 2.25, "", "héllo", "x" * 300, Symbol("amqp:thing"), b"\x00\x01", b"y" * 300,
    [], [1, "a", [Symbol("b")]], {"k": 1, Symbol("s"): [None]}, {},
    Array(0xA3, [Symbol("a"), Symbol("bb")]), Array(0xA1, ["x" * 300]),
    Described(ULong(0x77), {"a": 1}), Opaque(0x98, bytes(16)), Opaque(0x83, bytes(8)),
    list(range(300)),
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
@pytest.mark.parametrize("style", [COMPACT, QD_PYTHON, QD_C], ids=["compact", "py", "c"])
def test_round_trip_keeps_value_and_type(value: object, style: object) -> None:
    decoded = decode_one(encode(value, style))  # type: ignore[arg-type]
    assert decoded == value
    assert type_name(decoded) == type_name(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, b"\x54\x01"),
        (-129, b"\x71\xff\xff\xff\x7f"),
        (2**31, b"\x81\x00\x00\x00\x00\x80\x00\x00\x00"),
        (Long(1), b"\x55\x01"),
        (UInt(0), b"\x43"),
        (ULong(255), b"\x53\xff"),
        (True, b"\x41"),
        (False, b"\x42"),
        (Symbol("ab"), b"\xa3\x02ab"),
        ("ab", b"\xa1\x02ab"),
    ],
)
def test_scalar_encodings_are_the_ones_qdrouterd_composes(value: object, expected: bytes) -> None:
    assert encode(value) == expected


def test_wide_style_uses_32_bit_composites_like_qd_compose() -> None:
    assert encode([1], QD_C) == b"\xd0\x00\x00\x00\x06\x00\x00\x00\x01\x54\x01"
    assert encode({}, QD_PYTHON) == b"\xd1\x00\x00\x00\x04\x00\x00\x00\x00"
    assert encode([1], COMPACT) == b"\xc0\x03\x01\x54\x01"


def test_empty_list_is_list0_from_python_but_list32_from_c() -> None:
    assert encode([], QD_PYTHON) == b"\x45"
    assert encode([], QD_C) == b"\xd0\x00\x00\x00\x04\x00\x00\x00\x00"


def test_decode_returns_the_offset_after_the_value() -> None:
    data = encode("ab") + encode(Int(1))
    assert decode(data) == ("ab", 4)
    assert decode(data, 4) == (Int(1), 6)


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"", "truncated"),
        (b"\xa1\x05ab", "truncated"),
        (b"\x71\x00\x00", "truncated"),
        (b"\xc0\x05\x02\x54\x01", "runs past"),
        (b"\xc0\x03\x09\x54\x01", "claims 9 items"),
        (b"\xc0\x04\x01\x54\x01\x40", "past its items"),
        (b"\xc1\x03\x01\x54\x01", "odd count"),
        (b"\xc1\x03\x02\x45\x40", "unhashable"),
        (b"\xa1\x02\xff\xfe", "UTF-8"),
        # A symbol is ASCII: what the encoder could not write back is refused
        # as it arrives (found by the fuzzer).
        (b"\xa3\x02\xc5\x9a", "symbol at offset 0 is not valid ASCII"),
        (b"\x56\x07", "boolean"),
        (b"\x01", "invalid amqp format code 0x01"),
        (b"\xd0\x00\x00\x00\x02\x00\x00", "truncated"),
        (b"\xd0\x00\x00\x00\x02\x00\x00\x00\x00", "size 2 < 4"),
        (b"\xc0\x03\x01\x40", "runs past"),
        (b"\xe0\x01\x01", "truncated"),
        (b"\x54\x01\x40", "1 bytes after"),
    ],
)
def test_malformed_input_raises_peer_protocol_error(data: bytes, fragment: str) -> None:
    with pytest.raises(PeerProtocolError, match=fragment):
        decode_one(data)


def test_nesting_is_bounded() -> None:
    deep: object = []
    for _ in range(40):
        deep = [deep]
    with pytest.raises(PeerProtocolError, match="nested deeper"):
        decode_one(encode(deep))


def test_array_of_zero_width_elements_is_bounded_by_its_size() -> None:
    assert decode_one(b"\xe0\x02\x03\x40") == Array(0x40, [None, None, None])
    # Written back as it came: the encoder writes only text arrays itself.
    assert encode(decode_one(b"\xe0\x02\x03\x40")) == b"\xe0\x02\x03\x40"
    with pytest.raises(PeerProtocolError, match="claims"):
        decode_one(b"\xf0\x00\x00\x00\x05\xff\xff\xff\xff\x40")


def test_encode_rejects_what_amqp_cannot_carry() -> None:
    with pytest.raises(ValueError, match="out of range"):
        encode(2**64)
    with pytest.raises(ValueError, match="ASCII"):
        encode(Symbol("é"))
    with pytest.raises(TypeError):
        encode(object())
    with pytest.raises(ValueError):
        UByte(256)
