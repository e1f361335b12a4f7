"""Seed inputs for the fuzzers: well-formed inputs of each target, from which
libFuzzer's mutations start (``python -m tests.fuzz seed``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _messages() -> Iterator[bytes]:
    from proton import Message

    from router.core.message import annotate, scan

    plain = [
        Message(body="hello", address="orders"),
        Message(body=b"\x00\x01", address="a/b", user_id=b"alice", subject="s",
                reply_to="amqp:/_topo/0/R/temp.x", correlation_id=7, durable=True),
        Message(body={"k": [1, 2.5, None]}, properties={"p": True, "n": 3}, priority=7,
                annotations={"x-opt-user": "u"}, instructions={"x-opt-di": 1}),
        Message(body=["list", 1], address="queue", ttl=10.0, first_acquirer=True),
    ]
    for message in plain:
        data = message.encode()
        yield data
        info = scan(data)
        yield annotate(data, info, ingress="0/R1", trace=["0/R1", "0/R2"], to="orders",
                       phase=1, stream=None)


def _values() -> Iterator[bytes]:
    from router.core.amqp.values import Described, Long, Symbol, ULong, encode

    for value in (None, True, 7, -1, 2**40, 1.5, "text", b"bytes", Symbol("sym"),
                  ULong(2**64 - 1), Long(-2**63), [1, "a", [None]],
                  {"k": {"n": [1, 2]}, Symbol("s"): b""},
                  Described(ULong(0x70), [True, 1, None])):
        yield encode(value)


def _routing() -> Iterator[bytes]:
    from router.core.routing import (
        Hello,
        LinkState,
        LinkStateRequest,
        LinkStateUpdate,
        MobileAddressRequest,
        MobileAddressUpdate,
        RouterAdvertisement,
        control_address,
        encode_control,
    )

    for msg in (Hello(id="R1", pv=1, area="0", instance=5, seen=["R2"]),
                RouterAdvertisement(id="R1", pv=1, instance=5, ls_seq=2, mobile_seq=3),
                LinkStateRequest(id="R1", pv=1),
                LinkStateUpdate(id="R1", instance=5, ls_seq=2,
                                ls=LinkState(id="R1", ls_seq=2, peers={"R2": 1, "R3": 4})),
                MobileAddressUpdate(id="R1", pv=1, mobile_seq=3, add=["M0a", "M1b"],
                                    delete=["M0c"], hints=[0, 1]),
                MobileAddressUpdate(id="R1", pv=1, mobile_seq=4, exist=["M0a"], hints=[0]),
                MobileAddressRequest(id="R1", pv=1, have_seq=2)):
        yield encode_control(msg, to=control_address(msg.opcode, None), ingress="0/R1",
                             trace=["0/R1"])


def _management() -> Iterator[bytes]:
    from router.management import Request
    from router.management.messages import encode_request

    node = {"type": "org.amqp.management", "name": "self"}
    address = "org.apache.qpid.dispatch.router.config.address"
    for props, body in (
            ({"operation": "QUERY", "entityType": address, **node},
             {"attributeNames": ["name", "prefix"]}),
            ({"operation": "QUERY", **node, "offset": 1, "count": 2}, {}),
            ({"operation": "CREATE", "type": address, "name": "a"},
             {"prefix": "a", "distribution": "multicast"}),
            ({"operation": "READ", "type": address, "name": "a"}, None),
            ({"operation": "UPDATE", "type": address, "identity": "1"}, {"waypoint": True}),
            ({"operation": "DELETE", "type": address, "name": "a"}, None),
            ({"operation": "GET-TYPES", **node}, None),
            ({"operation": "GET-ATTRIBUTES", "entityType": address, **node}, None),
            ({"operation": "GET-LOG", "limit": 5, **node}, None),
            ({"operation": "CREATE", "type": "org.apache.qpid.dispatch.router.config.linkRoute",
              "name": "lr"}, {"prefix": "q", "direction": "in", "containerId": "b"}),
            ({"operation": "CREATE", "type": "org.apache.qpid.dispatch.router.config.autoLink",
              "name": "al"}, {"address": "q", "direction": "out", "connection": "c"})):
        yield encode_request(Request(properties=props, body=body, reply_to="reply",
                                     correlation_id=1), to="$management")


def _conf() -> Iterator[bytes]:
    for path in sorted((REPO / "examples").glob("*.conf")):
        yield path.read_bytes()
    for path in sorted((REPO / "examples").glob("*.json")):
        yield path.read_bytes()


def _http_api() -> Iterator[bytes]:
    yield b"\x00router.config.address?attributes=name,prefix&offset=1&count=2\n"
    yield b"\x00connection/c%2F1?router=R2\n"
    yield b"\x01router.config.address\n{\"name\": \"a\", \"prefix\": \"a\"}"
    yield b"\x02connection/1\n{\"adminStatus\": \"deleted\"}"
    yield b"\x04router.config.address/a\n"
    yield b"\x00log?limit=10\n"


SEEDS = {"message": _messages, "values": _values, "routing": _routing,
         "management": _management, "conf": _conf, "http_api": _http_api}


def write_seeds(name: str, directory: Path) -> int:
    """Write target ``name``'s seeds into ``directory`` (named by content)."""
    directory.mkdir(parents=True, exist_ok=True)
    count = 0
    for data in SEEDS[name]():
        (directory / f"seed-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
        count += 1
    return count
