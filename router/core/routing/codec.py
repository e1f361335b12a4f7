"""Control messages to and from complete encoded AMQP 1.0 messages
(docs/networks.md#control-messages).

Owns: ``encode_control`` (the bytes qdrouterd sends: header, router
message-annotations, properties, application-properties, amqp-value body)
and ``decode_control`` / ``decode_envelope``, which accept what any
qdrouterd 1.x or Hop router sends.

Must not: decide anything about routing, hold state, or raise anything but
``PeerProtocolError`` while decoding. Encoding trusts its input (our own
records): a value that cannot be encoded is a bug and raises
``TypeError``/``ValueError``.

Wire facts kept (qdrouterd 1.20 ``python_embedded.c``, ``compose.c``,
``modules/mobile_sync/mobile.c``):

* HELLO/RA/LSU/LSR come from qdrouterd's Python engine: string map keys
  (``opcode`` too), ints as ``int`` (``smallint`` when they fit a byte) or
  ``long`` when they need 64 bits, a six-field properties list (message-id,
  user-id, to, subject, reply-to, correlation-id) and ``list0`` for empty lists.
* MAU/MAR come from its C module: symbol keys (``opcode`` too, its value a
  string), ``long`` pv/mobile_seq/have_seq, ``int`` hints, a three-field
  properties list, and empty lists as list32 with count 0.
* Lists and maps are list32/map32 as ``qd_compose`` writes them; section
  descriptors are small ulongs; message-annotations (``x-opt-qd.ingress``,
  ``x-opt-qd.trace``, symbol keys) sit between header and properties.

Decoding looks keys up by their text whatever their type, takes any integer
width (booleans are not ints), accepts strings or symbols for text and lists
or arrays for lists, treats a missing ``pv`` as 0, a missing ``area`` as
``"0"`` and a missing ``instance`` as 0 (as qdrouterd's ``data.py`` does).
Peer costs are taken as sent, whatever their sign, so that every router
computes routes from the same link states.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, assert_never

import attrs

from router.core.amqp.errors import PeerProtocolError
from router.core.amqp.sections import (
    APPLICATION_PROPERTIES,
    DATA,
    HEADER,
    MESSAGE_ANNOTATIONS,
    PROPERTIES,
    SEQUENCE,
    VALUE,
    encode_section,
    split_sections,
)
from router.core.amqp.values import (
    QD_C,
    QD_PYTHON,
    Array,
    EncodingStyle,
    Int,
    Long,
    Symbol,
    type_name,
)
from router.core.routing.messages import (
    AREA,
    PROTOCOL_VERSION,
    ControlMessage,
    Hello,
    LinkState,
    LinkStateRequest,
    LinkStateUpdate,
    MobileAddressRequest,
    MobileAddressUpdate,
    Opcode,
    RouterAdvertisement,
)

__all__ = ["ControlEnvelope", "decode_control", "decode_envelope", "encode_control"]

INGRESS_KEY: Final = "x-opt-qd.ingress"
TRACE_KEY: Final = "x-opt-qd.trace"

@attrs.frozen(kw_only=True)
class ControlEnvelope:
    """A decoded control message with the parts of its envelope routers use.

    Attributes:
        message: the control message.
        to: ``properties.to``, or None when absent.
        ingress: ``x-opt-qd.ingress`` (``"0/<router-id>"``), or None.
        trace: ``x-opt-qd.trace``, oldest first; empty when absent.
    """

    message: ControlMessage
    to: str | None
    ingress: str | None
    trace: tuple[str, ...]


# --- encoding -----------------------------------------------------------------


def _python_body(
    msg: Hello | RouterAdvertisement | LinkStateUpdate | LinkStateRequest,
) -> dict[object, object]:
    body: dict[object, object] = {"id": msg.id, "pv": msg.pv, "area": msg.area}
    if isinstance(msg, Hello):
        body["instance"] = msg.instance
        body["seen"] = list(msg.seen)
    elif isinstance(msg, RouterAdvertisement):
        body["instance"] = msg.instance
        body["ls_seq"] = msg.ls_seq
        body["mobile_seq"] = msg.mobile_seq
    elif isinstance(msg, LinkStateUpdate):
        body["instance"] = msg.instance
        body["ls_seq"] = msg.ls_seq
        body["ls"] = {
            "id": msg.ls.id,
            "area": msg.ls.area,
            "ls_seq": msg.ls.ls_seq,
            "peers": dict(msg.ls.peers),
        }
    return body


def _c_body(msg: MobileAddressUpdate | MobileAddressRequest) -> dict[object, object]:
    body: dict[object, object] = {
        Symbol("id"): msg.id,
        Symbol("pv"): Long(msg.pv),
        Symbol("area"): msg.area,
    }
    if isinstance(msg, MobileAddressRequest):
        body[Symbol("have_seq")] = Long(msg.have_seq)
        return body
    body[Symbol("mobile_seq")] = Long(msg.mobile_seq)
    hints = [Int(hint) for hint in msg.hints]
    if msg.exist is not None:  # mobile.c's key order, absolute form
        body[Symbol("exist")] = list(msg.exist)
        body[Symbol("hints")] = hints
    else:
        body[Symbol("hints")] = hints
        body[Symbol("add")] = list(msg.add)
        body[Symbol("del")] = list(msg.delete)
    return body


def encode_control(msg: ControlMessage, *, to: str, ingress: str, trace: list[str]) -> bytes:
    """Encode ``msg`` as the complete AMQP message qdrouterd would send.

    Args:
        msg: the control message.
        to: ``properties.to``; see :func:`router.core.routing.messages.control_address`.
        ingress: the ``x-opt-qd.ingress`` value, ``"0/<origin-router-id>"``.
        trace: the ``x-opt-qd.trace`` list (``"0/<router-id>"`` entries,
            oldest first, ending with the sending router).

    Returns:
        The encoded message (header, message-annotations, properties,
        application-properties, amqp-value body).

    Raises:
        ValueError: a field out of range for its wire type (e.g. a hint beyond 32 bits).
    """
    annotations = {Symbol(INGRESS_KEY): ingress, Symbol(TRACE_KEY): list(trace)}
    opcode = msg.opcode.value
    style: EncodingStyle
    body: dict[object, object]
    if isinstance(msg, MobileAddressUpdate | MobileAddressRequest):
        style = QD_C
        properties: list[object] = [None, None, to]
        app_properties: dict[object, object] = {Symbol("opcode"): opcode}
        body = _c_body(msg)
    elif isinstance(msg, Hello | RouterAdvertisement | LinkStateUpdate | LinkStateRequest):
        style = QD_PYTHON
        properties = [None, None, to, None, None, None]
        app_properties = {"opcode": opcode}
        body = _python_body(msg)
    else:
        assert_never(msg)
    return b"".join(
        (
            encode_section(HEADER, [False], style),
            encode_section(MESSAGE_ANNOTATIONS, annotations, QD_C),
            encode_section(PROPERTIES, properties, style),
            encode_section(APPLICATION_PROPERTIES, app_properties, style),
            encode_section(VALUE, body, style),
        )
    )


# --- decoding -----------------------------------------------------------------


def _text(value: object) -> str | None:
    return str(value) if isinstance(value, str) else None


def _opcode(sections: Mapping[int, object]) -> Opcode:
    props = sections.get(APPLICATION_PROPERTIES)
    if not isinstance(props, dict):
        what = "missing" if props is None else f"a {type_name(props)}, not a map"
        raise PeerProtocolError(f"control message: application-properties {what}")
    raw = next((v for k, v in props.items() if isinstance(k, str) and k == "opcode"), None)
    if raw is None:
        raise PeerProtocolError("control message: no 'opcode' application property")
    text = _text(raw)
    if text is None:
        raise PeerProtocolError(f"control message: opcode must be str, got {type_name(raw)}")
    try:
        return Opcode(text)
    except ValueError:
        raise PeerProtocolError(f"control message: unknown opcode {text!r}") from None


class _Fields:
    """Typed access to a control message body, with errors naming the sender."""

    def __init__(self, opcode: Opcode, body: Mapping[object, object]) -> None:
        self.opcode = opcode
        # Keys are matched by text whether they arrived as string or symbol.
        self.fields = {str(k): v for k, v in body.items() if isinstance(k, str)}
        self.router_id: str | None = None
        self.pv = 0

    def error(self, text: str) -> PeerProtocolError:
        if self.router_id is None:
            where = self.opcode.value
        else:
            where = f"{self.opcode.value} from router {self.router_id!r}"
        if self.pv > PROTOCOL_VERSION:
            where += f" (protocol version {self.pv})"
        return PeerProtocolError(
            f"{where}: {text}", router_id=self.router_id, opcode=self.opcode.value
        )

    def get(self, key: str) -> object:
        if key not in self.fields:
            raise self.error(f"field {key!r} is missing")
        return self.fields[key]

    def as_int(self, value: object, name: str) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
        raise self.error(f"field {name!r} must be int, got {type_name(value)}")

    def as_str(self, value: object, name: str) -> str:
        if isinstance(value, str):
            return str(value)
        raise self.error(f"field {name!r} must be str, got {type_name(value)}")

    def as_list(self, value: object, name: str) -> list[object]:
        if isinstance(value, list):
            return value
        if isinstance(value, Array):
            return list(value.items)
        raise self.error(f"field {name!r} must be list, got {type_name(value)}")

    def as_map(self, value: object, name: str) -> dict[object, object]:
        if isinstance(value, dict):
            return value
        raise self.error(f"field {name!r} must be map, got {type_name(value)}")

    def integer(self, key: str, default: int | None = None) -> int:
        if default is not None and key not in self.fields:
            return default
        return self.as_int(self.get(key), key)

    def text(self, key: str, default: str | None = None) -> str:
        if default is not None and key not in self.fields:
            return default
        return self.as_str(self.get(key), key)

    def strings(self, key: str, value: object | None = None) -> tuple[str, ...]:
        items = self.as_list(self.get(key) if value is None else value, key)
        result = []
        for index, item in enumerate(items):
            if not isinstance(item, str):
                raise self.error(f"field {key!r} item {index} must be str, got {type_name(item)}")
            result.append(str(item))
        return tuple(result)

    def ints(self, key: str) -> tuple[int, ...]:
        items = self.as_list(self.get(key), key)
        return tuple(self.as_int(item, f"{key}[{index}]") for index, item in enumerate(items))

    def optional_strings(self, key: str) -> tuple[str, ...] | None:
        return self.strings(key) if key in self.fields else None


def _link_state(f: _Fields) -> LinkState:
    raw = f.as_map(f.get("ls"), "ls")
    inner = {str(k): v for k, v in raw.items() if isinstance(k, str)}

    def need(key: str) -> object:
        if key not in inner:
            raise f.error(f"field 'ls.{key}' is missing")
        return inner[key]

    peers: dict[str, int] = {}
    for key, cost in f.as_map(need("peers"), "ls.peers").items():
        if not isinstance(key, str):
            raise f.error(f"field 'ls.peers' key must be str, got {type_name(key)}")
        peers[str(key)] = f.as_int(cost, f"ls.peers[{key}]")
    area = inner.get("area", AREA)
    return LinkState(
        id=f.as_str(need("id"), "ls.id"),
        area=f.as_str(area, "ls.area"),
        ls_seq=f.as_int(need("ls_seq"), "ls.ls_seq"),
        peers=peers,
    )


def _message(opcode: Opcode, f: _Fields, rid: str) -> ControlMessage:
    if opcode is Opcode.HELLO:
        return Hello(id=rid, pv=f.pv, area=f.text("area", AREA),
                     instance=f.integer("instance", 0), seen=f.strings("seen"))
    if opcode is Opcode.RA:
        return RouterAdvertisement(
            id=rid, pv=f.pv, area=f.text("area", AREA),
            instance=f.integer("instance", 0), ls_seq=f.integer("ls_seq"),
            mobile_seq=f.integer("mobile_seq"),
        )
    if opcode is Opcode.LSR:
        return LinkStateRequest(id=rid, pv=f.pv, area=f.text("area", AREA))
    if opcode is Opcode.LSU:
        return LinkStateUpdate(
            id=rid, pv=f.pv, area=f.text("area", AREA),
            instance=f.integer("instance", 0), ls_seq=f.integer("ls_seq"), ls=_link_state(f),
        )
    if opcode is Opcode.MAR:
        return MobileAddressRequest(id=rid, pv=f.pv, area=f.text("area", AREA),
                                    have_seq=f.integer("have_seq"))
    if opcode is Opcode.MAU:
        exist = f.optional_strings("exist")
        has_add, has_del = "add" in f.fields, "del" in f.fields
        if exist is not None and (has_add or has_del):
            raise f.error("malformed: both 'exist' and 'add'/'del'")
        if exist is None and not (has_add and has_del):
            raise f.error("malformed: neither 'exist' nor both 'add' and 'del'")
        return MobileAddressUpdate(
            id=rid, pv=f.pv, area=f.text("area", AREA),
            mobile_seq=f.integer("mobile_seq"),
            add=f.strings("add") if has_add else (),
            delete=f.strings("del") if has_del else (),
            # mobile.c ignores a hints field that is not a list.
            hints=f.ints("hints") if isinstance(f.fields.get("hints"), list | Array) else (),
            exist=exist,
        )
    assert_never(opcode)


def _annotations(sections: Mapping[int, object]) -> tuple[str | None, tuple[str, ...]]:
    annotations = sections.get(MESSAGE_ANNOTATIONS)
    if annotations is None:
        return None, ()
    if not isinstance(annotations, dict):
        raise PeerProtocolError("control message: message-annotations is not a map")
    ingress = annotations.get(INGRESS_KEY)
    if ingress is not None and not isinstance(ingress, str):
        raise PeerProtocolError(f"control message: {INGRESS_KEY} must be str")
    trace = annotations.get(TRACE_KEY, [])
    if isinstance(trace, Array):
        trace = list(trace.items)
    if not isinstance(trace, list) or not all(isinstance(t, str) for t in trace):
        raise PeerProtocolError(f"control message: {TRACE_KEY} must be a list of str")
    return _text(ingress), tuple(str(t) for t in trace)


def _to(sections: Mapping[int, object]) -> str | None:
    properties = sections.get(PROPERTIES)
    if properties is None:
        return None
    if not isinstance(properties, list):
        raise PeerProtocolError("control message: properties is not a list")
    to = properties[2] if len(properties) > 2 else None
    if to is not None and not isinstance(to, str):
        raise PeerProtocolError(f"control message: properties.to must be str, got {type_name(to)}")
    return _text(to)


def decode_envelope(data: bytes) -> ControlEnvelope:
    """Decode a complete control message, keeping ``to``, ingress and trace.

    Args:
        data: the encoded AMQP message as received.

    Returns:
        The message and its envelope fields.

    Raises:
        PeerProtocolError: the bytes are not a well-formed control message:
            truncated or invalid AMQP, no or unknown ``opcode``, a body that is
            not an amqp-value map, a missing mandatory field or a field of the
            wrong type (e.g. ``LSU from router 'R3': field 'ls_seq' must be
            int, got str``).
    """
    sections = split_sections(bytes(data), "control message")
    opcode = _opcode(sections)
    if VALUE not in sections:
        kind = "data" if DATA in sections else "amqp-sequence" if SEQUENCE in sections else None
        raise PeerProtocolError(
            f"{opcode.value}: body must be an amqp-value" + (f", got {kind}" if kind else "")
        )
    body = sections[VALUE]
    if not isinstance(body, dict):
        raise PeerProtocolError(f"{opcode.value}: body must be a map, got {type_name(body)}")
    fields = _Fields(opcode, body)
    router_id = fields.router_id = fields.text("id")
    fields.pv = fields.integer("pv", 0)
    message = _message(opcode, fields, router_id)
    ingress, trace = _annotations(sections)
    return ControlEnvelope(message=message, to=_to(sections), ingress=ingress, trace=trace)


def decode_control(data: bytes) -> ControlMessage:
    """Decode a complete control message (see :func:`decode_envelope`).

    Raises:
        PeerProtocolError: for anything malformed; never any other exception.
    """
    return decode_envelope(data).message
