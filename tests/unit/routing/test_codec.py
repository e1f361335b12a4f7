"""Control messages on the wire (docs/networks.md#control-messages): encoding facts,
decoding, errors."""

from __future__ import annotations

import pytest
from proton import Message, symbol, ulong

from router.core.amqp.values import (
    QD_C,
    Described,
    Int,
    Long,
    Symbol,
    UByte,
    UInt,
    ULong,
    UShort,
    decode,
    encode,
)
from router.core.routing import (
    HELLO_ADDRESS,
    MA_ALL_ADDRESS,
    TOPO_ALL_ADDRESS,
    ControlMessage,
    Hello,
    LinkState,
    LinkStateRequest,
    LinkStateUpdate,
    MobileAddressRequest,
    MobileAddressUpdate,
    Opcode,
    PeerProtocolError,
    RouterAdvertisement,
    control_address,
    decode_control,
    decode_envelope,
    encode_control,
)

MESSAGES: list[ControlMessage] = [
    Hello(id="R1", instance=1700000000, seen=["R2", "R3"]),
    Hello(id="R1", instance=5),
    RouterAdvertisement(id="R1", instance=5, ls_seq=3, mobile_seq=7),
    RouterAdvertisement(id="R1", instance=5, ls_seq=2**40, mobile_seq=0),
    LinkStateRequest(id="R1"),
    LinkStateUpdate(id="R1", instance=5, ls_seq=4,
                    ls=LinkState(id="R1", ls_seq=4, peers={"R2": 1, "R3": 10})),
    LinkStateUpdate(id="R1", instance=5, ls_seq=0, ls=LinkState(id="R1", ls_seq=0)),
    MobileAddressUpdate(id="R1", mobile_seq=2, add=["M0a", "Cb.c"], delete=["M1x"], hints=[2, 4]),
    MobileAddressUpdate(id="R1", mobile_seq=2, add=[], delete=[]),
    MobileAddressUpdate(id="R1", mobile_seq=9, exist=["M0a", "H.edge1"], hints=[3, 2]),
    MobileAddressUpdate(id="R1", mobile_seq=9, exist=[]),
    MobileAddressRequest(id="R1", have_seq=4),
]


def wire(msg: ControlMessage, trace: list[str] | None = None) -> bytes:
    return encode_control(msg, to=control_address(msg.opcode, "R9"), ingress="0/R1",
                          trace=trace or ["0/R1"])


def sections(data: bytes) -> dict[int, object]:
    """Section code -> value of an encoded message."""
    result = {}
    pos = 0
    while pos < len(data):
        value, pos = decode(data, pos)
        assert isinstance(value, Described)
        assert isinstance(value.descriptor, int)
        result[int(value.descriptor)] = value.value
    return result


def body_of(msg: ControlMessage) -> dict[object, object]:
    body = sections(wire(msg))[0x77]
    assert isinstance(body, dict)
    return body


def build(opcode: object, body: object, *, key: type = str) -> bytes:
    """A control message as another implementation might send it."""
    return b"".join(
        b"\x00\x53" + bytes((code,)) + encode(value)
        for code, value in (
            (0x70, [False]),
            (0x74, {key("opcode"): opcode}),
            (0x77, body),
        )
    )


# --- round trips ----------------------------------------------------------------


@pytest.mark.parametrize("msg", MESSAGES, ids=repr)
def test_every_message_type_round_trips(msg: ControlMessage) -> None:
    envelope = decode_envelope(wire(msg, ["0/R1", "0/R4"]))
    assert envelope.message == msg
    assert envelope.to == control_address(msg.opcode, "R9")
    assert envelope.ingress == "0/R1"
    assert envelope.trace == ("0/R1", "0/R4")


@pytest.mark.parametrize("msg", MESSAGES, ids=repr)
def test_proton_reads_what_we_encode(msg: ControlMessage) -> None:
    message = Message()
    message.decode(wire(msg))
    assert message.durable is False
    assert message.id is None and message.user_id == b""
    assert message.address == control_address(msg.opcode, "R9")
    assert message.properties == {"opcode": msg.opcode.value}
    assert message.annotations == {symbol("x-opt-qd.ingress"): "0/R1",
                                   symbol("x-opt-qd.trace"): ["0/R1"]}
    assert message.body["id"] == "R1"


