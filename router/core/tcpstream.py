"""A TCP connection carried across routers as a pair of streamed messages:
the rules of qdrouterd 1.18's format that do not touch a socket
(docs/tcp.md#across-the-network).

Owns the connection id a stream's ``subject`` carries and the read window:
how far the side reading a socket may run ahead of what the far side has
written out to its own socket, as the far side reports it with ``received``
delivery states (AMQP 1.0 section 3.4.1, ``section-offset`` = bytes
written).  Pure: the adapter reads and writes, and tells the window.
"""

from __future__ import annotations

import struct
from typing import Final

import attrs

from router.core.amqp.errors import PeerProtocolError
from router.core.amqp.values import decode
from router.core.amqp.wire import (
    MessageFormatError,
    encode_int,
    encode_ma_section,
    encode_string,
    encode_symbol,
    read_string,
    skip,
)

__all__ = [
    "STREAM_MARK",
    "WINDOW_BYTES",
    "ReadWindow",
    "StreamFormatError",
    "StreamHead",
    "StreamReader",
    "connection_id",
    "data_head",
    "stream_head",
]

#: The most bytes read from a socket and not yet reported written out at the
#: far end (qdrouterd 1.18: 121,635 x 6 x 2).
WINDOW_BYTES: Final = 121_635 * 6 * 2


#: qdrouterd's streaming marker, a router key of message annotations: a
#: router forwards a message that carries it as soon as its first frame is in,
#: since a carried connection's bytes must not wait for more to come.
STREAM_MARK: Final = b"x-opt-qd.stream"
_MARK_ENTRY: Final = encode_symbol(STREAM_MARK.decode()) + encode_int(1)
#: A stream's sections before its first body bytes may take up this much.
MAX_HEAD_BYTES: Final = 65536
_DATA_32: Final = b"\x00\x53\x75\xb0"
_NO_END: Final = 1 << 62


class StreamFormatError(ValueError):
    """A carried stream's message is not one (a body that is not ``data``
    sections, or sections before the body beyond ``MAX_HEAD_BYTES``)."""


@attrs.frozen
class StreamHead:
    """The properties a carried stream's message names (None: absent)."""

    to: str | None
    subject: str | None
    reply_to: str | None


def stream_head(to: str, subject: str, reply_to: str | None = None) -> bytes:
    """The sections a carried stream's message starts with: message
    annotations with the streaming marker, then properties with
    ``message-id`` and ``user-id`` null, ``to``, ``subject`` and, on the
    client's side, ``reply-to`` (AMQP 1.0 section 3.2.4)."""
    fields = [b"\x40", b"\x40", encode_string(to), encode_string(subject)]
    if reply_to is not None:
        fields.append(encode_string(reply_to))
    items = b"".join(fields)
    size = len(items) + 4
    properties = b"\x00\x53\x73\xd0" + size.to_bytes(4, "big") + len(fields).to_bytes(4, "big")
    return encode_ma_section(len(_MARK_ENTRY), 2) + _MARK_ENTRY + properties + items


def data_head(count: int) -> bytes:
    """The start of a ``data`` body section of ``count`` bytes (AMQP 1.0
    section 3.2.6), which the bytes themselves follow."""
    return _DATA_32 + count.to_bytes(4, "big")


