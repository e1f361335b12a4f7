"""The management agent, requests in and responses out, over a routing core
in memory (docs/operations.md#management): request decoding, attribute
validation, paging."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Message

from addressing import AddressTable
from router.core import Router
from router.core.amqp import PeerProtocolError
from router.management import (
    PREFIX,
    Agent,
    ConfigAddresses,
    ConfigAutoLinks,
    ConfigLinkRoutes,
    Request,
    RouterAddresses,
    decode_request,
    encode_response,
)
from router.management.agent import Response

NODE = {"type": "org.amqp.management", "name": "self"}
ADDRESS = PREFIX + "router.config.address"


def agent() -> Agent:
    core = Router(router_id="R", addresses=AddressTable(), token=lambda: "t")
    return Agent({"router.config.address": ConfigAddresses(core),
                  "router.address": RouterAddresses(core)})


def call(a: Agent, body: Any = None, **properties: Any) -> Response:
    return a.handle(Request(properties=properties, body=body, reply_to="reply"))


def encoded(body: Any = None, reply_to: str | None = "r", correlation_id: Any = 7,
            **properties: Any) -> bytes:
    message = Message(body=body, properties=properties or None, reply_to=reply_to,
                      correlation_id=correlation_id)
    return bytes(message.encode())


def test_a_request_decodes_with_its_properties_body_and_reply_to() -> None:
    request = decode_request(encoded({"attributeNames": []}, operation="QUERY", name="self",
                                     entityType=ADDRESS))
    assert request.properties == {"operation": "QUERY", "name": "self", "entityType": ADDRESS}
    assert request.body == {"attributeNames": []}
    assert (request.reply_to, request.correlation_id) == ("r", 7)


def test_a_request_without_reply_to_or_properties_still_decodes() -> None:
    request = decode_request(encoded(reply_to=None))
    assert request.reply_to is None and request.properties == {}
    assert call(agent(), **request.properties).status == 400


@pytest.mark.parametrize("data", [b"\x00Sp", b"\x00\x53\x73\xc0\x03\x01\x71\x01",
                                  b"\x00\x53\x74\xa1\x01x"])
def test_malformed_bytes_are_a_protocol_error(data: bytes) -> None:
    with pytest.raises(PeerProtocolError):
        decode_request(data)


def test_the_response_carries_status_and_correlation_id() -> None:
    data = encode_response(Response(status=201, description="Created", body={"a": 1}),
                           to="reply", correlation_id="c-1")
    message = Message()
    message.decode(data)
    assert (message.address, message.correlation_id) == ("reply", "c-1")
    assert message.properties == {"statusCode": 201, "statusDescription": "Created"}
    assert message.body == {"a": 1} and message.durable is False


def test_a_correlation_id_of_any_type_goes_back_as_it_came() -> None:
    # An array of ints (or of nulls: found by the fuzzer) as correlation-id:
    # the encoder writes only string and symbol arrays itself.
    for array in (b"\xe0\x05\x03\x54\x01\x02\x03", b"\xe0\x02\x01\x40"):
        request = (b"\x00\x53\x73\xc0" + bytes((len(array) + 8, 6)) + b"\x40\x40\x40\x40"
                   b"\xa1\x01r" + array)
        decoded = decode_request(request)
        assert decoded.reply_to == "r"
        data = encode_response(Response(status=200, description="OK"), to="r",
                               correlation_id=decoded.correlation_id)
        assert array in data


def test_create_validates_attributes_against_the_schema() -> None:
    a = agent()
    ok = call(a, {"prefix": "a", "distribution": "multicast"}, operation="CREATE",
              type=ADDRESS, name="x")
    assert (ok.status, ok.body["distribution"]) == (201, "multicast")  # type: ignore[index]
    for body, description in [
        ({"prefix": "b", "colour": 1},
         f"Unknown attribute 'colour' for type '{ADDRESS}'"),
        ({"prefix": "b", "identity": "9"}, "Cannot set attribute 'identity' in CREATE"),
        ({"prefix": "b", "name": "other"}, "Conflicting values for 'name'"),
        ({"prefix": "b", "type": PREFIX + "listener"}, "Conflicting values for 'type'"),
        ({"prefix": "a"}, "Name conflicts with an existing entity"),
        ({"prefix": "b", "distribution": 7},
         "invalid value for 'distribution' in section 'address': expected one of "
         "'multicast', 'closest', 'balanced', 'unavailable' (or an index 0..3), got '7'"),
        ([1], "Body of a CREATE request must be a map, got a list"),
    ]:
        name = "x" if body == {"prefix": "a"} else "y"
        refused = call(a, body, operation="CREATE", type=ADDRESS, name=name)
        assert (refused.status, refused.description) == (400, description)


def test_an_attribute_given_as_null_is_not_given() -> None:
    """qdmanage sends ``NAME`` without ``=VALUE`` as null, and an empty
    argument as the attribute '' set to null; an unknown name stays refused."""
    a = agent()
    created = call(a, {"prefix": "n", "distribution": None, "": None}, operation="CREATE",
                   type=ADDRESS, name="n")
    assert (created.status, created.body["distribution"]) == (201, "balanced")  # type: ignore[index]
    refused = call(a, {"prefix": "m", "colour": None}, operation="CREATE", type=ADDRESS,
                   name="m")
    assert (refused.status, refused.description) == (
        400, f"Unknown attribute 'colour' for type '{ADDRESS}'")


def test_wrong_property_types_are_refused() -> None:
    a = agent()
    assert call(a, operation=5).description == \
        "property 'operation' must be a string, got an integer"
    assert call(a, operation="READ", type=ADDRESS, name=["x"]).status == 400
    assert call(a, operation="READ", type=ADDRESS).description == "No name or identity provided"
    assert call(a, operation="FROB", type=ADDRESS, name="x").status == 501


def test_read_update_and_delete_find_entities_by_name_or_identity() -> None:
    a = agent()
    created = call(a, {"prefix": "q"}, operation="CREATE", type=ADDRESS, name="q")
    identity = created.body["identity"]  # type: ignore[index]
    assert call(a, operation="READ", type=ADDRESS, identity=identity).body["name"] == "q"  # type: ignore[index]
    assert call(a, operation="READ", type=ADDRESS, name="nope").status == 404
    refused = call(a, {"prefix": "r"}, operation="UPDATE", type=ADDRESS, name="q")
    assert (refused.status, refused.description) == \
        (501, f"Operation 'UPDATE' not implemented for '{ADDRESS}'")
    assert call(a, operation="DELETE", type=ADDRESS, name="q").status == 204
    assert call(a, operation="READ", type=ADDRESS, name="q").status == 404


def test_query_pages_with_offset_and_count() -> None:
    a = agent()
    for n in range(5):
        call(a, {"prefix": f"p{n}"}, operation="CREATE", type=ADDRESS, name=f"a{n}")
    page = call(a, {"attributeNames": ["name"]}, operation="QUERY", entityType=ADDRESS,
                offset=1, count=2, **{k: v for k, v in NODE.items() if k != "type"})
    assert page.body == {"attributeNames": ["name"], "results": [["a1"], ["a2"]]}
    everything = call(a, {}, operation="QUERY", entityType=ADDRESS, name="self")
    assert len(everything.body["results"]) == 5  # type: ignore[index]
    assert "prefix" in everything.body["attributeNames"]  # type: ignore[index]
    unknown = call(a, {"attributeNames": ["name", "nope"]}, operation="QUERY",
                   entityType=ADDRESS, name="self")
    assert unknown.status == 404
    # Digits outside ASCII ("²") are refused, not a failure (found by the fuzzer).
    odd = call(a, {}, operation="QUERY", entityType=ADDRESS, name="self", count="²")
    assert (odd.status, a.failures) == (400, 2)


def test_a_query_may_name_the_entity_type_queried_as_its_type() -> None:
    """qdrouterd's own test clients send QUERY with ``type`` the entity type
    and no body: the same rows as a node QUERY of that entityType."""
    a = agent()
    for n in range(3):
        call(a, {"prefix": f"t{n}"}, operation="CREATE", type=ADDRESS, name=f"t{n}")
    by_type = call(a, operation="QUERY", type=ADDRESS)
    by_node = call(a, {}, operation="QUERY", entityType=ADDRESS, **NODE)
    assert by_type.status == 200 and by_type.body == by_node.body
    assert [row[by_type.body["attributeNames"].index("name")]  # type: ignore[index]
            for row in by_type.body["results"]] == ["t0", "t1", "t2"]  # type: ignore[index]


def test_a_query_without_a_type_leaves_out_what_only_a_typed_query_lists() -> None:
    """As qdrouterd: links, addresses and the routing configuration only
    when asked for by type."""
    a = agent()
    call(a, {"prefix": "p"}, operation="CREATE", type=ADDRESS, name="a0")
    typeless = call(a, {"attributeNames": ["type", "name"]}, operation="QUERY", **NODE)
    assert typeless.status == 200
    listed = {row[0] for row in typeless.body["results"]}  # type: ignore[index]
    assert ADDRESS not in listed and PREFIX + "router.address" not in listed
    typed = call(a, {"attributeNames": ["name"]}, operation="QUERY", entityType=ADDRESS, **NODE)
    assert typed.body["results"] == [["a0"]]  # type: ignore[index]


def test_offset_and_count_may_be_written_as_digits() -> None:
    a = agent()
    for n in range(3):
        call(a, {"prefix": f"d{n}"}, operation="CREATE", type=ADDRESS, name=f"d{n}")
    page = call(a, {"attributeNames": ["name"]}, operation="QUERY", entityType=ADDRESS,
                count="2", offset="1", **NODE)
    assert page.body == {"attributeNames": ["name"], "results": [["d1"], ["d2"]]}
    bad = call(a, {}, operation="QUERY", entityType=ADDRESS, count="two", **NODE)
    assert bad.status == 400


class _Broken(ConfigAddresses):
    def create(self, name: str | None, attributes: dict[str, object]) -> Any:
        raise KeyError("unchecked")


def test_a_request_that_fails_unexpectedly_is_answered_500_and_the_next_is_served() -> None:
    core = Router(router_id="R", addresses=AddressTable(), token=lambda: "t")
    a = Agent({"router.config.address": _Broken(core)})
    failed = call(a, {"prefix": "q"}, operation="CREATE", type=ADDRESS, name="q")
    assert (failed.status, failed.description) == (500, "KeyError: 'unchecked'")
    assert call(a, operation="QUERY", type=ADDRESS).status == 200


def test_link_routes_and_auto_links_show_their_deprecated_names_too() -> None:
    core = Router(router_id="R", addresses=AddressTable(), token=lambda: "t")
    a = Agent({"router.config.linkRoute": ConfigLinkRoutes(core, lambda: 0.0),
               "router.config.autoLink": ConfigAutoLinks(core)})
    route = call(a, {"prefix": "b", "containerId": "c", "dir": "out"}, operation="CREATE",
                 type=PREFIX + "router.config.linkRoute", name="r").body
    assert (route["direction"], route["dir"]) == ("out", "out")  # type: ignore[index]
    link = call(a, {"addr": "q", "containerId": "c", "direction": "in"}, operation="CREATE",
                type=PREFIX + "router.config.autoLink", name="l").body
    assert (link["address"], link["addr"], link["dir"]) == ("q", "q", "in")  # type: ignore[index]
    identities = (route["identity"], link["identity"])  # type: ignore[index]
    assert identities == ("1", "2"), "configuration entities share one sequence of identities"


def test_each_request_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    a = agent()
    with caplog.at_level("DEBUG", logger="router.management.agent"):
        call(a, operation="GET-LOG", type="org.amqp.management", name="self")
    assert "Agent request: operation=GET-LOG type=org.amqp.management name=self" \
        in caplog.text
