"""Property tests for the control-message codec.

(a) Fed any bytes, ``decode_control`` returns a message or raises ``PeerProtocolError``.
(b) Likewise for valid messages with bytes flipped, cut or inserted, and for
    well-formed AMQP messages whose bodies hold arbitrary values.
(c) ``decode_control(encode_control(m)) == m`` for generated messages of every opcode.
"""

from __future__ import annotations

import contextlib

from hypothesis import given, settings
from hypothesis import strategies as st

from router.core.amqp.values import Long, Symbol, ULong, encode
from router.core.routing import (
    ControlMessage,
    Hello,
    LinkState,
    LinkStateRequest,
    LinkStateUpdate,
    MobileAddressRequest,
    MobileAddressUpdate,
    PeerProtocolError,
    RouterAdvertisement,
    control_address,
    decode_control,
    decode_envelope,
    encode_control,
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
IDS = st.text(min_size=1, max_size=12)
KEYS = st.lists(st.text(max_size=10), max_size=5)


def exercise(data: bytes) -> None:
    """Only PeerProtocolError may escape."""
    with contextlib.suppress(PeerProtocolError):
        decode_envelope(data)


def wire(msg: ControlMessage) -> bytes:
    return encode_control(msg, to=control_address(msg.opcode, None), ingress="0/R1",
                          trace=["0/R1", "0/R2"])


hellos = st.builds(Hello, id=IDS, pv=INT64, area=st.text(max_size=3), instance=INT64,
                   seen=st.lists(IDS, max_size=4))
ras = st.builds(RouterAdvertisement, id=IDS, pv=INT64, instance=INT64, ls_seq=INT64,
                mobile_seq=INT64)
lsrs = st.builds(LinkStateRequest, id=IDS, pv=INT64)
lsus = st.builds(
    lambda rid, seq, peers, inst: LinkStateUpdate(
        id=rid, instance=inst, ls_seq=seq, ls=LinkState(id=rid, ls_seq=seq, peers=peers)),
    IDS, INT64, st.dictionaries(IDS, INT64, max_size=4), INT64,
)


@st.composite
def maus(draw: st.DrawFn) -> MobileAddressUpdate:
    absolute = draw(st.booleans())
    keys = draw(KEYS)
    hints = draw(st.lists(INT32, min_size=len(keys), max_size=len(keys)))
    common = {"id": draw(IDS), "pv": draw(INT64), "mobile_seq": draw(INT64), "hints": hints}
    if absolute:
        return MobileAddressUpdate(exist=keys, **common)  # type: ignore[arg-type]
    return MobileAddressUpdate(add=keys, delete=draw(KEYS), **common)  # type: ignore[arg-type]


mars = st.builds(MobileAddressRequest, id=IDS, pv=INT64, have_seq=INT64)
messages = st.one_of(hellos, ras, lsrs, lsus, maus(), mars)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_or_raise_peer_protocol_error(data: bytes) -> None:
    exercise(data)


@settings(max_examples=200, deadline=None)
@given(messages, st.data())
def test_damaged_messages_decode_or_raise_peer_protocol_error(
    msg: ControlMessage, data: st.DataObject
) -> None:
    raw = bytearray(wire(msg))
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        pos = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip":
            raw[pos] = data.draw(st.integers(min_value=0, max_value=255))
        elif action == "cut":
            del raw[pos:]
            if not raw:
                break
        else:
            raw[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
    exercise(bytes(raw))


amqp_values = st.recursive(
    st.none() | st.booleans() | INT64 | st.floats(allow_nan=False) | st.text(max_size=5)
    | st.binary(max_size=5) | st.builds(Symbol, st.text(alphabet="abcdefghijklmnopqrstuvwxyz_",
                                                         max_size=8))
    | st.builds(ULong, st.integers(min_value=0, max_value=2**64 - 1)),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(["id", "pv", "seen", "ls", "peers", "add", "del",
                                       "exist", "hints", "ls_seq", "mobile_seq", "have_seq",
                                       "instance", "area"]).map(Symbol) | st.text(max_size=3),
                      children, max_size=6),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(["HELLO", "RA", "LSU", "LSR", "MAU", "MAR"]), amqp_values,
       st.booleans())
def test_arbitrary_bodies_decode_or_raise_peer_protocol_error(
    opcode: str, body: object, symbol_keys: bool
) -> None:
    key = Symbol("opcode") if symbol_keys else "opcode"
    data = (b"\x00\x53\x74" + encode({key: opcode}) + b"\x00\x53\x77" + encode(body))
    exercise(data)


@settings(max_examples=300, deadline=None)
@given(messages)
def test_encode_then_decode_gives_the_message_back(msg: ControlMessage) -> None:
    assert decode_control(wire(msg)) == msg


def test_long_fields_survive_the_python_engine_int_rule() -> None:
    msg = RouterAdvertisement(id="R", instance=2**40, ls_seq=-(2**63), mobile_seq=Long(3))
    assert decode_control(wire(msg)) == msg
