"""Message logging: the fields a listener or connector names in
``messageLoggingComponents`` (docs/operations.md#message-logging).

Owns the trace line written for each message a connection with message
logging receives or sends, on module MESSAGE, in qdrouterd's form::

    [C3]: Received Message{to="q", subject="s", app-properties={"k"=1}} on link 'name' (q -> )

Only the links of such connections call it (``InLink.logged``,
``OutLink.logged``: one attribute read on the per-message path of every
other link), and it reads the message only while MESSAGE's trace level is
on.  The properties and application-properties sections are decoded with
proton; the body never is.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from proton import Array, Data, DataException, Described, symbol, timestamp

from router import logs
from router.adapter.pn import lib, to_str
from router.core import InLink, OutLink

log = logging.getLogger(__name__)

#: The properties fields (AMQP 1.0 section 3.2.4), in their order.
PROPERTIES = ("message-id", "user-id", "to", "subject", "reply-to", "correlation-id",
              "content-type", "content-encoding", "absolute-expiry-time", "creation-time",
              "group-id", "group-sequence", "reply-to-group-id")
APP_PROPERTIES = "app-properties"
#: Every field, in the order a line shows them.
FIELDS = (*PROPERTIES, APP_PROPERTIES)
_TIMES = frozenset({"absolute-expiry-time", "creation-time"})

# Section descriptors (AMQP 1.0 section 3.2).
_PROPERTIES_CODE = 0x73
_APP_PROPERTIES_CODE = 0x74
_BODY_CODES = frozenset({0x75, 0x76, 0x77, 0x78})


def log_message(link: InLink | OutLink, data: bytes, sent: bool) -> None:
    """Log ``data``, a message ``link`` just sent or received, if MESSAGE traces."""
    if not logs.enabled("MESSAGE", logs.TRACE):
        return
    lptr = link.handle
    source = to_str(lib.pn_terminus_get_address(lib.pn_link_source(lptr))) or ""
    target = to_str(lib.pn_terminus_get_address(lib.pn_link_target(lptr))) or ""
    log.log(logs.TRACE, "[C%d]: %s %s on link '%s' (%s -> %s)", link.conn.conn_id,
            "Sent" if sent else "Received", describe(data, link.conn.logged_fields),
            link.name, source, target)


def describe(data: bytes, fields: tuple[str, ...]) -> str:
    """``Message{name=value, ...}``: the ``fields`` the message has, in the
    order of ``FIELDS``; ``Message{}`` when none (or when it cannot be read)."""
    properties, app_properties = _sections(data)
    parts = []
    for index, name in enumerate(PROPERTIES):
        if name in fields and index < len(properties) and properties[index] is not None:
            value = properties[index]
            parts.append(f"{name}={_time(value) if name in _TIMES else _show(value)}")
    if APP_PROPERTIES in fields and app_properties is not None:
        parts.append(f"{APP_PROPERTIES}={_show(app_properties)}")
    return "Message{" + ", ".join(parts) + "}"


def _sections(data: bytes) -> tuple[list[Any], Any]:
    """The properties fields (a list, empty when absent) and the
    application-properties map (None when absent); decoding stops before
    the body, and at what cannot be read."""
    properties: list[Any] = []
    app_properties = None
    pos = 0
    decoder = Data()
    while pos < len(data) and not _is_body(data, pos):
        decoder.clear()
        try:
            pos += decoder.decode(data[pos:])
            section = _owned(decoder.get_object())
        except DataException:
            break
        if not isinstance(section, Described):
            break
        if section.descriptor == _PROPERTIES_CODE and isinstance(section.value, list):
            properties = section.value
        elif section.descriptor == _APP_PROPERTIES_CODE:
            app_properties = section.value
            break
    return properties, app_properties


def _owned(value: Any) -> Any:
    """``value`` with its binaries copied out of the decoder (proton hands
    them out as views of its own buffer)."""
    match value:
        case memoryview():
            return bytes(value)
        case Described():
            return Described(value.descriptor, _owned(value.value))
        case dict():
            return {_owned(k): _owned(v) for k, v in value.items()}
        case list():
            return [_owned(v) for v in value]
        case Array():
            return Array(value.descriptor, value.type, *[_owned(v) for v in value.elements])
        case _:
            return value


def _is_body(data: bytes, pos: int) -> bool:
    """A body section starts at ``pos`` (its descriptor in the small form)."""
    return data[pos:pos + 2] == b"\x00\x53" and len(data) > pos + 2 \
        and data[pos + 2] in _BODY_CODES


def _time(value: Any) -> str:
    if not isinstance(value, int):
        return _show(value)
    when = datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
    return f'"{when:%Y-%m-%d %H:%M:%S}.{value % 1000:03d} +0000"'


def _quote(text: str) -> str:
    return "".join(c if c.isprintable() or c.isspace() else f"\\x{ord(c):02x}" for c in text)


def _show(value: Any) -> str:
    """A value as qdrouterd's message log writes it."""
    match value:
        case None:
            return "null"
        case bool():
            return "true" if value else "false"
        case symbol():
            return f':"{_quote(value)}"'
        case str():
            return f'"{_quote(value)}"'
        case bytes():
            return 'b"' + "".join(chr(b) if 32 <= b < 127 else f"\\x{b:02x}" for b in value) + '"'
        case timestamp():
            return _time(value)
        case int():
            return str(int(value))
        case dict():
            return "{" + ", ".join(f"{_show(k)}={_show(v)}" for k, v in value.items()) + "}"
        case list() | tuple() | Array():
            items = value.elements if isinstance(value, Array) else value
            return "[" + ", ".join(_show(v) for v in items) + "]"
        case _:
            return str(value)


__all__ = ["APP_PROPERTIES", "FIELDS", "PROPERTIES", "describe", "log_message"]
