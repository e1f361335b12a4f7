"""Unit tests for router.core.message: scanning, decoding and rewriting annotations.

Messages are built and checked with proton's ``Message``; hand-built bytes
cover what proton never emits (symbol descriptors, list32 headers, bad types).
"""

from typing import Any

import pytest
from proton import AnnotationDict, Message, symbol, ulong

from router.core.message import (
    DECODE_ERROR,
    INVALID_FIELD,
    NO_ANNOTATIONS,
    AnnotationEncoder,
    MessageFormatError,
    MessageInfo,
    MessageReader,
    annotate,
    annotate_upward,
    decode_annotations,
    encode_string,
    encode_symbol,
    scan,
    strip_router_annotations,
    subject_of,
    user_id_of,
)

FIELDS = (
    "durable", "priority", "ttl", "first_acquirer", "delivery_count", "id", "user_id",
    "address", "subject", "reply_to", "correlation_id", "content_type", "content_encoding",
    "expiry_time", "creation_time", "group_id", "group_sequence", "reply_to_group_id",
    "properties", "instructions", "body", "inferred",
)
ROUTER_KEYS = {
    "x-opt-qd.ingress", "x-opt-qd.trace", "x-opt-qd.to", "x-opt-qd.phase",
    "x-opt-qd.stream", "x-opt-qd.class", "x-opt-qd.",
}


def message(
    annotations: dict[Any, Any] | None = None, *, body: Any = "hello", **kwargs: Any
) -> bytes:
    msg = Message(body=body, **kwargs)
    if annotations is not None:
        msg.annotations = AnnotationDict({symbol(k) if isinstance(k, str) else k: v
                                          for k, v in annotations.items()})
    return bytes(msg.encode())


def decode(data: bytes) -> Any:
    msg = Message()
    msg.decode(data)
    return msg


def fields(data: bytes) -> dict[str, Any]:
    msg = decode(data)
    found = {name: getattr(msg, name) for name in FIELDS}
    if isinstance(found["body"], memoryview):  # a Data section
        found["body"] = bytes(found["body"])
    return found


def ma_items(data: bytes) -> list[tuple[Any, Any]]:
    msg = decode(data)
    return list((msg.annotations or {}).items())


def user_items(items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [(k, v) for k, v in items if k not in ROUTER_KEYS]


# Hand encoders (AMQP 1.0 part 1.6), kept apart from the module under test.
def sym(s: str) -> bytes:
    return bytes((0xA3, len(s))) + s.encode()


def str8(s: str) -> bytes:
    return bytes((0xA1, len(s.encode()))) + s.encode()


def list8(*items: bytes) -> bytes:
    body = b"".join(items)
    return bytes((0xC0, len(body) + 1, len(items))) + body


def map8(*items: bytes) -> bytes:
    body = b"".join(items)
    return bytes((0xC1, len(body) + 1, len(items))) + body


def section(code: int, value: bytes) -> bytes:
    return bytes((0x00, 0x53, code)) + value


HEADER = section(0x70, list8(b"\x42", b"\x50\x07"))  # durable false, priority 7
PROPS = section(0x73, list8(b"\x40", b"\x40", str8("q")))
BODY = section(0x77, str8("body"))


# --- user-id -----------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"user_id": b"alice", "id": "m-1", "address": "q"}, b"alice"),
    ({"user_id": b"", "id": 7}, None),
    ({"address": "q"}, None),
    ({}, None),
], ids=["set", "empty", "absent", "no-properties"])
def test_user_id_of_reads_the_properties_user_id(kwargs: dict[str, Any],
                                                 expected: bytes | None) -> None:
    data = message(**kwargs)
    assert user_id_of(data, scan(data, read_to=False)) == expected


def test_user_id_of_refuses_a_user_id_that_is_not_binary() -> None:
    data = section(0x73, list8(b"\x40", str8("alice"))) + BODY
    with pytest.raises(MessageFormatError, match=r"user-id at offset \d+ must be binary"):
        user_id_of(data, scan(data, read_to=False))


