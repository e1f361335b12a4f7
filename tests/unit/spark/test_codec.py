"""Rows to messages and messages to rows."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest
from proton import Message, float32, int32, symbol, timestamp, ulong

from spark.codec import (
    body_bytes,
    check_write_columns,
    encoded_of,
    message_id_of,
    message_of,
    row_of,
)
from spark.errors import AmqpSchemaError
from spark.scan import Unsupported, scan


class FakeRow:
    """What pyspark gives for a struct: a Row with asDict."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def asDict(self, recursive: bool = False) -> dict[str, Any]:
        return dict(self.fields)


def roundtrip(msg: Message) -> Message:
    out = Message()
    out.decode(msg.encode())
    return out


def test_each_body_type_becomes_its_amqp_section() -> None:
    text = roundtrip(message_of({"body": "hi"}, "id-1", "a", anonymous=False))
    assert text.body == "hi" and text.id == "id-1" and text.address is None
    data = message_of({"body": bytearray(b"\x00\x01")}, "id-2", "a", anonymous=False)
    assert data.inferred and roundtrip(data).body == b"\x00\x01"
    struct = roundtrip(message_of({"body": FakeRow(k="x", n=2, inner=FakeRow(z=1.5))},
                                  "id-3", "a", anonymous=False))
    assert struct.body == {"k": "x", "n": 2, "inner": {"z": 1.5}}
    listed = roundtrip(message_of({"body": [1, 2]}, "id-4", "a", anonymous=False))
    assert listed.body == [1, 2]


def test_fields_properties_and_application_properties() -> None:
    row = {"body": "b", "subject": "s", "priority": 7, "message_id": "mine",
           "properties": {"content_type": "text/plain", "correlation-id": "c1",
                          "reply_to": "replies", "group_sequence": "3"},
           "application_properties": {"n": 1, "t": "x"}}
    msg = roundtrip(message_of(row, "default", "a", anonymous=False))
    assert (msg.subject, msg.priority, msg.id) == ("s", 7, "mine")
    assert (msg.content_type, msg.correlation_id, msg.reply_to, msg.group_sequence) \
        == ("text/plain", "c1", "replies", 3)
    assert msg.properties == {"n": 1, "t": "x"}


def test_a_to_column_addresses_each_message_of_an_anonymous_sender() -> None:
    assert message_of({"body": 1, "to": "q1"}, "i", "default", anonymous=True).address == "q1"
    assert message_of({"body": 1, "to": None}, "i", "default", anonymous=True).address \
        == "default"
    with pytest.raises(AmqpSchemaError, match="its 'to' is empty"):
        message_of({"body": 1}, "i", None, anonymous=True)


def test_unknown_columns_and_property_keys_are_refused_by_name() -> None:
    check_write_columns(["body", "subject", "to"])
    with pytest.raises(AmqpSchemaError, match="'colour' are not message fields"):
        check_write_columns(["body", "colour"])
    with pytest.raises(AmqpSchemaError, match="no 'body' column"):
        check_write_columns(["subject"])
    with pytest.raises(AmqpSchemaError, match="'flavour' is not a field"):
        message_of({"body": 1, "properties": {"flavour": "x"}}, "i", "a", anonymous=False)


def test_a_message_becomes_a_row() -> None:
    msg = Message(body={"k": "a", "n": 2}, id="m-1", subject="s", address="to-here",
                  properties={"p": 1}, annotations={"x-opt-a": "b"})
    body, props, app, ann, address, received_at = row_of(msg.encode(), "link-address",
                                                          1_700_000_000.5)
    assert json.loads(body or b"") == {"k": "a", "n": 2}
    assert props == {"message_id": "m-1", "to": "to-here", "subject": "s"}
    assert app == {"p": "1"}
    assert ann == {"x-opt-a": "b"}
    assert address == "to-here"
    assert received_at == dt.datetime.fromtimestamp(1_700_000_000.5, dt.UTC)
    assert message_id_of(msg.encode()) == "m-1"
    assert message_id_of(Message(body="x").encode()) is None
    assert row_of(Message(body="plain").encode(), "link", 0.0)[4] == "link"


