"""DataFrame rows to AMQP messages and back.

Writing: each row is one message. Its ``body`` column is the body (a string
is an AMQP string, binary is a data section, a struct or map is an AMQP map,
an array an AMQP list); ``subject``, ``message_id``, ``priority`` and ``to``
fill the message's fields, ``properties`` the others of its properties
section (keys such as ``content_type`` or ``correlation-id``) and
``application_properties`` its application properties.

Reading: each message is one row of :data:`READ_SCHEMA`. ``body`` is bytes:
a data section as it came, a string in UTF-8, any other value as JSON.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from proton import Message, symbol, timestamp

from spark.errors import AmqpSchemaError
from spark.scan import Unsupported, scan

READ_SCHEMA = ("body binary, properties map<string,string>, "
               "application_properties map<string,string>, "
               "annotations map<string,string>, address string, received_at timestamp")

WRITE_COLUMNS = ("body", "subject", "properties", "application_properties", "message_id",
                 "priority", "to")

# Keys of the ``properties`` column and the proton Message attribute each sets.
_PROPERTY_FIELDS = {
    "message_id": "id", "user_id": "user_id", "to": "address", "subject": "subject",
    "reply_to": "reply_to", "correlation_id": "correlation_id",
    "content_type": "content_type", "content_encoding": "content_encoding",
    "absolute_expiry_time": "expiry_time", "creation_time": "creation_time",
    "group_id": "group_id", "group_sequence": "group_sequence",
    "reply_to_group_id": "reply_to_group_id",
}
_TIME_FIELDS = ("absolute_expiry_time", "creation_time")
# Left out when zero, as proton's Message reads an absent one as zero.
_NUMBERED_FIELDS = ("absolute_expiry_time", "creation_time", "group_sequence")
_SYMBOL_FIELDS = ("content_type", "content_encoding")
_INT_FIELDS = ("group_sequence",)


def check_write_columns(names: Iterable[str]) -> None:
    """Refuse a DataFrame whose columns are not message fields, naming them."""
    names = list(names)
    unknown = [n for n in names if n not in WRITE_COLUMNS]
    if unknown:
        raise AmqpSchemaError(
            f"column(s) {', '.join(map(repr, unknown))} are not message fields; the amqp "
            f"data source writes the columns {', '.join(WRITE_COLUMNS)}")
    if "body" not in names:
        raise AmqpSchemaError("the DataFrame has no 'body' column: each row's body is "
                              "the message body")


def _plain(value: Any) -> Any:
    """A Spark value as an AMQP-encodable Python value (structs become maps)."""
    if value is None or isinstance(value, str | bool | int | float | bytes):
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    as_dict = getattr(value, "asDict", None)
    if as_dict is not None:  # a Row (struct)
        return {k: _plain(v) for k, v in as_dict(recursive=False).items()}
    if isinstance(value, Mapping):
        return {(k if isinstance(k, str) else str(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.astimezone()
        return timestamp(int(value.timestamp() * 1000))
    if isinstance(value, dt.date | Decimal):
        return str(value)
    raise AmqpSchemaError(f"cannot send a value of type {type(value).__name__} in a message")


def _field_key(key: str) -> str:
    return key.replace("-", "_").lower()


def message_of(row: Mapping[str, Any], default_id: str, address: str | None,
               anonymous: bool) -> Message:
    """The message for one row; ``default_id`` unless the row has a message_id."""
    body = row.get("body")
    msg = Message(body=_plain(body))
    if isinstance(body, bytes | bytearray):
        msg.inferred = True  # a data section, not an AMQP binary value
    props = row.get("properties")
    if props:
        for key, value in props.items():
            if value is None:
                continue
            field = _PROPERTY_FIELDS.get(_field_key(key))
            if field is None:
                raise AmqpSchemaError(
                    f"properties key {key!r} is not a field of the AMQP properties section; "
                    f"use one of {', '.join(sorted(_PROPERTY_FIELDS))}, or put it in "
                    "application_properties")
            if _field_key(key) in _TIME_FIELDS:
                value = _timestamp_s(value)
            elif _field_key(key) in _INT_FIELDS:
                value = int(value)
            elif field == "user_id":
                value = value.encode() if isinstance(value, str) else value
            setattr(msg, field, value)
    if row.get("subject") is not None:
        msg.subject = row["subject"]
    app = row.get("application_properties")
    if app:
        msg.properties = {str(k): _plain(v) for k, v in app.items()}
    if row.get("priority") is not None:
        msg.priority = int(row["priority"])
    message_id = row.get("message_id")
    msg.id = message_id if message_id is not None else (msg.id or default_id)
    to = row.get("to") or address
    if anonymous:
        if not to:
            raise AmqpSchemaError(f"message {msg.id}: its 'to' is empty and no option "
                                  "'address' was given")
        msg.address = to
    return msg


# The plain row (a text or binary body, and at most a message id, a subject
# and a ``to``) is encoded here directly: proton's Message costs about 12 us
# a row to build and encode (docs/spark.md#where-the-time-goes). AMQP 1.0
# part 3, section 3.2: the properties section (descriptor 0x73, a list whose
# fields are message-id, user-id, to, subject, ...; trailing nulls left
# out), then an amqp-value (0x77) for text or a data section (0x75) for
# binary; part 1, section 1.6: the encodings of list, string and binary.
_PLAIN_COLUMNS = frozenset({"body", "message_id", "subject", "to"})
_PROPERTIES = b"\x00\x53\x73"
_AMQP_VALUE = b"\x00\x53\x77"
_DATA = b"\x00\x53\x75"
_NULL = b"\x40"


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    n = len(raw)
    return (b"\xa1" + n.to_bytes(1, "big") if n < 256 else b"\xb1" + n.to_bytes(4, "big")) + raw


def _binary(raw: bytes) -> bytes:
    n = len(raw)
    return (b"\xa0" + n.to_bytes(1, "big") if n < 256 else b"\xb0" + n.to_bytes(4, "big")) + raw


def _list(items: list[bytes]) -> bytes:
    payload = b"".join(items)
    count = len(items)
    if len(payload) + 1 < 256 and count < 256:
        return b"\xc0" + (len(payload) + 1).to_bytes(1, "big") + count.to_bytes(1, "big") + payload
    return b"\xd0" + (len(payload) + 4).to_bytes(4, "big") + count.to_bytes(4, "big") + payload


def encoded_of(row: Mapping[str, Any], default_id: str, address: str | None,
               anonymous: bool) -> tuple[bytes, Any]:
    """The encoded message for one row and its message id: the same message
    :func:`message_of` makes, encoded directly when the row is plain."""
    body = row.get("body")
    message_id = row.get("message_id")
    subject = row.get("subject")
    plain = (isinstance(body, str | bytes | bytearray) and _PLAIN_COLUMNS.issuperset(row)
             and (message_id is None or isinstance(message_id, str))
             and (subject is None or isinstance(subject, str)))
    if not plain or not isinstance(body, str | bytes | bytearray):
        msg = message_of(row, default_id, address, anonymous)
        return msg.encode(), msg.id
    msg_id = default_id if message_id is None else message_id
    to = (row.get("to") or address) if anonymous else None
    if anonymous and not to:
        raise AmqpSchemaError(f"message {msg_id}: its 'to' is empty and no option "
                              "'address' was given")
    fields = [_string(msg_id), _NULL, _string(to) if to else _NULL,
              _string(subject) if subject is not None else _NULL]
    while fields[-1] is _NULL:
        fields.pop()
    section = (_AMQP_VALUE + _string(body) if isinstance(body, str)
               else _DATA + _binary(bytes(body)))
    return _PROPERTIES + _list(fields) + section, msg_id


def _timestamp_s(value: Any) -> float:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    try:
        return float(value)
    except (TypeError, ValueError):
        return dt.datetime.fromisoformat(str(value)).timestamp()


# ----------------------------------------------------------------------------
# Reading


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, uuid.UUID | Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, symbol):
        return str(value)
    return value


def body_bytes(body: Any) -> bytes | None:
    """A message body as the bytes of the ``body`` column."""
    if body is None:
        return None
    if isinstance(body, bytes):
        return body
    if isinstance(body, memoryview | bytearray):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(_jsonable(body), default=_json_default,
                      separators=(",", ":")).encode("utf-8")


def _text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, dict | list):
        return json.dumps(_jsonable(value), default=_json_default)
    if isinstance(value, bool):
        return str(value)
    # proton's typed numbers (int32, ulong, float32, timestamp ...) as plain numbers
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return float.__repr__(value)
    return str(value)


def _properties(msg: Message) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, field in _PROPERTY_FIELDS.items():
        value = getattr(msg, field)
        if value is None or value == "" or value == b"" or (
                field in ("expiry_time", "creation_time", "group_sequence") and not value):
            continue
        if field in _SYMBOL_FIELDS and value == "None":
            continue  # proton reads an absent symbol field as symbol('None')
        if key in _TIME_FIELDS:
            out[key] = dt.datetime.fromtimestamp(float(value), dt.UTC).isoformat()
        else:
            out[key] = _text(value)
    return out


def _string_map(values: Mapping[Any, Any] | None) -> dict[str, str]:
    if not values:
        return {}
    return {_text(k): _text(v) for k, v in values.items() if v is not None}


Row = tuple[bytes | None, dict[str, str], dict[str, str], dict[str, str], str | None,
            dt.datetime]


def row_of(data: bytes, address: str | None, received_at_s: float) -> Row:
    """The row of :data:`READ_SCHEMA` for one encoded message: read directly
    (``spark.scan``) where it can be, else through proton's Message."""
    return (*_fields_of(data, address), dt.datetime.fromtimestamp(received_at_s, dt.UTC))