# --- subject ---------------------------------------------------------------


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"subject": "a.b", "id": "m-1", "user_id": b"u", "address": "q"}, "a.b"),
    ({"subject": "\u00e9t\u00e9/\u00fc"}, "\u00e9t\u00e9/\u00fc"),
    ({"subject": "s" * 300, "address": "q" * 300}, "s" * 300),
    ({"address": "q", "reply_to": "r"}, None),
    ({}, None),
], ids=["set", "utf-8", "list32-str32", "absent", "no-properties"])
def test_subject_of_reads_the_properties_subject(kwargs: dict[str, Any],
                                                 expected: str | None) -> None:
    data = message(**kwargs)
    assert subject_of(data, scan(data, read_to=False)) == expected


def test_subject_of_reads_a_symbol_and_refuses_other_types() -> None:
    symbol_subject = section(0x73, list8(b"\x40", b"\x40", b"\x40", b"\xa3\x03a.b")) + BODY
    assert subject_of(symbol_subject, scan(symbol_subject, read_to=False)) == "a.b"
    number = section(0x73, list8(b"\x40", b"\x40", b"\x40", b"\x52\x07")) + BODY
    with pytest.raises(MessageFormatError, match=r"subject at offset \d+ must be a string"):
        subject_of(number, scan(number, read_to=False))
    short = section(0x73, list8(b"\x40", b"\x40", str8("q"))) + BODY
    assert subject_of(short, scan(short, read_to=False)) is None


# --- scan -----------------------------------------------------------------


def test_scan_plain_message_reads_to_and_no_annotations() -> None:
    data = message(address="queue.a")
    info = scan(data)
    assert info.to == "queue.a"
    assert info.priority is None
    assert info.header == 0
    assert info.delivery_annotations == -1
    assert info.ma_start == info.ma_end == info.properties == 4
    assert info.router_keys is None
    assert data[info.scan_end : info.scan_end + 3] == b"\x00\x53\x77"


def test_scan_reads_header_priority() -> None:
    assert scan(message(priority=7, durable=True, address="a")).priority == 7
    assert scan(message(priority=0, ttl=100)).priority == 0


def test_scan_reads_priority_from_list32_header() -> None:
    items = b"\x41\x50\x02"
    header = section(0x70, b"\xd0" + (len(items) + 4).to_bytes(4, "big") + (2).to_bytes(4, "big"))
    assert scan(header + items + PROPS + BODY).priority == 2


def test_scan_skips_message_id_and_user_id_before_to() -> None:
    data = message(
        address="dest", id=ulong(2**40), user_id=b"user", subject="s", reply_to="r",
        correlation_id="c", content_type="text/plain", creation_time=5, group_id="g",
    )
    assert scan(data).to == "dest"


@pytest.mark.parametrize("to", [sym("q"), str8("q")])
def test_scan_accepts_symbol_or_string_to(to: bytes) -> None:
    data = section(0x73, list8(b"\x40", b"\x40", to)) + BODY
    assert scan(data).to == "q"


def test_scan_reads_long_to() -> None:
    address = "a" * 300
    assert scan(message(address=address)).to == address


def test_scan_without_to() -> None:
    assert scan(message(subject="s")).to is None
    assert scan(message()).to is None


def test_scan_rejects_non_string_to() -> None:
    data = section(0x73, list8(b"\x40", b"\x40", b"\x54\x05")) + BODY
    with pytest.raises(MessageFormatError, match=r"properties\.to"):
        scan(data)


def test_scan_without_read_to_stops_at_properties() -> None:
    data = message(address="queue.a")
    info = scan(data, False)
    assert info.to is None
    assert info.properties == info.scan_end == 4


def test_scan_locates_every_section() -> None:
    msg = Message(body="b", address="a", priority=5, properties={"k": "v"})
    msg.instructions = {symbol("da"): 1}
    msg.annotations = {symbol("ma"): 2}
    data = bytes(msg.encode())
    info = scan(data)
    assert data[info.delivery_annotations : info.delivery_annotations + 3] == b"\x00\x53\x71"
    assert data[info.ma_start : info.ma_start + 3] == b"\x00\x53\x72"
    assert data[info.ma_end : info.ma_end + 3] == b"\x00\x53\x73"
    assert info.properties == info.ma_end
    assert data[info.scan_end : info.scan_end + 3] == b"\x00\x53\x74"
    assert info.ma_count == 2
    assert info.router_keys is None