def test_body_bytes() -> None:
    assert body_bytes(None) is None
    assert body_bytes("é") == "é".encode()
    assert body_bytes(b"\xff") == b"\xff"
    assert json.loads(body_bytes([1, {"a": None}]) or b"") == [1, {"a": None}]


def _fields(msg: Message) -> tuple[Any, ...]:
    body = bytes(msg.body) if isinstance(msg.body, memoryview) else msg.body
    return (body, msg.inferred, msg.id, msg.address, msg.subject, msg.properties)


@pytest.mark.parametrize(("row", "anonymous"), [
    ({"body": "hi"}, False),
    ({"body": b"\x00\x01"}, False),
    ({"body": bytearray(b"y" * 70_000), "message_id": "mine"}, False),
    ({"body": "\u00e9t\u00e9 " * 100, "subject": "s"}, False),
    ({"body": "t", "to": "q1"}, True),
    ({"body": "t", "to": None}, True),
    ({"body": "x" * 255, "subject": "y" * 300, "message_id": "z" * 256}, False),
])
def test_a_plain_row_is_encoded_as_the_message_proton_would_make(row: dict[str, Any],
                                                                  anonymous: bool) -> None:
    data, message_id = encoded_of(row, "default", "a", anonymous)
    direct = Message()
    direct.decode(data)
    made = roundtrip(message_of(row, "default", "a", anonymous))
    assert _fields(direct) == _fields(made)
    assert message_id == made.id


def test_a_row_that_is_not_plain_is_encoded_by_proton() -> None:
    row = {"body": {"k": 1}, "application_properties": {"n": 2}}
    data, message_id = encoded_of(row, "default", "a", False)
    msg = Message()
    msg.decode(data)
    assert (msg.body, msg.properties, message_id) == ({"k": 1}, {"n": 2}, "default")
    with pytest.raises(AmqpSchemaError, match="its 'to' is empty"):
        encoded_of({"body": "t"}, "i", None, True)


def _messages_of_every_shape() -> list[Message]:
    plain = Message(body="hi")
    data = Message(body=b"\x00\x01")
    data.inferred = True
    full = Message(body="x" * 300, id=uuid.UUID(int=7), subject="s", address="q1",
                   reply_to="r", correlation_id=ulong(9), content_type=symbol("text/plain"),
                   user_id=b"alice", group_id="g", group_sequence=3, reply_to_group_id="rg")
    full.creation_time = 1_700_000_000.5
    full.expiry_time = 1_700_000_100.25
    full.properties = {"n": int32(7), "u": ulong(2**40), "f": float32(1.5), "d": 2.5,
                       "b": True, "s": "t", "y": symbol("sym"), "t": timestamp(1000),
                       "none": None, "bin": b"\xff"}
    full.annotations = {symbol("x-opt-a"): "v", symbol("x-opt-n"): 4}
    empty = Message()
    number_id = Message(body=b"z" * 70_000, id=12)
    number_id.inferred = True
    durable = Message(body="d", durable=True, priority=7, ttl=5)
    listed = Message(body="l")
    listed.properties = {"list": [1, 2]}
    # Read by proton instead: a map body (JSON in the row).
    mapped = Message(body={"k": [1, "a"]})
    return [plain, data, full, empty, number_id, durable, listed, mapped]


def test_a_message_read_directly_makes_the_row_proton_would() -> None:
    from spark.codec import _fields_by_proton

    for msg in _messages_of_every_shape():
        data = msg.encode()
        direct = row_of(data, "a", 1.0)
        by_proton = _fields_by_proton(data, "a")
        assert direct[:5] == by_proton, msg
        assert message_id_of(data) == (None if msg.id is None else str(msg.id))
    # Read directly but for the one proton has to read.
    read = []
    for msg in _messages_of_every_shape():
        try:
            scan(msg.encode())
            read.append(True)
        except Unsupported:
            read.append(False)
    assert read == [True] * 7 + [False]


