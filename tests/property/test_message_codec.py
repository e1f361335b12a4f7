"""Property tests for router.core.message.

(a) Fed any bytes, the decoders return or raise ``MessageFormatError``, nothing else.
(b) For proton-built messages, strip/annotate change only the router keys:
    proton decodes every other field unchanged, and the rewritten bytes are
    exactly the received ones with the annotations section re-encoded.
"""

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from proton import AnnotationDict, Message, symbol, ulong

from router.core.message import (
    AnnotationEncoder,
    MessageFormatError,
    MessageInfo,
    annotate,
    decode_annotations,
    scan,
    strip_router_annotations,
)

FIELDS = (
    "durable", "priority", "ttl", "first_acquirer", "delivery_count", "id", "user_id",
    "address", "subject", "reply_to", "correlation_id", "content_type", "group_id",
    "group_sequence", "reply_to_group_id", "properties", "instructions", "body", "inferred",
)
ROUTER_KEYS = (
    "x-opt-qd.ingress", "x-opt-qd.trace", "x-opt-qd.to", "x-opt-qd.phase",
    "x-opt-qd.stream", "x-opt-qd.class", "x-opt-qd.",
)
ENCODER = AnnotationEncoder("Router.B")

# --- (a) arbitrary input ------------------------------------------------------


def exercise(data: bytes | bytearray | memoryview) -> None:
    """Run every entry point on ``data``; only MessageFormatError may escape."""
    try:
        info = scan(data)
    except MessageFormatError:
        return
    assert isinstance(info, MessageInfo)
    assert 0 <= info.ma_start <= info.ma_end <= info.scan_end <= len(data)
    scan(data, False)
    try:
        annotations = decode_annotations(data, info)
    except MessageFormatError:
        annotations = None
    strip_router_annotations(data, info)
    try:
        annotate(data, info, ingress="0/A", trace=["0/A"], to="t", phase=1)
        out = ENCODER.annotate(data, info, annotations, to=None, phase=None)
    except MessageFormatError:
        assert info.router_keys is None  # a user-only map is first walked here
        return
    assert scan(out).router_keys is not None  # what Hop sends, Hop can read


FUZZ_SETTINGS = settings(max_examples=500)


@FUZZ_SETTINGS
@given(st.binary(max_size=300))
def test_arbitrary_bytes_scan_or_raise_message_format_error(data: bytes) -> None:
    exercise(data)
    exercise(memoryview(data))


SECTION_HEAD = st.sampled_from([0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x77, 0x78]).map(
    lambda code: bytes((0x00, 0x53, code))
)
VALUE_HEAD = st.sampled_from(
    [b"\x45", b"\xc0", b"\xd0", b"\xc1", b"\xd1", b"\xa1", b"\xa3", b"\x40", b"\x50", b"\x00"]
)


@FUZZ_SETTINGS
@given(st.lists(st.tuples(SECTION_HEAD, VALUE_HEAD, st.binary(max_size=40)), max_size=6))
# an annotations map whose count is 0 but whose size covers more bytes
@example([(b"\x00Sr", b"\xc1", b"\x11"), (b"\x00Sp", b"E", b""),
          (b"\x00Sp", b"\xc0", bytes(9))])
@example([(b"\x00Sr", b"\xc1", b"\x11"), (b"\x00Sp", b"E", b""),
          (b"\x00Sp", b"E", bytes(8) + b"\x01")])
def test_section_shaped_bytes_scan_or_raise(parts: list[tuple[bytes, bytes, bytes]]) -> None:
    exercise(b"".join(a + b + c for a, b, c in parts))


SAMPLE = Message(body="body", address="queue", priority=3, subject="s")
SAMPLE.instructions = {symbol("d"): 1}
SAMPLE.annotations = AnnotationDict({
    symbol("u"): "v", symbol("x-opt-qd.to"): "t", symbol("x-opt-qd.ingress"): "0/A",
    symbol("x-opt-qd.trace"): ["0/A", "0/B"], symbol("x-opt-qd.phase"): 1, symbol("w"): [1],
})
SAMPLE_BYTES = bytes(SAMPLE.encode())


@FUZZ_SETTINGS
@given(
    st.lists(
        st.tuples(st.integers(0, len(SAMPLE_BYTES) - 1), st.integers(0, 255),
                  st.sampled_from(["set", "insert", "delete"])),
        min_size=1, max_size=4,
    )
)
def test_mutated_messages_scan_or_raise(edits: list[tuple[int, int, str]]) -> None:
    data = bytearray(SAMPLE_BYTES)
    for index, byte, how in edits:
        index = min(index, len(data) - 1)
        if how == "set":
            data[index] = byte
        elif how == "insert":
            data.insert(index, byte)
        elif len(data) > 1:
            del data[index]
    exercise(bytes(data))
    exercise(data)