def test_scan_accepts_symbol_and_ulong_descriptors() -> None:
    data = (
        b"\x00" + sym("amqp:header:list") + list8(b"\x40", b"\x50\x03")
        + b"\x00\x80" + (0x72).to_bytes(8, "big") + map8(sym("x-opt-qd.to"), str8("t"))
        + b"\x00" + sym("amqp:properties:list") + list8(b"\x40", b"\x40", str8("q"))
        + b"\x00" + sym("amqp:amqp-value:*") + str8("body")
    )
    info = scan(data)
    assert (info.priority, info.to) == (3, "q")
    assert info.router_keys is not None
    assert decode_annotations(data, info).to == "t"
    stripped = strip_router_annotations(data, info)
    assert stripped == data[: info.ma_start] + data[info.ma_end :]
    again = scan(annotate(data, info, ingress="0/A", trace=["0/A"], to=None, phase=None))
    assert (again.priority, again.to, again.router_keys is not None) == (3, "q", True)


def test_scan_accepts_a_message_without_body() -> None:
    info = scan(message(body=None, address="q"))
    assert info.to == "q"


def test_scan_empty_data() -> None:
    info = scan(b"")
    assert (info.ma_start, info.ma_end, info.to, info.router_keys) == (0, 0, None, None)


def test_scan_memoryview_and_bytearray_match_bytes() -> None:
    data = message({"u": 1, "x-opt-qd.trace": ["0/A"]}, address="q", priority=2)
    info = scan(data)
    assert scan(bytearray(data)) == info
    assert scan(memoryview(data)) == info
    assert decode_annotations(memoryview(data), info) == decode_annotations(data, info)
    assert strip_router_annotations(bytearray(data), info) == strip_router_annotations(data, info)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"\x01\x53\x70\x45", "expected a section"),
        (section(0x70, b"\x45") + section(0x70, b"\x45"), "out of order"),
        (section(0x72, map8()) + section(0x71, map8()), "out of order"),
        (section(0x10, b"\x45"), "unknown section"),
        (b"\x00" + sym("amqp:nothing") + b"\x45", "unknown section"),
        (section(0x70, b"\x40"), "not a list"),
        (section(0x71, b"\x45"), "not a map"),
        (section(0x73, b"\x40"), "not a list"),
        (section(0x70, b"\xc0\x05\x02\x40"), "overruns"),
        (section(0x72, b"\xc1\x05\x02"), "truncated"),
        (section(0x73, list8(b"\x40", b"\x40", b"\xa1\x05ab")), "truncated"),
        (section(0x73, list8(b"\x40", b"\x40", b"\xa1\x02\xff\xfe")), "UTF-8"),
        (section(0x70, b"\xc0\x03\x02\x07\x00"), "invalid format code"),
    ],
)
def test_scan_rejects_malformed_messages(data: bytes, text: str) -> None:
    with pytest.raises(MessageFormatError, match=text) as caught:
        scan(data)
    assert caught.value.condition == DECODE_ERROR


def test_scan_rejects_every_truncation_of_a_message() -> None:
    msg = Message(body="b" * 20, address="a", priority=5)
    msg.instructions = {symbol("da"): 1}
    msg.annotations = {symbol("u"): 1, symbol("x-opt-qd.trace"): ["0/A", "0/B"]}
    data = bytes(msg.encode())
    info = scan(data)
    boundaries = {info.delivery_annotations, info.ma_start, info.ma_end}
    for cut in range(1, info.scan_end):
        if cut not in boundaries:
            with pytest.raises(MessageFormatError):
                scan(data[:cut])


# --- router annotations ---------------------------------------------------


