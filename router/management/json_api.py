"""The management agent over HTTP and JSON: the web console's endpoint
(docs/operations.md#the-json-management-endpoint).

Owns turning an HTTP request under ``/api/v1/`` into the management
request it stands for, and a management response into the JSON the HTTP
client gets.  The paths come from the management schema: every entity
type the agent knows, by its short or fully qualified name, and nothing
else; the attributes are the ones QUERY and READ return.  It must not
touch sockets, carry out requests or decide who may make them (the
adapter's console does, with policy).

======================================  ==============================
``GET /api/v1/<type>``                  QUERY (``attributes=a,b``,
                                        ``offset``, ``count``)
``GET /api/v1/<type>/<name>``           READ
``POST /api/v1/<type>`` (a JSON map)    CREATE (``name`` in the map)
``PATCH /api/v1/<type>/<name>``         UPDATE
``DELETE /api/v1/<type>/<name>``        DELETE
``GET /api/v1/schema``                  GET-SCHEMA
``GET /api/v1/log?limit=N``             GET-LOG
``GET /api/v1/nodes``                   GET-MGMT-NODES
======================================  ==============================

``router=ID`` on any of them sends the request to that router's agent
through the network (``_topo/0/ID/$management``), as qdstat ``-r`` does.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Mapping
from urllib.parse import parse_qs, unquote

import attrs

from router.management.agent import Request, Response
from router.management.schema import MANAGEMENT_TYPE, SCHEMA

__all__ = ["PREFIX", "Answer", "Call", "answer", "error", "parse", "to_json"]

PREFIX = "/api/v1/"
#: Operations that change the router.
WRITES = frozenset({"CREATE", "UPDATE", "DELETE"})
_NODE_PATHS = {"schema": "GET-SCHEMA", "log": "GET-LOG", "nodes": "GET-MGMT-NODES"}
_METHODS = {("GET", False): "QUERY", ("GET", True): "READ", ("POST", False): "CREATE",
            ("PATCH", True): "UPDATE", ("PUT", True): "UPDATE", ("DELETE", True): "DELETE"}


@attrs.frozen
class Call:
    """A management request an HTTP request stands for.

    Attributes:
        request: the request for the agent (no reply-to: the adapter routes it).
        router: the router whose agent is asked; None: this one.
        entity_type: the fully qualified type it is about ("" for node operations).
    """

    request: Request
    router: str | None = None
    entity_type: str = ""

    @property
    def operation(self) -> str:
        return str(self.request.properties["operation"])

    @property
    def write(self) -> bool:
        return self.operation in WRITES


@attrs.frozen
class Answer:
    """The HTTP response: its status and JSON body."""

    status: int
    body: bytes


def error(status: int, description: str) -> Answer:
    return Answer(status, to_json({"status": status, "error": description}))


def parse(method: str, target: str, body: bytes) -> Call | Answer:
    """The management request ``method target`` (with ``body``) stands for,
    or the error answer when it stands for none."""
    path, _, query_text = target.partition("?")
    if not path.startswith(PREFIX):
        return error(404, "not found")
    query = {k: v[-1] for k, v in parse_qs(query_text, keep_blank_values=True).items()}
    router = query.pop("router", None) or None
    rest = path[len(PREFIX):]
    type_name, slash, raw_name = rest.partition("/")
    type_name = unquote(type_name)
    node_operation = _NODE_PATHS.get(type_name)
    if node_operation is not None and not slash:
        if method not in ("GET", "HEAD"):
            return error(405, f"{method} is not allowed on {path}")
        props: dict[str, object] = {"operation": node_operation, "type": MANAGEMENT_TYPE,
                                    "name": "self"}
        if node_operation == "GET-LOG":
            limit = _count(query.get("limit"), "limit")
            if isinstance(limit, Answer):
                return limit
            if limit is not None:
                props["limit"] = limit
        return Call(Request(properties=props), router)
    entity_type = SCHEMA.find(type_name) if type_name else None
    if entity_type is None or entity_type.fully_qualified == MANAGEMENT_TYPE:
        return error(404, f"no entity type {type_name!r} (GET {PREFIX}schema lists them)")
    name = unquote(raw_name) if slash else None
    if slash and not name:
        return error(404, f"no entity named in {path}")
    operation = _METHODS.get(("GET" if method == "HEAD" else method, name is not None))
    if operation is None:
        return error(405, f"{method} is not allowed on {path}")
    props = {"operation": operation, "type": entity_type.fully_qualified}
    content: object = None
    if operation == "QUERY":
        names = [n for n in query.get("attributes", "").split(",") if n]
        content = {"attributeNames": names}
        for key in ("offset", "count"):
            number = _count(query.get(key), key)
            if isinstance(number, Answer):
                return number
            if number is not None:
                props[key] = number
    else:
        if name is not None:
            props["name"] = name
        if operation in ("CREATE", "UPDATE"):
            content = _json_map(body)
            if isinstance(content, Answer):
                return content
    return Call(Request(properties=props, body=content), router, entity_type.fully_qualified)


def _count(text: str | None, what: str) -> int | Answer | None:
    if text is None or text == "":
        return None
    if not (text.isascii() and text.isdigit()):  # "²" is a digit to str.isdigit
        return error(400, f"{what} must be a whole number, got {text!r}")
    return int(text)


def _json_map(body: bytes) -> dict[str, object] | Answer:
    if not body.strip():
        return {}
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        return error(400, f"the body is not JSON: {exc}")
    if not isinstance(value, dict):
        return error(400, "the body must be a JSON object of attribute values")
    return value


def answer(response: Response) -> Answer:
    """The HTTP answer to a management response: its status, and the body
    as JSON (``{"error": ...}`` when it failed)."""
    if not response.ok:
        return error(response.status, response.description)
    return Answer(response.status, to_json(response.body))


def to_json(value: object) -> bytes:
    """``value`` (as the agent or a remote one answers: AMQP types
    included) as JSON text."""
    return json.dumps(_plain(value), separators=(",", ":")).encode()


def _plain(value: object) -> object:
    if value is None or isinstance(value, bool | str):
        return str(value) if isinstance(value, str) and type(value) is not str else value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(_plain(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)