Fields = tuple[bytes | None, dict[str, str], dict[str, str], dict[str, str], str | None]


def _fields_of(data: bytes, address: str | None) -> Fields:
    """A row's columns but ``received_at``."""
    try:
        scanned = scan(data)
    except Unsupported:
        return _fields_by_proton(data, address)
    fields = scanned.properties
    properties: dict[str, str] = {}
    for index, key in enumerate(_PROPERTY_FIELDS):
        if index >= len(fields):
            break
        value = fields[index]
        if value is None or value == "" or value == b"" or (
                key in _NUMBERED_FIELDS and not value):
            continue
        if key in _SYMBOL_FIELDS and value == "None":
            continue  # as proton's path, which cannot tell it from an absent field
        if key in _TIME_FIELDS:
            properties[key] = dt.datetime.fromtimestamp(value / 1000.0, dt.UTC).isoformat()
        else:
            properties[key] = _text(value)
    to = fields[2] if len(fields) > 2 else None
    return (scanned.body, properties, _string_map(scanned.application_properties),
            _string_map(scanned.annotations), to or address)


def _fields_by_proton(data: bytes, address: str | None) -> Fields:
    msg = Message()
    msg.decode(data)
    return (body_bytes(msg.body), _properties(msg), _string_map(msg.properties),
            _string_map(msg.annotations), msg.address or address)