def test_decode_annotations_reads_every_router_key() -> None:
    data = message({
        "user": "u", "x-opt-qd.ingress": "0/A", "x-opt-qd.trace": ["0/A", "0/B"],
        "x-opt-qd.to": "dest", "x-opt-qd.phase": 1, "x-opt-qd.stream": 1,
        "x-opt-qd.class": "c", "x-opt-qd.": 0, "x-opt-qd.other": 5,
    })
    info = scan(data)
    ann = decode_annotations(data, info)
    assert (ann.ingress, ann.trace, ann.to, ann.phase, ann.stream) == (
        "0/A", ("0/A", "0/B"), "dest", 1, 1,
    )
    assert ann.user_count == 2
    assert ann.user_entries == sym("user") + str8("u") + sym("x-opt-qd.other") + b"\x55\x05"
    assert ann.trace_encoded == str8("0/A") + str8("0/B")


def test_decode_annotations_without_section() -> None:
    data = message(address="q")
    assert decode_annotations(data, scan(data)) is NO_ANNOTATIONS


def test_decode_annotations_with_user_keys_only() -> None:
    data = message({"a": 1, ulong(7): "x"})
    ann = decode_annotations(data, scan(data))
    assert (ann.ingress, ann.trace, ann.user_count) == (None, None, 2)
    assert ann.user_entries == sym("a") + b"\x55\x01" + b"\x53\x07" + str8("x")


def test_x_opt_qd_prefix_in_a_value_is_not_a_router_key() -> None:
    data = message({"u": "x-opt-qd.to", "x-opt-qd.custom": 1})
    info = scan(data)
    assert info.router_keys is None
    assert strip_router_annotations(data, info) is data


def test_string_typed_router_key_is_a_user_key() -> None:
    data = section(0x72, map8(str8("x-opt-qd.to"), str8("t"))) + PROPS + BODY
    assert scan(data).router_keys is None


@pytest.mark.parametrize(
    ("entries", "text"),
    [
        ((sym("x-opt-qd.to"), b"\x54\x01"), "to-override not a valid string type"),
        ((sym("x-opt-qd.trace"), str8("0/A")), "trace annotation is not a list"),
        ((sym("x-opt-qd.trace"), list8(str8("0/A"), b"\x54\x01")),
         "trace list contains non-string entries"),
        ((sym("x-opt-qd.ingress"), list8()), "ingress router not a string type"),
        ((sym("x-opt-qd.phase"), str8("1")), "phase annotation is not an integer"),
    ],
)
def test_bad_router_values_are_rejected_with_qdrouterd_texts(
    entries: tuple[bytes, bytes], text: str
) -> None:
    data = HEADER + section(0x72, map8(sym("u"), b"\x41", *entries)) + PROPS + BODY
    info = scan(data)  # scanning does not type-check router values ...
    with pytest.raises(MessageFormatError) as caught:
        decode_annotations(data, info)
    assert str(caught.value) == text
    assert caught.value.condition == INVALID_FIELD
    stripped = strip_router_annotations(data, info)  # ... so inbound stripping still works
    assert stripped == HEADER + section(0x72, map8(sym("u"), b"\x41")) + PROPS + BODY


@pytest.mark.parametrize(
    ("ma", "text"),
    [
        (list8(), "Invalid message annotations section - missing map type"),
        (b"\x40", "Invalid message annotations section - missing map type"),
        (map8(sym("a"), b"\x41", sym("b")), "Invalid MA map count (odd number of fields)"),
    ],
)
def test_malformed_annotation_sections_use_qdrouterd_texts(ma: bytes, text: str) -> None:
    with pytest.raises(MessageFormatError) as caught:
        scan(section(0x72, ma) + PROPS + BODY)
    assert str(caught.value) == text
    assert caught.value.condition == INVALID_FIELD


def test_annotation_map_with_router_keys_is_validated_by_scan() -> None:
    entries = sym("x-opt-qd.to") + b"\x40"
    padded = bytes((0xC1, len(entries) + 2, 2)) + entries + b"\x40"
    with pytest.raises(MessageFormatError, match="past its entries"):
        scan(section(0x72, padded) + PROPS)
    overrun = bytes((0xC1, len(entries) + 1, 4)) + entries
    with pytest.raises(MessageFormatError, match="overruns"):
        scan(section(0x72, overrun) + PROPS)


