"""The JSON management endpoint's mapping (docs/operations.md#the-json-management-endpoint):
HTTP method and path to the management request, the agent's response to
JSON, with an agent over a routing core in memory."""

from __future__ import annotations

import json
import uuid

import pytest

from addressing import AddressTable
from router.core import Router
from router.core.amqp import Int, Symbol, ULong
from router.management import PREFIX, Agent, ConfigAddresses, RouterAddresses
from router.management.agent import Response
from router.management.json_api import Answer, Call, answer, parse, to_json


def agent() -> Agent:
    core = Router(router_id="R", addresses=AddressTable(), token=lambda: "t")
    return Agent({"router.config.address": ConfigAddresses(core),
                  "router.address": RouterAddresses(core)})


def call(method: str, target: str, body: bytes = b"") -> Call:
    parsed = parse(method, target, body)
    assert isinstance(parsed, Call), parsed
    return parsed


def failure(method: str, target: str, body: bytes = b"") -> tuple[int, str]:
    parsed = parse(method, target, body)
    assert isinstance(parsed, Answer), parsed
    return parsed.status, json.loads(parsed.body)["error"]


def run(a: Agent, method: str, target: str, body: bytes = b"") -> tuple[int, object]:
    done = answer(a.handle(call(method, target, body).request))
    return done.status, json.loads(done.body)


def test_each_method_and_path_is_the_operation_on_the_schema_s_type() -> None:
    query = call("GET", "/api/v1/router.config.address"
                        "?attributes=prefix,distribution&offset=1&count=2")
    assert (query.operation, query.entity_type, query.write) == (
        "QUERY", PREFIX + "router.config.address", False)
    assert query.request.properties["offset"] == 1 and query.request.properties["count"] == 2
    assert query.request.body == {"attributeNames": ["prefix", "distribution"]}
    read = call("GET", f"/api/v1/{PREFIX}router.config.address/a%2Fb")
    assert (read.operation, read.request.properties["name"]) == ("READ", "a/b")
    assert call("POST", "/api/v1/router.config.address", b'{"prefix": "x"}').write
    assert call("PATCH", "/api/v1/connection/c1", b"{}").operation == "UPDATE"
    assert call("DELETE", "/api/v1/router.config.address/x").operation == "DELETE"
    assert call("GET", "/api/v1/log?limit=5").request.properties == {
        "operation": "GET-LOG", "type": "org.amqp.management", "name": "self", "limit": 5}
    assert call("GET", "/api/v1/connection?router=R2").router == "R2"


@pytest.mark.parametrize(("method", "target", "body", "status", "says"), [
    ("GET", "/api/v1/nonsense", b"", 404, "no entity type 'nonsense'"),
    ("GET", "/api/v1/org.amqp.management", b"", 404, "no entity type"),
    ("GET", "/api/v1/", b"", 404, "no entity type"),
    ("POST", "/api/v1/router.config.address/x", b"{}", 405, "POST is not allowed"),
    ("DELETE", "/api/v1/router.config.address", b"", 405, "DELETE is not allowed"),
    ("POST", "/api/v1/log", b"", 405, "not allowed"),
    ("GET", "/api/v1/router.config.address?count=-1", b"", 400, "count must be a whole number"),
    # "²" is a digit to str.isdigit, not to int() (found by the fuzzer).
    ("GET", "/api/v1/router.config.address?count=²", b"", 400, "count must be a whole number"),
    ("POST", "/api/v1/router.config.address", b"{not json", 400, "not JSON"),
    ("POST", "/api/v1/router.config.address", b"[1, 2]", 400, "a JSON object"),
    ("GET", "/api/v1/router.config.address/", b"", 404, "no entity named"),
])
def test_what_stands_for_no_request_is_refused_with_the_reason(
        method: str, target: str, body: bytes, status: int, says: str) -> None:
    got_status, error = failure(method, target, body)
    assert got_status == status and says in error


def test_the_agent_s_answers_come_back_as_json() -> None:
    a = agent()
    status, made = run(a, "POST", "/api/v1/router.config.address",
                       b'{"name": "orders", "prefix": "orders", "distribution": "multicast"}')
    assert status == 201 and isinstance(made, dict) and made["distribution"] == "multicast"
    status, rows = run(a, "GET", "/api/v1/router.config.address?attributes=name,prefix")
    assert (status, rows) == (200, {"attributeNames": ["name", "prefix"],
                                    "results": [["orders", "orders"]]})
    assert run(a, "GET", "/api/v1/router.config.address?attributes=nonsense")[0] == 404
    status, error = run(a, "POST", "/api/v1/router.config.address",
                        b'{"name": "orders", "prefix": "o"}')
    assert status == 400 and "conflicts" in str(error)
    assert run(a, "DELETE", "/api/v1/router.config.address/orders")[0] == 204
    assert run(a, "GET", "/api/v1/router.config.address/orders") == (
        404, {"status": 404, "error": "Not Found: no entity with name=orders"})


def test_amqp_values_become_plain_json() -> None:
    value = {Symbol("s"): [Int(1), ULong(2), b"bytes", uuid.UUID(int=1), float("nan"),
                           (True, None)]}
    assert json.loads(to_json(value)) == {
        "s": [1, 2, "bytes", "00000000-0000-0000-0000-000000000001", None, [True, None]]}
    failed = answer(Response(status=403, description="Forbidden: no"))
    assert (failed.status, json.loads(failed.body)) == (
        403, {"status": 403, "error": "Forbidden: no"})
