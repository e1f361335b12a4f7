"""Whole AMQP 1.0 messages as their sections (AMQP 1.0 part 3.2), for the control plane.

Owns the section descriptor codes, ``encode_section`` and ``split_sections``.
Must not interpret what a section holds (control messages and management
requests do that) nor be used on the per-message data path.
"""

from __future__ import annotations

from typing import Final

from router.core.amqp.errors import PeerProtocolError
from router.core.amqp.types import Described
from router.core.amqp.values import EncodingStyle, decode, encode

__all__ = [
    "APPLICATION_PROPERTIES",
    "DATA",
    "DELIVERY_ANNOTATIONS",
    "FOOTER",
    "HEADER",
    "MESSAGE_ANNOTATIONS",
    "PROPERTIES",
    "SEQUENCE",
    "VALUE",
    "encode_section",
    "split_sections",
]

HEADER: Final = 0x70
DELIVERY_ANNOTATIONS: Final = 0x71
MESSAGE_ANNOTATIONS: Final = 0x72
PROPERTIES: Final = 0x73
APPLICATION_PROPERTIES: Final = 0x74
DATA: Final = 0x75
SEQUENCE: Final = 0x76
VALUE: Final = 0x77
FOOTER: Final = 0x78

_SECTION_NAMES: Final = {
    "amqp:header:list": HEADER,
    "amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    "amqp:message-annotations:map": MESSAGE_ANNOTATIONS,
    "amqp:properties:list": PROPERTIES,
    "amqp:application-properties:map": APPLICATION_PROPERTIES,
    "amqp:data:binary": DATA,
    "amqp:amqp-sequence:list": SEQUENCE,
    "amqp:amqp-value:*": VALUE,
    "amqp:footer:map": FOOTER,
}


def encode_section(code: int, value: object, style: EncodingStyle) -> bytes:
    """One section: the small-ulong descriptor ``code`` and its encoded value."""
    return b"\x00\x53" + bytes((code,)) + encode(value, style)


def _section_code(descriptor: object, at: int, what: str) -> int:
    if isinstance(descriptor, int) and not isinstance(descriptor, bool):
        if HEADER <= descriptor <= FOOTER:
            return int(descriptor)
    elif isinstance(descriptor, str) and descriptor in _SECTION_NAMES:
        return _SECTION_NAMES[descriptor]
    raise PeerProtocolError(f"{what}: unknown section descriptor at offset {at}")


def split_sections(data: bytes, what: str = "message") -> dict[int, object]:
    """The sections of an encoded message by descriptor code, values decoded.

    A body of several ``data`` or ``amqp-sequence`` sections is refused
    (the control plane never sends one).

    Args:
        data: the encoded message.
        what: what the message is, to open error messages ("control message").

    Raises:
        PeerProtocolError: truncated or invalid AMQP, something that is not a
            section, an unknown descriptor or a repeated section.
    """
    sections: dict[int, object] = {}
    pos = 0
    while pos < len(data):
        at = pos
        value, pos = decode(data, pos)
        if not isinstance(value, Described):
            raise PeerProtocolError(f"{what}: expected a section at offset {at}")
        code = _section_code(value.descriptor, at, what)
        if code in sections:
            raise PeerProtocolError(f"{what}: repeated section 0x{code:02x} at offset {at}")
        sections[code] = value.value
    return sections