# --- strip ----------------------------------------------------------------


@pytest.mark.parametrize(
    "annotations",
    [None, {"a": 1}, {"a": 1, "b": [1, 2], ulong(3): "x"}, {"x-opt-qd.custom": "kept"}],
)
def test_strip_without_router_keys_returns_the_same_bytes(
    annotations: dict[Any, Any] | None,
) -> None:
    data = message(annotations, address="q")
    assert strip_router_annotations(data, scan(data)) is data


def test_strip_removes_router_keys_and_keeps_user_keys_in_order() -> None:
    data = message({
        "a": 1, "x-opt-qd.ingress": "0/A", "b": "two", "x-opt-qd.trace": ["0/A"],
        "x-opt-qd.to": "t", "c": [3], "x-opt-qd.phase": 2,
    }, address="q", priority=6, subject="s")
    stripped = strip_router_annotations(data, scan(data))
    assert ma_items(stripped) == [("a", 1), ("b", "two"), ("c", [3])]
    assert fields(stripped) == fields(data)


def test_strip_drops_the_section_when_only_router_keys_remain() -> None:
    data = message({"x-opt-qd.ingress": "0/A", "x-opt-qd.trace": ["0/A"]}, address="q")
    stripped = strip_router_annotations(data, scan(data))
    assert stripped == message(address="q")


def test_strip_keeps_every_byte_outside_the_section() -> None:
    msg = Message(body={"k": [1, 2]}, address="q", durable=True, properties={"p": 1})
    msg.instructions = {symbol("d"): "i"}
    msg.annotations = {symbol("x-opt-qd.to"): "t", symbol("u"): 1}
    data = bytes(msg.encode())
    info = scan(data)
    stripped = strip_router_annotations(data, info)
    start = info.ma_start
    assert stripped[:start] == data[:start]
    assert stripped[start:].endswith(data[info.ma_end :])
    assert stripped[start : len(stripped) - len(data) + info.ma_end] == section(
        0x72, map8(sym("u"), b"\x55\x01")
    )


# --- annotate -------------------------------------------------------------

BODIES: list[tuple[Any, bool]] = [
    ("text", False),
    (b"binary", True),  # a Data section
    ([1, "two", 3.0], False),
    ([1, "two"], True),  # an AmqpSequence section
    ({"k": "v", "n": 2}, False),
    (None, False),
]


@pytest.mark.parametrize(("body", "inferred"), BODIES)
def test_annotate_inserts_a_section_before_properties(body: Any, inferred: bool) -> None:
    msg = Message(body=body, inferred=inferred, address="q", priority=9, reply_to="r",
                  correlation_id="c", subject="s", properties={"app": 1})
    data = bytes(msg.encode())
    info = scan(data)
    out = annotate(data, info, ingress="0/A", trace=["0/A"], to=None, phase=None)
    assert ma_items(out) == [("x-opt-qd.ingress", "0/A"), ("x-opt-qd.trace", ["0/A"])]
    assert fields(out) == fields(data)
    assert out.startswith(data[: info.ma_start])
    assert out.endswith(data[info.ma_end :])
    assert strip_router_annotations(out, scan(out)) == data


def test_annotate_after_delivery_annotations() -> None:
    msg = Message(body="b", address="q")
    msg.instructions = {symbol("d"): 1}
    data = bytes(msg.encode())
    out = annotate(data, scan(data), ingress="0/A", trace=[], to=None, phase=None)
    decoded = decode(out)
    assert decoded.instructions == {"d": 1}
    assert list(decoded.annotations.items()) == [
        ("x-opt-qd.ingress", "0/A"), ("x-opt-qd.trace", []),
    ]