# --- exact encoding facts -------------------------------------------------------


def test_hello_uses_string_keys_and_32_bit_ints() -> None:
    body = body_of(Hello(id="R1", instance=1700000000, seen=["R2"]))
    assert list(body) == ["id", "pv", "area", "instance", "seen"]
    assert all(type(key) is str for key in body)
    assert type(body["pv"]) is Int and type(body["instance"]) is Int
    assert body["seen"] == ["R2"]


def test_python_engine_ints_become_long_only_when_needed() -> None:
    body = body_of(RouterAdvertisement(id="R1", instance=5, ls_seq=1, mobile_seq=2**33))
    assert type(body["ls_seq"]) is Int
    assert type(body["mobile_seq"]) is Long


def test_lsu_carries_the_link_state_as_a_nested_string_keyed_map() -> None:
    body = body_of(MESSAGES[5])
    assert list(body) == ["id", "pv", "area", "instance", "ls_seq", "ls"]
    assert body["ls"] == {"id": "R1", "area": "0", "ls_seq": 4, "peers": {"R2": 1, "R3": 10}}


def test_python_engine_messages_have_six_properties_and_string_opcode_key() -> None:
    parts = sections(wire(Hello(id="R1")))
    assert parts[0x70] == [False]
    assert parts[0x73] == [None, None, "amqp:/_local/qdhello", None, None, None]
    app = parts[0x74]
    assert isinstance(app, dict)
    assert [type(k) for k in app] == [str]


def test_mau_uses_symbol_keys_long_sequences_and_int_hints() -> None:
    body = body_of(MESSAGES[7])
    assert [str(k) for k in body] == ["id", "pv", "area", "mobile_seq", "hints", "add", "del"]
    assert all(type(key) is Symbol for key in body)
    assert type(body["pv"]) is Long and type(body["mobile_seq"]) is Long
    assert [type(h) for h in body["hints"]] == [Int, Int]  # type: ignore[attr-defined]
    assert body["del"] == ["M1x"]


def test_absolute_mau_lists_exist_then_hints() -> None:
    assert [str(k) for k in body_of(MESSAGES[9])] == [
        "id", "pv", "area", "mobile_seq", "exist", "hints"]


def test_mar_has_long_have_seq_and_symbol_opcode_key() -> None:
    parts = sections(wire(MESSAGES[-1]))
    assert parts[0x73] == [None, None, "amqp:/_topo/0/R9/qdrouter.ma"]
    app = parts[0x74]
    assert app == {"opcode": "MAR"}
    assert isinstance(app, dict) and [type(k) for k in app] == [Symbol]
    body = body_of(MESSAGES[-1])
    assert type(body["have_seq"]) is Long


def test_empty_c_lists_are_list32_as_qd_compose_writes_them() -> None:
    data = wire(MobileAddressUpdate(id="R1", mobile_seq=1))
    assert encode(Symbol("del")) + encode([], QD_C) in data


def test_sections_come_in_qdrouterd_order_with_annotations_after_header() -> None:
    assert list(sections(wire(Hello(id="R1")))) == [0x70, 0x72, 0x73, 0x74, 0x77]


@pytest.mark.parametrize(
    ("opcode", "router_id", "address"),
    [
        (Opcode.HELLO, None, HELLO_ADDRESS),
        (Opcode.RA, None, TOPO_ALL_ADDRESS),
        (Opcode.LSR, "B", "amqp:/_topo/0/B/qdrouter"),
        (Opcode.LSU, "B", "amqp:/_topo/0/B/qdrouter"),
        (Opcode.MAU, None, MA_ALL_ADDRESS),
        (Opcode.MAU, "B", "amqp:/_topo/0/B/qdrouter.ma"),
        (Opcode.MAR, "B", "amqp:/_topo/0/B/qdrouter.ma"),
    ],
)
def test_control_addresses_are_qdrouterds(opcode: Opcode, router_id: str | None,
                                          address: str) -> None:
    assert control_address(opcode, router_id) == address
    assert MA_ALL_ADDRESS == "_topo/0/all/qdrouter.ma"


