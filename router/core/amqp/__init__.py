"""The control plane's generic AMQP 1.0 codec: values, their types, and message sections.

Shared by the routing protocol's control messages and the management agent.
The per-message data path does not use it (``router.core.amqp_codec`` is its
zero-copy scanner).
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