def test_annotate_orders_router_keys_after_user_keys() -> None:
    data = message({
        "x-opt-qd.trace": ["0/X"], "a": 1, "x-opt-qd.ingress": "0/X", "b": 2,
    }, address="q")
    out = annotate(data, scan(data), ingress="0/A", trace=["0/A", "0/B"], to="t", phase=3,
                   stream=1)
    assert ma_items(out) == [
        ("a", 1), ("b", 2), ("x-opt-qd.phase", 3), ("x-opt-qd.stream", 1),
        ("x-opt-qd.to", "t"), ("x-opt-qd.ingress", "0/A"), ("x-opt-qd.trace", ["0/A", "0/B"]),
    ]
    assert fields(out) == fields(data)


def test_annotate_upward_keeps_user_keys_and_the_stream_marker_and_drops_ingress() -> None:
    # An edge's copy up its uplink: no ingress or trace, but a carried TCP
    # connection stays a stream for the routers beyond (docs/tcp.md).
    data = message({"x-opt-qd.ingress": "0/X", "a": 1, "x-opt-qd.stream": 1}, address="q")
    info = scan(data)
    ann = decode_annotations(data, info)
    out = annotate_upward(data, info, to="svc", phase=None, stream=ann.stream)
    assert ma_items(out) == [("a", 1), ("x-opt-qd.stream", 1), ("x-opt-qd.to", "svc")]
    assert fields(out) == fields(data)
    plain = annotate_upward(data, info, to="svc", phase=None)
    assert ma_items(plain) == [("a", 1), ("x-opt-qd.to", "svc")]


def test_annotate_omits_zero_phase_and_absent_to() -> None:
    data = message(address="q")
    out = annotate(data, scan(data), ingress="0/A", trace=["0/A"], to=None, phase=0)
    assert [k for k, _ in ma_items(out)] == ["x-opt-qd.ingress", "x-opt-qd.trace"]


@pytest.mark.parametrize("phase", [1, 22, -1, 127, 128, -129, 2**31 - 1])
def test_annotate_encodes_phase_as_int(phase: int) -> None:
    data = message(address="q")
    out = annotate(data, scan(data), ingress="0/A", trace=[], to=None, phase=phase)
    assert dict(ma_items(out))["x-opt-qd.phase"] == phase
    assert decode_annotations(out, scan(out)).phase == phase


def test_annotate_uses_32_bit_encodings_when_needed() -> None:
    big_user = {"u": "v" * 300}
    data = message(big_user, address="q")
    trace = [f"0/router-{i:03d}" for i in range(300)]
    out = annotate(data, scan(data), ingress="0/" + "i" * 300, trace=trace, to="t" * 256,
                   phase=None)
    items = dict(ma_items(out))
    assert items["x-opt-qd.trace"] == trace
    assert items["x-opt-qd.ingress"] == "0/" + "i" * 300
    assert items["x-opt-qd.to"] == "t" * 256
    assert items["u"] == "v" * 300
    assert out[scan(out).ma_start + 3] == 0xD1  # map32
    ann = decode_annotations(out, scan(out))
    assert (ann.trace, ann.to) == (tuple(trace), "t" * 256)


def test_annotate_uses_8_bit_encodings_when_they_fit() -> None:
    data = message(address="q")
    out = annotate(data, scan(data), ingress="0/A", trace=["0/A"], to=None, phase=None)
    assert out[4:] == section(0x72, map8(
        sym("x-opt-qd.ingress"), str8("0/A"), sym("x-opt-qd.trace"), list8(str8("0/A")),
    )) + data[4:]


def test_annotate_walks_a_user_only_map_before_re_emitting_it() -> None:
    garbage = b"\xc1\x04\x02\xa3\x05a"  # a key that overruns the map
    data = section(0x72, garbage) + PROPS + BODY
    info = scan(data)  # no router keys: scan does not walk the entries
    assert info.router_keys is None
    assert strip_router_annotations(data, info) is data
    with pytest.raises(MessageFormatError):
        annotate(data, info, ingress="0/A", trace=[], to=None, phase=None)
    with pytest.raises(MessageFormatError):
        AnnotationEncoder("A").annotate(data, info, None, to=None, phase=None)