# --- decoding what others send --------------------------------------------------


def test_hello_with_symbol_keys_decodes() -> None:
    body = {Symbol("id"): "R2", Symbol("pv"): Long(1), Symbol("area"): Symbol("0"),
            Symbol("instance"): ULong(9), Symbol("seen"): [Symbol("R1")]}
    assert decode_control(build(Symbol("HELLO"), body, key=Symbol)) == Hello(
        id="R2", instance=9, seen=["R1"])


def test_mau_with_string_keys_decodes() -> None:
    body = {"id": "R2", "pv": 1, "area": "0", "mobile_seq": UByte(3), "add": ["M0q"],
            "del": [], "hints": [UShort(2)]}
    assert decode_control(build("MAU", body)) == MobileAddressUpdate(
        id="R2", mobile_seq=3, add=["M0q"], hints=[2])


@pytest.mark.parametrize("width", [UByte, UShort, UInt, ULong, Int, Long, int])
def test_integers_of_any_width_are_accepted(width: type) -> None:
    body = {"id": "R2", "pv": width(1), "ls_seq": width(200), "mobile_seq": width(0),
            "instance": width(7)}
    msg = decode_control(build("RA", body))
    assert msg == RouterAdvertisement(id="R2", instance=7, ls_seq=200, mobile_seq=0)
    assert type(msg.pv) is int


def test_missing_pv_area_and_instance_take_qdrouterd_defaults() -> None:
    msg = decode_control(build("HELLO", {"id": "R2", "seen": []}))
    assert msg == Hello(id="R2", pv=0, area="0", instance=0)


def test_message_built_by_proton_decodes() -> None:
    message = Message(address="amqp:/_topo/0/R1/qdrouter", properties={"opcode": "LSU"},
                      body={"id": "R2", "pv": 1, "area": "0", "instance": ulong(3),
                            "ls_seq": 2, "ls": {"id": "R2", "area": "0", "ls_seq": 2,
                                                "peers": {"R1": 1, "R3": 2}}})
    envelope = decode_envelope(message.encode())
    assert envelope.message == LinkStateUpdate(
        id="R2", instance=3, ls_seq=2, ls=LinkState(id="R2", ls_seq=2, peers={"R1": 1, "R3": 2}))
    assert envelope.to == "amqp:/_topo/0/R1/qdrouter"
    assert envelope.ingress is None and envelope.trace == ()


def test_pv_above_ours_still_decodes_so_the_engine_can_ignore_it() -> None:
    msg = decode_control(build("LSR", {"id": "R2", "pv": 2}))
    assert msg == LinkStateRequest(id="R2", pv=2)


def test_unknown_body_keys_are_ignored() -> None:
    msg = decode_control(build("LSR", {"id": "R2", "future": [1, 2], 7: "x"}))
    assert msg == LinkStateRequest(id="R2", pv=0)


# --- malformed input ------------------------------------------------------------

