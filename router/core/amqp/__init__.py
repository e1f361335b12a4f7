"""AMQP 1.0 encodings: the control plane's generic codec of values, their
types and message sections (exported here), and the data plane's byte-level
one (``router.core.amqp.wire``).

The control plane's codec is shared by the routing protocol's control
messages and the management agent; the per-message path does not use it,
only ``wire``'s zero-copy reading, through ``router.core.message``.
"""

from router.core.amqp.errors import PeerProtocolError
from router.core.amqp.sections import (
    APPLICATION_PROPERTIES,
    DATA,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    VALUE,
    encode_section,
    split_sections,
)
from router.core.amqp.types import (
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
    type_name,
)
from router.core.amqp.values import COMPACT, QD_C, QD_PYTHON, EncodingStyle, decode, encode

__all__ = [
    "APPLICATION_PROPERTIES",
    "COMPACT",
    "DATA",
    "HEADER",
    "MESSAGE_ANNOTATIONS",
    "PROPERTIES",
    "QD_C",
    "QD_PYTHON",
    "VALUE",
    "Array",
    "Byte",
    "Described",
    "EncodingStyle",
    "Float",
    "Int",
    "Long",
    "Opaque",
    "PeerProtocolError",
    "Short",
    "Symbol",
    "UByte",
    "UInt",
    "ULong",
    "UShort",
    "decode",
    "encode",
    "encode_section",
    "split_sections",
    "type_name",
]