def test_annotate_is_idempotent_over_its_own_output() -> None:
    data = message({"a": 1, "x-opt-qd.to": "old"}, address="q")
    once = annotate(data, scan(data), ingress="0/A", trace=["0/A"], to="t", phase=2)
    twice = annotate(once, scan(once), ingress="0/A", trace=["0/A"], to="t", phase=2)
    assert once == twice


def test_large_body_round_trips() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    data = message({"u": 1}, body=body, inferred=True, address="big")
    info = scan(data)
    assert info.to == "big"
    out = annotate(data, info, ingress="0/A", trace=["0/A"], to=None, phase=None)
    assert fields(out)["body"] == body
    stripped = strip_router_annotations(out, scan(out))
    assert fields(stripped)["body"] == body
    assert len(stripped) == len(data) - 6  # map32 header became map8


# --- AnnotationEncoder ----------------------------------------------------


def test_encoder_marks_a_new_message_with_its_own_ingress_and_trace() -> None:
    encoder = AnnotationEncoder("R1")
    data = message({"a": 1}, address="q")
    info = scan(data)
    out = encoder.annotate(data, info, decode_annotations(data, info), to=None, phase=None)
    assert encoder.ingress == "0/R1"
    assert ma_items(out) == [("a", 1), ("x-opt-qd.ingress", "0/R1"),
                             ("x-opt-qd.trace", ["0/R1"])]
    assert out == annotate(data, info, ingress="0/R1", trace=["0/R1"], to=None, phase=None)


def test_encoder_keeps_received_ingress_and_appends_to_trace() -> None:
    encoder = AnnotationEncoder("R2")
    data = message({"x-opt-qd.ingress": "0/R0", "x-opt-qd.trace": ["0/R0", "0/R1"],
                    "x-opt-qd.to": "t", "b": 2}, address="q")
    info = scan(data)
    ann = decode_annotations(data, info)
    out = encoder.annotate(data, info, ann, to=ann.to, phase=5)
    assert ma_items(out) == [
        ("b", 2), ("x-opt-qd.phase", 5), ("x-opt-qd.to", "t"), ("x-opt-qd.ingress", "0/R0"),
        ("x-opt-qd.trace", ["0/R0", "0/R1", "0/R2"]),
    ]
    assert out == annotate(data, info, ingress="0/R0", trace=["0/R0", "0/R1", "0/R2"],
                           to="t", phase=5)


def test_encoder_ignores_received_router_keys_without_annotations() -> None:
    encoder = AnnotationEncoder("R")
    data = message({"x-opt-qd.ingress": 5, "x-opt-qd.trace": "bad", "u": 1}, address="q")
    out = encoder.annotate(data, scan(data), None, to=None, phase=None)
    assert ma_items(out) == [("u", 1), ("x-opt-qd.ingress", "0/R"), ("x-opt-qd.trace", ["0/R"])]


def test_encoder_with_empty_received_trace() -> None:
    encoder = AnnotationEncoder("R")
    data = message({"x-opt-qd.trace": []}, address="q")
    info = scan(data)
    out = encoder.annotate(data, info, decode_annotations(data, info), to=None, phase=None)
    assert dict(ma_items(out))["x-opt-qd.trace"] == ["0/R"]


# --- encoders -------------------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 255, 256, 70000])
def test_string_and_symbol_encodings(length: int) -> None:
    text = "s" * length
    small = length < 256
    assert encode_string(text)[0] == (0xA1 if small else 0xB1)
    assert encode_symbol(text)[0] == (0xA3 if small else 0xB3)
    assert encode_string(text).endswith(text.encode())
    assert encode_symbol(text).endswith(text.encode())
    data = message(address=text)
    assert scan(data).to == text
    out = annotate(data, scan(data), ingress=text, trace=[text], to=text, phase=None)
    ann = decode_annotations(out, scan(out))
    assert (ann.ingress, ann.trace, ann.to) == (text, (text,), text)
    assert dict(ma_items(out))["x-opt-qd.to"] == text


def test_encode_string_handles_multibyte_text() -> None:
    assert encode_string("é" * 200)[:2] == b"\xb1\x00"  # 400 bytes of UTF-8
    data = message(address="é" * 10)
    assert scan(data).to == "é" * 10