class StreamReader:
    """The bytes a carried stream's message holds, as its transfers arrive.

    ``feed`` takes each part received and returns the body bytes in it,
    the ``data`` sections' contents, however the sections were split across
    parts; ``head`` is set once the properties section was read (the
    sections before the body are read whole; a footer is passed over).

    Raises (from ``feed``):
        StreamFormatError: a body that is not ``data``, or a head too long.
    """

    __slots__ = ("_left", "_pending", "head", "in_body")

    def __init__(self) -> None:
        self._pending = bytearray()
        #: Bytes of the current ``data`` section still to come.
        self._left = 0
        self.head: StreamHead | None = None
        self.in_body = False

    def feed(self, part: bytes | bytearray | memoryview) -> list[bytes | memoryview]:
        out: list[bytes | memoryview] = []
        view = memoryview(part)
        pos, n = 0, len(view)
        if self._left and not self._pending:
            # The common case: a part within one data section, passed on uncopied.
            take = min(self._left, n)
            out.append(view[:take])
            self._left -= take
            pos = take
            if pos == n:
                return out
        pending = self._pending
        pending += view[pos:]
        while pending:
            if self._left:
                take = min(self._left, len(pending))
                out.append(bytes(pending[:take]))
                del pending[:take]
                self._left -= take
                continue
            used = self._section(pending)
            if used is None:
                if len(pending) > MAX_HEAD_BYTES:
                    raise StreamFormatError(
                        f"more than {MAX_HEAD_BYTES} bytes without a whole section")
                break
            del pending[:used]
        return out

    def _section(self, p: bytearray) -> int | None:
        """Read the section at the start of ``p``: the bytes it used (a data
        section's header only, its contents then count in ``_left``), or
        None when it is not all there yet."""
        n = len(p)
        if n < 3:
            return None
        if p[0] != 0:
            raise StreamFormatError(f"expected a section, got format code 0x{p[0]:02x}")
        kind = p[1]
        if kind == 0x53:
            code, v = p[2], 3
        elif kind == 0x80:
            if n < 10:
                return None
            number = int.from_bytes(p[2:10], "big")
            code, v = (number if number <= 0x78 else -1), 10
        else:
            try:
                v = skip(p, 1, _NO_END)
            except (IndexError, struct.error, MessageFormatError):
                if n < 6:
                    return None
                raise StreamFormatError("a section descriptor that is not one") from None
            if v > n:
                return None
            name = read_string(p, 1, v)
            code = _SECTION_NAMES.get(name, -1) if name is not None else -1
        if code == 0x75:
            if v + 1 > n:
                return None
            constructor = p[v]
            if constructor == 0xA0:
                if v + 2 > n:
                    return None
                self._left = p[v + 1]
                self.in_body = True
                return v + 2
            if constructor == 0xB0:
                if v + 5 > n:
                    return None
                self._left = int.from_bytes(p[v + 1:v + 5], "big")
                self.in_body = True
                return v + 5
            raise StreamFormatError(f"a data section of format code 0x{constructor:02x}")
        if code in (0x76, 0x77):
            raise StreamFormatError("the body of a carried stream is data sections only")
        if code < 0x70:
            raise StreamFormatError("an unknown section")
        try:
            end = skip(p, v, _NO_END)
        except (IndexError, struct.error):
            return None
        except MessageFormatError as exc:
            raise StreamFormatError(str(exc)) from None
        if end > n:
            return None
        if code == 0x73:
            self.head = _properties(bytes(p[v:end]))
        return end


_SECTION_NAMES: Final = {
    "amqp:header:list": 0x70,
    "amqp:delivery-annotations:map": 0x71,
    "amqp:message-annotations:map": 0x72,
    "amqp:properties:list": 0x73,
    "amqp:application-properties:map": 0x74,
    "amqp:data:binary": 0x75,
    "amqp:amqp-sequence:list": 0x76,
    "amqp:amqp-value:*": 0x77,
    "amqp:footer:map": 0x78,
}


def _properties(encoded: bytes) -> StreamHead:
    try:
        fields, _end = decode(encoded)
    except PeerProtocolError as exc:
        raise StreamFormatError(f"properties: {exc}") from None
    if not isinstance(fields, list | tuple):
        raise StreamFormatError("properties is not a list")

    def text(i: int) -> str | None:
        value = fields[i] if i < len(fields) else None
        return value if isinstance(value, str) else None

    return StreamHead(to=text(2), subject=text(3), reply_to=text(4))


def connection_id(client_host_port: str, site_id: str | None) -> str:
    """A carried connection's id: the client's ``host:port``, then
    ``@siteId`` where the listener has one."""
    return f"{client_host_port}@{site_id}" if site_id else client_host_port


@attrs.define(slots=True)
class ReadWindow:
    """The read side of one stream.

    ``read`` counts the bytes read from the socket into the stream,
    ``written`` the far side's last report of bytes it wrote out.  Once the
    stream's delivery is settled or has a terminal outcome, the far side
    reports no more and the window no longer applies (``open_ended``).
    """

    read: int = 0
    written: int = 0
    open_ended: bool = False

    @property
    def room(self) -> int | None:
        """How many bytes may be read now (None: no limit)."""
        if self.open_ended:
            return None
        return max(0, WINDOW_BYTES - (self.read - self.written))

    @property
    def full(self) -> bool:
        return not self.open_ended and self.read - self.written >= WINDOW_BYTES

    def took(self, count: int) -> None:
        """``count`` bytes were read into the stream."""
        self.read += count

    def reported(self, section_offset: int) -> bool:
        """The far side reports ``section_offset`` bytes written; whether
        the window was full and is not now (reading may go on).

        A report older than one already taken (states can cross) or beyond
        what was read (a confused peer) changes nothing past its bounds.
        """
        was_full = self.full
        if section_offset > self.written:
            self.written = min(section_offset, self.read)
        return was_full and not self.full

    def ended(self) -> bool:
        """The delivery was settled or given a terminal outcome; whether
        reading was held and may go on."""
        was_full = self.full
        self.open_ended = True
        return was_full