def test_typed_numbers_read_as_plain_numbers() -> None:
    msg = Message(body="x")
    msg.properties = {"n": int32(7), "u": ulong(9), "f": float32(1.5), "t": timestamp(1000)}
    assert row_of(msg.encode(), None, 0.0)[2] == {"n": "7", "u": "9", "f": "1.5", "t": "1000"}


def test_an_arrow_batch_holds_the_rows_row_of_makes_as_arrow_would_convert_them() -> None:
    import pyarrow as pa

    from spark.codec import record_batch_of

    # A data section alone, in a vbin8 and a vbin32, after empty header and
    # properties sections as proton encodes them, and one with a bad size.
    bare = Message(body=b"b" * 100)
    bare.inferred = True
    assert bytes(bare.encode()).startswith(b"\x00\x53\x70\x45\x00\x53\x73\x45\x00\x53\x75\xa0")
    encoded = [bytes(msg.encode()) for msg in [*_messages_of_every_shape(), bare]]
    encoded += [b"\x00\x53\x73\x45\x00\x53\x75\xa0\x01" + b"p",
                b"\x00\x53\x75\xa0\x64" + b"b" * 100,
                b"\x00\x53\x75\xb0\x00\x00\x01\x2c" + b"L" * 300,
                b"\x00\x53\x75\xa0\x02" + b"bb" + b"\x00\x53\x74\xc1\x07\x02\xa1\x01k\xa1\x01v"]
    given = [(data, "q" if i % 2 else None, 1_795_000_000.25 + i / 1e6)
             for i, data in enumerate(encoded)]
    rows = [row_of(*one) for one in given]
    string_map = pa.map_(pa.string(), pa.string())
    columns = list(zip(*rows, strict=True))
    expected = pa.RecordBatch.from_arrays(
        [pa.array(columns[0], pa.binary())]
        + [pa.array(c, string_map) for c in columns[1:4]]
        + [pa.array(columns[4], pa.string()),
           pa.array(columns[5], pa.timestamp("us", tz="UTC"))],
        names=["body", "properties", "application_properties", "annotations", "address",
               "received_at"])
    batch = record_batch_of(given)
    assert batch.equals(expected)
    assert batch.column("body")[len(encoded) - 3].as_py() == b"b" * 100
    assert batch.column("body")[len(encoded) - 5].as_py() == b"b" * 100
    assert batch.column("application_properties")[len(encoded) - 1].as_py() == [("k", "v")]
    assert batch.column("received_at")[1].value == 1_795_000_000_250_001
    assert record_batch_of([]).num_rows == 0


def test_a_message_id_read_at_once_is_the_one_proton_reads() -> None:
    from spark.codec import _message_id_at_once, _NotAtOnce

    durable = Message(body="d", id="in-durable", durable=True)
    long_id = Message(body="l", id="i" * 300, subject="s" * 300)  # a list32 properties
    annotated = Message(body="a", id="after-annotations", annotations={"x-opt-k": "v"})
    no_id = Message(body="n", subject="only-a-subject")
    written = encoded_of({"body": "w"}, "w:0:1", "q", anonymous=False)[0]
    by_uuid = Message(body="u", id=uuid.UUID(int=7))
    by_number = Message(body="u", id=ulong(12))
    bare = b"\x00\x53\x75\xa0\x02hi"
    read_at_once = {"in-durable": durable, "i" * 300: long_id, None: no_id}
    for expected, msg in read_at_once.items():
        assert _message_id_at_once(bytes(msg.encode())) == expected
    assert _message_id_at_once(written) == "w:0:1"
    assert _message_id_at_once(bare) is None
    for msg in (annotated, by_uuid, by_number):
        with pytest.raises(_NotAtOnce):
            _message_id_at_once(bytes(msg.encode()))
    for msg in (durable, long_id, annotated, no_id, by_uuid, by_number,
                *_messages_of_every_shape()):
        data = bytes(msg.encode())
        assert message_id_of(data) == (None if msg.id is None else str(msg.id)), msg
    assert message_id_of(written) == "w:0:1"
    # Cut short inside the id: left to the scanner.
    with pytest.raises(_NotAtOnce):
        _message_id_at_once(bytes(durable.encode())[:20])