def test_message_info_is_a_light_tuple() -> None:
    info = scan(message(address="q"))
    assert isinstance(info, MessageInfo)
    assert isinstance(info, tuple)


# --- memos keyed by the annotations section -----------------------------------


def test_a_section_read_again_at_another_offset_decodes_the_same() -> None:
    keys = {"x-opt-qd.ingress": "0/A", "x-opt-qd.trace": ["0/A"], "x-opt-qd.to": "t", "u": 1}
    bare = message(keys, address="q")
    with_header = message(keys, address="q", priority=7, durable=True)
    first = decode_annotations(bare, scan(bare))
    second = decode_annotations(with_header, scan(with_header))  # same section, later offset
    assert scan(bare).ma_start < scan(with_header).ma_start
    assert first == second
    assert (second.ingress, second.trace, second.to, second.origin, second.visited) == (
        "0/A", ("0/A",), "t", "A", frozenset({"A"}))
    stripped = strip_router_annotations(with_header, scan(with_header))
    assert fields(stripped)["priority"] == 7 and fields(stripped)["instructions"] is None
    assert decode(stripped).annotations == {symbol("u"): 1}


def test_repeated_rewrites_equal_fresh_ones() -> None:
    encoder = AnnotationEncoder("B")
    data = message({"x-opt-qd.ingress": "0/A", "x-opt-qd.trace": ["0/A"]}, address="q")
    info = scan(data)
    ann = decode_annotations(data, info)
    outputs = {encoder.annotate(data, info, ann, to=None, phase=None) for _ in range(3)}
    assert len(outputs) == 1
    out = outputs.pop()
    fresh = annotate(data, info, ingress="0/A", trace=["0/A", "0/B"], to=None, phase=None)
    assert out == fresh
    # the same section with a different to/phase is a different result
    other = encoder.annotate(data, info, ann, to="x", phase=2)
    other_ann = decode_annotations(other, scan(other))
    assert (other_ann.to, other_ann.phase, other_ann.trace) == ("x", 2, ("0/A", "0/B"))
    # dropping the received keys unread is a different result again
    dropped = encoder.annotate(data, info, None, to=None, phase=None)
    assert decode_annotations(dropped, scan(dropped)).trace == ("0/B",)


def test_memos_stay_bounded_and_correct_past_their_size() -> None:
    from router.core import message as module

    encoder = AnnotationEncoder("B")
    reader = MessageReader()
    for i in range(module.MEMO_SIZE + 50):
        data = message({"x-opt-qd.ingress": f"0/R{i}", "x-opt-qd.trace": [f"0/R{i}"]})
        info = reader.scan(data)
        ann = reader.decode_annotations(data, info)
        assert ann.origin == f"R{i}"
        out = encoder.annotate(data, info, ann, to=None, phase=None)
        assert reader.decode_annotations(out, reader.scan(out)).trace == (f"0/R{i}", "0/B")
        assert decode(reader.strip_router_annotations(data, info)).annotations is None
    for memo in (reader._keys, reader._annotations, reader._strip, encoder._memo):
        assert 0 < len(memo) <= module.MEMO_SIZE


def test_two_readers_share_no_memo() -> None:
    """Each router reads with its own memos (two routers in one process)."""
    data = message({"x-opt-qd.ingress": "0/R", "x-opt-qd.trace": ["0/R"]})
    first, second = MessageReader(), MessageReader()
    first.decode_annotations(data, first.scan(data))
    assert first._keys and first._annotations
    assert not second._keys and not second._annotations
    info = second.scan(data)
    assert second.decode_annotations(data, info) == decode_annotations(data, scan(data))
    assert second.strip_router_annotations(data, info) == strip_router_annotations(data, info)


def test_a_bad_section_is_refused_every_time() -> None:
    data = message({"x-opt-qd.ingress": 5})
    for _ in range(2):
        with pytest.raises(MessageFormatError) as info:
            decode_annotations(data, scan(data))
        assert info.value.condition == INVALID_FIELD
