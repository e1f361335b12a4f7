"""router.core.tcpstream: connection ids and the read window of a carried stream."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.core.tcpstream import (
    STREAM_MARK,
    WINDOW_BYTES,
    ReadWindow,
    StreamFormatError,
    StreamHead,
    StreamReader,
    connection_id,
    data_head,
    stream_head,
)


def test_the_id_is_the_clients_address_then_the_site() -> None:
    assert connection_id("127.0.0.1:40123", None) == "127.0.0.1:40123"
    assert connection_id("127.0.0.1:40123", "") == "127.0.0.1:40123"
    assert connection_id("[::1]:5000", "east") == "[::1]:5000@east"


def test_reading_stops_at_the_window_and_resumes_on_a_report() -> None:
    window = ReadWindow()
    assert window.room == WINDOW_BYTES == 1_459_620
    window.took(WINDOW_BYTES - 10)
    assert window.room == 10 and not window.full
    window.took(10)
    assert window.full and window.room == 0
    assert window.reported(4096) is True, "the window opened"
    assert window.room == 4096 and not window.full
    assert window.reported(8192) is False, "it was not full"
    assert window.room == 8192


def test_an_older_report_or_one_beyond_what_was_read_moves_nothing_past_bounds() -> None:
    window = ReadWindow()
    window.took(100)
    window.reported(80)
    window.reported(40)  # crossed on the way: older
    assert window.written == 80
    window.reported(10_000)  # more than was ever sent
    assert window.written == 100 and window.room == WINDOW_BYTES


def test_a_settled_or_finished_delivery_lifts_the_window() -> None:
    window = ReadWindow()
    window.took(WINDOW_BYTES)
    assert window.full
    assert window.ended() is True, "held reading may go on"
    assert window.room is None and not window.full
    window.took(10 * WINDOW_BYTES)
    assert not window.full
    assert ReadWindow().ended() is False


@given(st.lists(st.one_of(st.tuples(st.just("took"), st.integers(0, 2 * WINDOW_BYTES)),
                          st.tuples(st.just("reported"), st.integers(0, 10 * WINDOW_BYTES)))))
def test_the_unreported_bytes_never_exceed_the_window_when_reads_respect_room(
        steps: list[tuple[str, int]]) -> None:
    window = ReadWindow()
    for kind, amount in steps:
        if kind == "took":
            room = window.room
            assert room is not None
            window.took(min(amount, room))
        else:
            window.reported(amount)
        assert 0 <= window.read - window.written <= WINDOW_BYTES
        assert window.written <= window.read


# -- the stream's message ------------------------------------------------------------

def _message(chunks: list[bytes], head: bytes | None = None) -> bytes:
    head = stream_head("tcp.echo", "127.0.0.1:40123@east", "_topo/0/R/temp.x") \
        if head is None else head
    return head + b"".join(data_head(len(c)) + c for c in chunks)


@given(st.lists(st.binary(max_size=300), max_size=6), st.data())
def test_the_body_bytes_come_out_however_the_parts_are_split(chunks: list[bytes],
                                                             data: st.DataObject) -> None:
    message = _message(chunks)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(message)), max_size=12)))
    reader = StreamReader()
    out = []
    for start, end in zip([0, *cuts], [*cuts, len(message)], strict=True):
        out += [bytes(piece) for piece in reader.feed(message[start:end])]
    assert b"".join(out) == b"".join(chunks)
    assert reader.head == StreamHead("tcp.echo", "127.0.0.1:40123@east", "_topo/0/R/temp.x")


def test_proton_reads_the_head_as_the_properties_and_marker_it_names() -> None:
    from proton import Message

    message = Message()
    message.decode(_message([b"hi"], stream_head("addr", "id-1")))
    assert message.address == "addr" and message.subject == "id-1"
    assert message.reply_to is None and message.id is None and message.user_id in (None, b"")
    assert dict(message.annotations) == {"x-opt-qd.stream": 1}
    assert bytes(message.body) == b"hi"
    assert STREAM_MARK in stream_head("addr", "id-1")


def test_sections_in_other_forms_are_read_and_a_footer_passed_over() -> None:
    from proton import Message

    message = Message(address="svc", subject="c1", reply_to="back", durable=True,
                      properties={"k": "v"}, body=b"payload", inferred=True)
    message.annotations = {"x-opt-qd.trace": ["0/R0"]}
    encoded = message.encode()  # header, annotations, properties, app-properties, data
    footer = b"\x00\x53\x78\xc1\x01\x00"
    reader = StreamReader()
    out = [bytes(p) for p in reader.feed(encoded + footer)]
    assert b"".join(out) == b"payload"
    assert reader.head == StreamHead("svc", "c1", "back")
    # The data descriptor as a symbol, its contents in a vbin8.
    symbolic = b"\x00\xa3\x10amqp:data:binary\xa0\x03abc"
    reader = StreamReader()
    assert [bytes(p) for p in reader.feed(symbolic)] == [b"abc"]


def test_a_body_that_is_not_data_is_refused() -> None:
    from proton import Message

    reader = StreamReader()
    with pytest.raises(StreamFormatError):
        reader.feed(Message(address="a", body="text").encode())
    with pytest.raises(StreamFormatError):
        StreamReader().feed(b"\x53\x75\xb0")
    reader = StreamReader()
    with pytest.raises(StreamFormatError):
        # An annotations map that never ends within MAX_HEAD_BYTES.
        reader.feed(b"\x00\x53\x72\xd1" + (1 << 30).to_bytes(4, "big") + bytes(70_000))


def test_a_marked_stream_is_forwarded_from_its_first_frame_once_its_properties_are_in() -> None:
    from router.adapter.forwarding.forwarder import _stream_marked

    head = stream_head("svc", "h:1", "reply")
    assert _stream_marked(bytearray(head + data_head(0)))
    # qdrouterd 1.18 sends the properties alone first: enough to route on.
    assert _stream_marked(bytearray(head))
    # Properties not all in yet: not yet.
    for cut in range(len(head) - 1, len(head) - 20, -1):
        assert not _stream_marked(bytearray(head[:cut])), cut
    from proton import Message

    plain = Message(address="svc", body=b"x" * 100)
    plain.inferred = True
    assert not _stream_marked(bytearray(plain.encode()))


def test_a_router_passes_the_streaming_marker_on() -> None:
    from router.core.message import AnnotationEncoder, decode_annotations, scan

    data = stream_head("svc", "h:1", "reply") + data_head(3) + b"abc"
    info = scan(data)
    out = AnnotationEncoder("A").annotate(data, info, decode_annotations(data, info),
                                          to=None, phase=None)
    again = decode_annotations(out, scan(out))
    assert again.stream == 1 and again.ingress == "0/A"
    assert StreamReader().feed(out)[-1] == b"abc"