@given(st.integers(0, len(SAMPLE_BYTES)))
def test_truncated_messages_scan_or_raise(cut: int) -> None:
    exercise(SAMPLE_BYTES[:cut])


# --- (b) generated messages ---------------------------------------------------

TEXT = st.text(max_size=12)
SYMBOL = st.text(st.characters(max_codepoint=127), max_size=12).map(symbol)
LONG_TEXT = st.one_of(TEXT, st.text(min_size=250, max_size=300))
SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), TEXT, st.binary(max_size=8),
    SYMBOL, st.floats(allow_nan=False),
)
VALUE = st.one_of(SCALAR, st.lists(SCALAR, max_size=3))
USER_KEY = st.one_of(
    st.text("abcxyz-.", max_size=10).filter(lambda k: k not in ROUTER_KEYS).map(symbol),
    st.just(symbol("x-opt-qd.other")),
    st.integers(0, 2**64 - 1).map(ulong),
)
ROUTER_VALUE = {
    "x-opt-qd.ingress": LONG_TEXT,
    "x-opt-qd.trace": st.lists(LONG_TEXT, max_size=4),
    "x-opt-qd.to": LONG_TEXT,
    "x-opt-qd.phase": st.integers(-(2**31), 2**31 - 1),
    "x-opt-qd.stream": st.integers(0, 1),
    "x-opt-qd.class": VALUE,
    "x-opt-qd.": VALUE,
}
BODY = st.one_of(
    st.tuples(st.one_of(st.none(), TEXT, st.lists(SCALAR, max_size=3),
                        st.dictionaries(TEXT, SCALAR, max_size=3)), st.just(False)),
    st.tuples(st.binary(max_size=300), st.just(True)),  # Data
    st.tuples(st.lists(SCALAR, max_size=3), st.just(True)),  # AmqpSequence
)
MESSAGE_ID = st.one_of(st.none(), st.integers(0, 2**64 - 1).map(ulong), TEXT,
                       st.uuids(), st.binary(max_size=8))


@st.composite
def annotation_entries(draw: st.DrawFn) -> list[tuple[Any, Any]]:
    user = draw(st.lists(st.tuples(USER_KEY, VALUE), max_size=4, unique_by=lambda kv: kv[0]))
    names = draw(st.lists(st.sampled_from(ROUTER_KEYS), max_size=5, unique=True))
    router = [(symbol(name), draw(ROUTER_VALUE[name])) for name in names]
    return draw(st.permutations(user + router))


@st.composite
def messages(draw: st.DrawFn) -> tuple[bytes, list[tuple[Any, Any]] | None]:
    body, inferred = draw(BODY)
    msg = Message(body=body, inferred=inferred)
    msg.durable = draw(st.booleans())
    msg.priority = draw(st.integers(0, 255))
    msg.ttl = draw(st.integers(0, 100_000))
    msg.address = draw(st.one_of(st.none(), LONG_TEXT))
    msg.id = draw(MESSAGE_ID)
    msg.user_id = draw(st.binary(max_size=6))
    msg.subject = draw(st.one_of(st.none(), TEXT))
    msg.reply_to = draw(st.one_of(st.none(), TEXT))
    msg.correlation_id = draw(MESSAGE_ID)
    if draw(st.booleans()):
        msg.instructions = draw(st.dictionaries(SYMBOL, SCALAR, max_size=3))
    if draw(st.booleans()):
        msg.properties = draw(st.dictionaries(TEXT, SCALAR, max_size=3))
    entries = draw(st.one_of(st.none(), annotation_entries()))
    if entries is not None:
        msg.annotations = AnnotationDict(dict(entries))
    return bytes(msg.encode()), entries


def decode(data: bytes) -> Any:
    msg = Message()
    msg.decode(data)
    return msg