RA_BODY = {"id": "R3", "pv": 1, "area": "0", "instance": 1, "ls_seq": 1, "mobile_seq": 0}
LSU_BODY = {"id": "R3", "pv": 1, "ls_seq": 1, "ls": {"id": "R3", "ls_seq": 1, "peers": {}}}
MAU_BODY = {"id": "R3", "pv": 1, "mobile_seq": 1}


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (build("LSU", {**LSU_BODY, "ls_seq": "7"}),
         "LSU from router 'R3': field 'ls_seq' must be int, got str"),
        (build("RA", {**RA_BODY, "mobile_seq": True}),
         "RA from router 'R3': field 'mobile_seq' must be int, got bool"),
        (build("RA", {k: v for k, v in RA_BODY.items() if k != "ls_seq"}),
         "RA from router 'R3': field 'ls_seq' is missing"),
        (build("RA", {**RA_BODY, "id": 5}), "RA: field 'id' must be str, got int"),
        (build("HELLO", {"pv": 1, "seen": []}), "HELLO: field 'id' is missing"),
        (build("HELLO", {"id": "R3", "seen": "R1"}),
         "HELLO from router 'R3': field 'seen' must be list, got str"),
        (build("HELLO", {"id": "R3", "seen": ["R1", 2]}),
         "HELLO from router 'R3': field 'seen' item 1 must be str, got int"),
        (build("HELLO", {"id": "R3", "pv": 3}),
         "HELLO from router 'R3' \\(protocol version 3\\): field 'seen' is missing"),
        (build("LSU", {**LSU_BODY, "ls": {"id": "R3", "ls_seq": 1}}),
         "LSU from router 'R3': field 'ls.peers' is missing"),
        (build("LSU", {**LSU_BODY, "ls": {"id": "R3", "ls_seq": 1, "peers": {"R1": "x"}}}),
         "LSU from router 'R3': field 'ls.peers\\[R1\\]' must be int, got str"),
        (build("LSU", {**LSU_BODY, "ls": [1]}),
         "LSU from router 'R3': field 'ls' must be map, got list"),
        (build("MAU", {**MAU_BODY, "add": []}),
         "MAU from router 'R3': malformed: neither 'exist' nor both 'add' and 'del'"),
        (build("MAU", {**MAU_BODY, "exist": [], "del": []}),
         "MAU from router 'R3': malformed: both 'exist' and 'add'/'del'"),
        (build("MAU", {**MAU_BODY, "exist": [], "hints": [Symbol("x")]}),
         "MAU from router 'R3': field 'hints\\[0\\]' must be int, got symbol"),
        (build("MAR", {"id": "R3", "have_seq": 1.5}),
         "MAR from router 'R3': field 'have_seq' must be int, got double"),
        (build("XYZ", RA_BODY), "unknown opcode 'XYZ'"),
        (build(5, RA_BODY), "opcode must be str, got int"),
        (build("RA", [1, 2]), "RA: body must be a map, got list"),
        (build("RA", RA_BODY)[:-3], "truncated|runs past"),
        (build("RA", RA_BODY)[:11], "no 'opcode'|truncated"),
        (b"\x00\x53\x75\xa0\x01x" + build("RA", RA_BODY)[3:], "control message"),
        (b"\x00\x53\x74\xc1\x01\x00", "no 'opcode'"),
        (b"\x54\x01", "expected a section"),
        (b"\x00\xa3\x03abc\x40", "unknown section descriptor"),
        (b"", "application-properties missing"),
    ],
)
def test_malformed_messages_raise_peer_protocol_error(data: bytes, error: str) -> None:
    with pytest.raises(PeerProtocolError, match=error):
        decode_control(data)


def test_error_names_the_sender_and_opcode() -> None:
    with pytest.raises(PeerProtocolError) as info:
        decode_control(build("RA", {**RA_BODY, "ls_seq": "x"}))
    assert (info.value.router_id, info.value.opcode) == ("R3", "RA")


def test_amqp_sequence_body_is_rejected() -> None:
    data = build("RA", RA_BODY)
    data = data[: data.rindex(b"\x00\x53\x77")] + b"\x00\x53\x76" + encode([RA_BODY])
    with pytest.raises(PeerProtocolError, match="body must be an amqp-value, got amqp-sequence"):
        decode_control(data)


def test_bad_router_annotations_are_rejected() -> None:
    lsr = build("LSR", {"id": "R1"})
    for section, error in (
        ({Symbol("x-opt-qd.trace"): [1]}, "trace must be a list of str"),
        ({Symbol("x-opt-qd.ingress"): 1}, "ingress must be str"),
        ([1], "message-annotations is not a map"),
    ):
        with pytest.raises(PeerProtocolError, match=error):
            decode_envelope(b"\x00\x53\x72" + encode(section) + lsr)


def test_mau_hints_that_are_not_a_list_are_ignored_as_qdrouterd_does() -> None:
    msg = decode_control(build("MAU", {**MAU_BODY, "exist": ["M0a"], "hints": 5}))
    assert msg == MobileAddressUpdate(id="R3", mobile_seq=1, exist=["M0a"])