def message_id_of(data: bytes) -> str | None:
    """The message-id of an encoded message as text, or None when it has none."""
    try:
        return _message_id_at_once(data)
    except (_NotAtOnce, IndexError, UnicodeDecodeError):
        pass
    try:
        fields = scan(data).properties
        message_id = fields[0] if fields else None
    except Unsupported:
        msg = Message()
        msg.decode(data)
        message_id = msg.id
    return None if message_id is None else _text(message_id)



# A message that is one data section of fewer than 256 bytes, after at
# most an empty header and an empty properties section (as proton encodes a
# message that sets nothing else), is read without a scan: its row is its
# body and the link's address. AMQP 1.0 part 3, sections 3.2.1, 3.2.4 and
# 3.2.6; part 1, section 1.6: list0 (0x45) and vbin8 (0xa0).
_EMPTY_HEADER = b"\x00\x53\x70\x45"
_EMPTY_PROPERTIES = b"\x00\x53\x73\x45"
_BARE_DATA = b"\x00\x53\x75\xa0"


class _NotAtOnce(Exception):
    pass


_SECTION = b"\x00\x53"
_LIST_HEADS = {0x45: 0, 0xc0: 2, 0xd0: 8}  # list0, list8, list32: size and count bytes


def _message_id_at_once(data: bytes) -> str | None:
    """The message-id where it is a string or absent and comes early: after
    at most a header, the first field of the properties section (AMQP 1.0
    part 3, sections 3.2 and 3.2.4; the sections come in their order, so a
    body section first means there is no properties section). Raises
    :class:`_NotAtOnce` for any other message, which :func:`scan` reads."""
    at = 0
    if data.startswith(b"\x00\x53\x70"):
        code = data[3]
        if code == 0x45:
            at = 4
        elif code == 0xc0:
            at = 5 + data[4]
        else:
            raise _NotAtOnce
    if not data.startswith(_SECTION, at):
        raise _NotAtOnce
    section = data[at + 2]
    if 0x74 <= section <= 0x78:
        return None
    if section != 0x73:
        raise _NotAtOnce
    head = _LIST_HEADS.get(data[at + 3])
    if head is None:
        raise _NotAtOnce
    if head == 0 or (data[at + 5] if head == 2 else int.from_bytes(data[at + 8:at + 12])) == 0:
        return None
    first = at + 4 + head
    code = data[first]
    if code == 0x40:
        return None
    if code == 0xa1:
        size = data[first + 1]
        start = first + 2
    elif code == 0xb1:
        size = int.from_bytes(data[first + 1:first + 5])
        start = first + 5
    else:
        raise _NotAtOnce
    if start + size > len(data):
        raise _NotAtOnce
    return data[start:start + size].decode("utf-8")