def plain(value: Any) -> Any:
    """``value`` with proton's memoryviews (binary values) turned into bytes."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    return value


def fields(data: bytes) -> dict[str, Any]:
    msg = decode(data)
    return {name: plain(getattr(msg, name)) for name in FIELDS}


def ma_items(data: bytes) -> list[tuple[Any, Any]]:
    msg = decode(data)  # binary values are views into msg: keep it alive while copying
    return [(k, plain(v)) for k, v in (msg.annotations or {}).items()]


def user_part(entries: list[tuple[Any, Any]] | None) -> list[tuple[Any, Any]]:
    return [(k, plain(v)) for k, v in entries or [] if k not in ROUTER_KEYS]


def compact_section(user: bytes, count: int) -> bytes:
    """The message-annotations section Hop writes for ``count`` user entries."""
    if not count:
        return b""
    if len(user) < 255 and 2 * count < 256:
        return b"\x00\x53\x72\xc1" + bytes((len(user) + 1, 2 * count)) + user
    return (b"\x00\x53\x72\xd1" + (len(user) + 4).to_bytes(4, "big")
            + (2 * count).to_bytes(4, "big") + user)


PROPERTY_SETTINGS = settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(messages())
def test_scan_and_decode_agree_with_proton(generated: tuple[bytes, Any]) -> None:
    data, entries = generated
    msg = decode(data)
    info = scan(data)
    assert info.to == msg.address
    assert info.priority in (None, msg.priority)  # proton omits the default, 4
    assert info.priority is not None or msg.priority == 4
    router = dict((k, v) for k, v in entries or [] if k in ROUTER_KEYS)
    assert (info.router_keys is not None) == bool(router)
    ann = decode_annotations(data, info)
    assert ann.ingress == router.get("x-opt-qd.ingress")
    trace = router.get("x-opt-qd.trace")
    assert ann.trace == (None if trace is None else tuple(trace))
    assert ann.to == router.get("x-opt-qd.to")
    assert ann.phase == router.get("x-opt-qd.phase")
    assert ann.stream == router.get("x-opt-qd.stream")
    assert ann.user_count == len(user_part(entries))


@PROPERTY_SETTINGS
@given(messages())
def test_strip_keeps_everything_but_router_keys(generated: tuple[bytes, Any]) -> None:
    data, entries = generated
    info = scan(data)
    stripped = strip_router_annotations(data, info)
    assert fields(stripped) == fields(data)
    assert ma_items(stripped) == user_part(entries)
    if info.router_keys is None:
        assert stripped is data
    else:
        ann = decode_annotations(data, info)
        assert stripped == (data[: info.ma_start] + compact_section(
            ann.user_entries, ann.user_count) + data[info.ma_end :])
    assert strip_router_annotations(stripped, scan(stripped)) is stripped


@PROPERTY_SETTINGS
@given(
    messages(),
    LONG_TEXT,
    st.lists(LONG_TEXT, max_size=4),
    st.one_of(st.none(), LONG_TEXT),
    st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
)
def test_annotate_then_strip_round_trips(
    generated: tuple[bytes, Any], ingress: str, trace: list[str], to: str | None,
    phase: int | None,
) -> None:
    data, entries = generated
    info = scan(data)
    out = annotate(data, info, ingress=ingress, trace=trace, to=to, phase=phase)
    assert fields(out) == fields(data)
    expected = user_part(entries)
    if phase:
        expected.append(("x-opt-qd.phase", phase))
    if to is not None:
        expected.append(("x-opt-qd.to", to))
    expected += [("x-opt-qd.ingress", ingress), ("x-opt-qd.trace", trace)]
    assert ma_items(out) == expected

    out_info = scan(out)
    assert out_info.to == info.to and out_info.priority == info.priority
    ann = decode_annotations(out, out_info)
    assert (ann.ingress, ann.trace, ann.to, ann.phase) == (ingress, tuple(trace), to, phase or None)

    stripped = strip_router_annotations(out, out_info)
    user = decode_annotations(data, info)
    assert stripped == (data[: info.ma_start] + compact_section(
        user.user_entries, user.user_count) + data[info.ma_end :])
    if info.ma_start == info.ma_end:
        assert stripped == data
    again = annotate(out, out_info, ingress=ingress, trace=trace, to=to, phase=phase)
    assert again == out


@PROPERTY_SETTINGS
@given(messages(), st.one_of(st.none(), TEXT), st.integers(0, 30))
def test_encoder_matches_annotate(
    generated: tuple[bytes, Any], to: str | None, phase: int
) -> None:
    data, _ = generated
    info = scan(data)
    ann = decode_annotations(data, info)
    out = ENCODER.annotate(data, info, ann, to=to, phase=phase, stream=ann.stream)
    ingress = "0/Router.B" if ann.ingress is None else ann.ingress
    trace = [*(ann.trace or []), "0/Router.B"]
    assert out == annotate(
        data, info, ingress=ingress, trace=trace, to=to, phase=phase, stream=ann.stream
    )
    ignored = ENCODER.annotate(data, info, None, to=to, phase=phase)
    assert ignored == annotate(data, info, ingress="0/Router.B", trace=["0/Router.B"], to=to,
                               phase=phase)