def record_batch_of(messages: Iterable[tuple[bytes, str | None, float]]) -> Any:
    """Encoded messages (with the address each came from and when, in
    seconds) as one Arrow record batch of :data:`READ_SCHEMA`, the rows
    :func:`row_of` makes, built column by column: Spark takes the batch
    whole instead of a row at a time, and no row is made as Python objects
    on the way (docs/spark.md#where-the-time-goes)."""
    import pyarrow as pa  # the spark extra's; only where Spark runs
    import pyarrow.compute as pc

    bodies: list[bytes | None] = []
    addresses: list[str | None] = []
    times: list[float] = []
    maps = (_MapColumn(), _MapColumn(), _MapColumn())
    for data, address, received_at_s in messages:
        times.append(received_at_s)
        at = 4 if data.startswith(_EMPTY_HEADER) else 0
        if data.startswith(_EMPTY_PROPERTIES, at):
            at += 4
        if data.startswith(_BARE_DATA, at) and len(data) == at + 5 + data[at + 4]:
            bodies.append(data[at + 5:])
            addresses.append(address)
            for column in maps:
                column.offsets.append(len(column.keys))
            continue
        body, properties, application, annotations, to = _fields_of(data, address)
        bodies.append(body)
        addresses.append(to)
        for column, values in zip(maps, (properties, application, annotations), strict=True):
            column.add(values)
    micros = pc.round(pc.multiply(pa.array(times, pa.float64()), 1e6)).cast(pa.int64())
    return pa.RecordBatch.from_arrays(
        [pa.array(bodies, pa.binary()), *(column.array() for column in maps),
         pa.array(addresses, pa.string()), micros.cast(pa.timestamp("us", tz="UTC"))],
        names=["body", "properties", "application_properties", "annotations", "address",
               "received_at"])


class _MapColumn:
    """A column of string maps as Arrow builds one: offsets, keys and values.
    Arrow converts a list of dicts at about 2.5 us a row when they are
    empty, 35 times this (docs/spark.md#where-the-time-goes)."""

    __slots__ = ("keys", "offsets", "values")

    def __init__(self) -> None:
        self.offsets = [0]
        self.keys: list[str] = []
        self.values: list[str] = []

    def add(self, values: dict[str, str]) -> None:
        if values:
            self.keys.extend(values)
            self.values.extend(values.values())
        self.offsets.append(len(self.keys))

    def array(self) -> Any:
        import pyarrow as pa

        return pa.MapArray.from_arrays(pa.array(self.offsets, pa.int32()),
                                       pa.array(self.keys, pa.string()),
                                       pa.array(self.values, pa.string()))
