"""The management agent: one request in, one response out.

See docs/operations.md#entity-operations and docs/operations.md#node-operations.

Owns the AMQP management operations over entity sources: finding entities
by name or identity, QUERY with attribute lists and paging, the node
operations (GET-TYPES, GET-ATTRIBUTES, GET-OPERATIONS, GET-MGMT-NODES,
GET-SCHEMA, GET-JSON-SCHEMA, GET-LOG, GET-ANNOTATIONS) and the checks every
CREATE, UPDATE and DELETE must pass before a source sees it.  It must not
touch sockets or proton, nor know how a source keeps its entities: sources
(``router.management.sources`` and the adapter's) do, and what changes the
router beyond the source comes back as effects for the adapter to apply.

Where qdrouterd's two agents disagree (docs/compatibility.md#management-requests),
the agent answers as one: READ of ``router`` and ``router.link``
works, UPDATE of a configuration type that has no UPDATE is refused with
501, QUERY without ``entityType`` lists every entity, and ``offset`` /
``count`` are always honoured.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from conf.entities import ENTITY_TYPES_BY_NAME
from conf.fields import schema_fields
from router.core.effects import Effect
from router.management.schema import (
    MANAGEMENT_TYPE,
    SCHEMA,
    EntityType,
)

__all__ = [
    "STATUS_TEXT",
    "Agent",
    "Changed",
    "EntitySource",
    "ManagementError",
    "Request",
    "Response",
    "Row",
]

log = logging.getLogger(__name__)

STATUS_TEXT = {
    200: "OK",
    201: "Created",
    204: "No Content",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    500: "Internal Server Error",
    501: "Not Implemented",
}

#: One entity's attributes by name ("name" and "identity" included).
Row = dict[str, object]


class ManagementError(Exception):
    """A request the agent refuses: the status code and its description."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


@attrs.frozen(kw_only=True)
class Request:
    """A decoded management request.

    Attributes:
        properties: the application properties, keys as text.
        body: the amqp-value body (None when absent).
        reply_to: where the response goes; None drops the request.
        correlation_id: returned as it came (type kept).
        origin: opaque marker of the connection the request came on.
    """

    properties: Mapping[str, object]
    body: object = None
    reply_to: str | None = None
    correlation_id: object = None
    origin: object = None


@attrs.frozen(kw_only=True)
class Response:
    """What the agent answers: status code and description, body, and effects."""

    status: int
    description: str
    body: object = None
    effects: tuple[Effect, ...] = ()

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


@attrs.frozen(kw_only=True)
class Changed:
    """What a CREATE or UPDATE made: the entity's row and effects to apply."""

    row: Row
    effects: tuple[Effect, ...] = ()


class EntitySource(Protocol):
    """The entities of one type.  Sources raise ``ManagementError`` to refuse."""

    def rows(self) -> Iterable[Row]:
        """Every entity of the type now."""
        ...

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        """Make an entity (attributes already checked against the schema)."""
        ...

    def update(self, row: Row, attributes: dict[str, object]) -> Changed:
        """Change an entity's updatable attributes."""
        ...

    def delete(self, row: Row) -> tuple[Effect, ...]:
        """Remove an entity."""
        ...


class ReadOnly:
    """A source whose entities can only be read (a base for sources)."""

    def rows(self) -> Iterable[Row]:
        return ()

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        raise ManagementError(501, "CREATE is not supported for this type")

    def update(self, row: Row, attributes: dict[str, object]) -> Changed:
        raise ManagementError(501, "UPDATE is not supported for this type")

    def delete(self, row: Row) -> tuple[Effect, ...]:
        raise ManagementError(501, "DELETE is not supported for this type")


_NODE_TYPE = SCHEMA.types[MANAGEMENT_TYPE]
_MANAGEMENT = SCHEMA.types["management"]
_SELF = "self"
_MAX_COUNT = 2**31 - 1

#: Entity types a QUERY lists only when it names them, as qdrouterd's agent
#: does (its routing core answers for them, its Python agent for a QUERY
#: without a type): connections, links, addresses and the routing
#: configuration can run to many thousands of rows.
_ASKED_BY_TYPE_ONLY = frozenset({
    "connection", "router.address", "router.link", "router.config.address",
    "router.config.linkRoute", "router.config.autoLink", "router.config.exchange",
    "router.config.binding", "router.connection.linkRoute",
})


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise ManagementError(400, f"{what} must be a string, got {_kind(value)}")
    return str(value)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _integer(value: object, what: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value)  # qdrouterd's agent takes "100" too (its own tests send it)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ManagementError(400, f"{what} must be an integer, got {_kind(value)}")
    if value < 0:
        raise ManagementError(400, f"{what} must not be negative, got {value}")
    return int(value)


class Requester:
    """The connection the request being served came on (an opaque marker the
    adapter gives, None for a request of the router's own): sources whose
    entities belong to a connection read it (``router.connection.linkRoute``)."""

    def __init__(self) -> None:
        self.origin: object = None

    def __call__(self) -> object:
        return self.origin


class Agent:
    """Answers management requests for one router.

    Args:
        sources: the entity source of each type, by short type name; types
            without one have no entities.
        mgmt_nodes: the management addresses of every router in the network
            (``GET-MGMT-NODES``), asked for on each request.
        log_records: the most recent log records, oldest first (``GET-LOG``).
    """

    def __init__(self, sources: Mapping[str, EntitySource], *,
                 mgmt_nodes: Callable[[], list[str]] = list,
                 log_records: Callable[[], Sequence[list[object]]] = list,
                 requester: Requester | None = None) -> None:
        self.sources = dict(sources)
        self.requester = requester if requester is not None else Requester()
        self.mgmt_nodes = mgmt_nodes
        self.log_records = log_records
        self.failures = 0

    # -- the entry point ---------------------------------------------------------

    def handle(self, request: Request) -> Response:
        """Carry out ``request``; never raises for a bad request."""
        if log.isEnabledFor(logging.DEBUG):
            props = request.properties
            log.debug("Agent request: operation=%s type=%s name=%s identity=%s",
                      props.get("operation"), props.get("type"), props.get("name"),
                      props.get("identity"))
        self.requester.origin = request.origin
        try:
            response = self._handle(request)
        except ManagementError as error:
            response = Response(status=error.status, description=error.description,
                                body=None)
        except Exception as error:  # one request must not stop the router
            # A request this agent should have refused but did not check: the
            # requester gets 500 with the reason, the log gets the traceback.
            log.exception("management %s failed", request.properties.get("operation"))
            response = Response(status=500, description=f"{type(error).__name__}: {error}",
                                body=None)
        finally:
            self.requester.origin = None
        if not response.ok:
            self.failures += 1
            log.info("management %s refused: %d %s", request.properties.get("operation"),
                     response.status, response.description)
        return response

    def _handle(self, request: Request) -> Response:
        props = request.properties
        operation = props.get("operation")
        if operation is None:
            raise ManagementError(400, "No 'operation' property in the request")
        operation = _text(operation, "property 'operation'").upper()
        type_name = props.get("type")
        name = props.get("name")
        identity = props.get("identity")
        if name is not None:
            name = _text(name, "property 'name'")
        if identity is not None:
            identity = _text(identity, "property 'identity'")
        entity_type: EntityType | None = None
        if type_name is not None:
            entity_type = self._type(_text(type_name, "property 'type'"))
        node = entity_type in (_NODE_TYPE, _MANAGEMENT) or (
            entity_type is None and name in (None, _SELF) and identity in (None, _SELF))
        if node or name == _SELF or identity == _SELF:
            return self._node_operation(operation, request)
        if operation == "QUERY" and entity_type is not None:
            # qdrouterd also takes a QUERY whose ``type`` is the entity type
            # queried (its own test clients send them).
            return self._query(entity_type, props, request.body)
        if operation not in ("CREATE", "READ", "UPDATE", "DELETE"):
            shown = entity_type.fully_qualified if entity_type else "the entity"
            raise ManagementError(501, f"Operation {operation!r} not implemented for {shown!r}")
        if operation == "CREATE":
            if entity_type is None:
                raise ManagementError(400, "CREATE needs the 'type' property")
            return self._create(entity_type, name, request.body)
        if name is None and identity is None:
            raise ManagementError(400, "No name or identity provided")
        found_type, row = self._find(entity_type, name, identity)
        self._allowed(found_type, operation)
        if operation == "READ":
            return Response(status=200, description="OK", body=self._full(found_type, row))
        if operation == "UPDATE":
            return self._update(found_type, row, request.body)
        effects = self._source(found_type).delete(row)
        return Response(status=204, description="No Content", body={}, effects=tuple(effects))

    # -- entities ----------------------------------------------------------------

    def _type(self, name: str) -> EntityType:
        found = SCHEMA.find(name)
        if found is None:
            raise ManagementError(404, f"Unknown entity type {name!r}")
        return found

    def _source(self, entity_type: EntityType) -> EntitySource:
        return self.sources.get(entity_type.name) or ReadOnly()

    def _allowed(self, entity_type: EntityType, operation: str) -> None:
        if entity_type.name == "connection" and operation == "DELETE":
            # As qdrouterd: a connection is closed by UPDATE, never deleted.
            raise ManagementError(403, "Forbidden: a connection is closed by an UPDATE "
                                       "that sets adminStatus to 'deleted'")
        if operation not in SCHEMA.operations(entity_type):
            raise ManagementError(
                501, f"Operation {operation!r} not implemented for "
                     f"{entity_type.fully_qualified!r}")

    def _full(self, entity_type: EntityType, row: Row) -> Row:
        """``row`` with every attribute of the type (null where unknown) and ``type``."""
        full: Row = {name: row.get(name) for name in SCHEMA.attribute_names(entity_type)}
        full["type"] = entity_type.fully_qualified
        return full

    def _rows(self, entity_type: EntityType) -> Iterable[Row]:
        source = self.sources.get(entity_type.name)
        return () if source is None else source.rows()

    def _types_under(self, entity_type: EntityType | None) -> list[EntityType]:
        return [t for t in SCHEMA if t.name in self.sources
                and (entity_type is None or SCHEMA.is_a(t, entity_type))]

    def _find(self, entity_type: EntityType | None, name: str | None,
              identity: str | None) -> tuple[EntityType, Row]:
        key, value = ("identity", identity) if identity is not None else ("name", name)
        for t in self._types_under(entity_type):
            for row in self._rows(t):
                if row.get(key) == value:
                    if name is not None and identity is not None and row.get("name") != name:
                        raise ManagementError(
                            400, f"Conflicting name={name} identity={identity}")
                    return t, row
        if entity_type is not None and entity_type.name in _ASKED_BY_TYPE_ONLY:
            # qdrouterd's routing core answers these with "Not Found" alone.
            raise ManagementError(404, f"Not Found: no entity with {key}={value}")
        raise ManagementError(404, f"No entity with {key}={value}")

    def _attributes(self, body: object, what: str) -> dict[str, object]:
        if body is None:
            return {}
        if not isinstance(body, dict):
            raise ManagementError(400, f"Body of {what} request must be a map, got "
                                       f"{_kind(body)}")
        attributes: dict[str, object] = {}
        for key, value in body.items():
            attributes[_text(key, "an attribute name")] = value
        return attributes

    def _create(self, entity_type: EntityType, name: str | None, body: object) -> Response:
        self._allowed(entity_type, "CREATE")
        attributes = self._attributes(body, "a CREATE")
        for key, expected in (("type", None), ("name", name)):
            given = attributes.pop(key, None)
            if given is None:
                continue
            if key == "type":
                if self._type(_text(given, "attribute 'type'")) is not entity_type:
                    raise ManagementError(400, "Conflicting values for 'type'")
            elif expected is not None and given != expected:
                raise ManagementError(400, "Conflicting values for 'name'")
            else:
                name = _text(given, "attribute 'name'")
        if "identity" in attributes:
            raise ManagementError(400, "Cannot set attribute 'identity' in CREATE")
        creatable = {a.name for a in entity_type.attributes if a.create}
        known = set(SCHEMA.attribute_names(entity_type))
        # A null value is no value (qdmanage sends ``NAME`` without ``=VALUE``
        # as null, and an empty argument, from a trailing space, as the
        # attribute '' set to null); an unknown name is refused all the same.
        attributes = {key: value for key, value in attributes.items()
                      if value is not None or (key and key not in known)}
        for key in attributes:
            if key not in creatable and not self._alias(entity_type, key):
                if key in known:
                    raise ManagementError(400, f"Cannot set attribute {key!r} in CREATE")
                raise ManagementError(
                    400, f"Unknown attribute {key!r} for type {entity_type.fully_qualified!r}")
        if name is not None and any(r.get("name") == name for r in self._rows(entity_type)):
            raise ManagementError(400, "Name conflicts with an existing entity")
        changed = self._source(entity_type).create(name, attributes)
        return Response(status=201, description="Created",
                        body=self._full(entity_type, changed.row), effects=changed.effects)

    @staticmethod
    def _alias(entity_type: EntityType, key: str) -> bool:
        """Deprecated attribute names the conf accepts are accepted by CREATE too
        (and ``fallback`` for an address, as qdrouterd's CREATE reads it)."""
        if entity_type.conf_name == "address" and key == "fallback":
            return True
        return Agent._replacement(entity_type, key) is not None

    @staticmethod
    def _replacement(entity_type: EntityType, key: str) -> str | None:
        """The attribute ``key`` is the deprecated conf name of, if any."""
        if entity_type.conf_name is None:
            return None
        cls = ENTITY_TYPES_BY_NAME[entity_type.conf_name].cls
        return next((f.schema.conf_name for f in schema_fields(cls)
                     if key in f.schema.aliases), None)

    def _update(self, entity_type: EntityType, row: Row, body: object) -> Response:
        attributes = self._attributes(body, "an UPDATE")
        attributes.pop("type", None)
        attributes.pop("identity", None)
        attributes.pop("name", None)
        by_name = {a.name: a for a in SCHEMA.attributes(entity_type)}
        for key in list(attributes):
            replacement = self._replacement(entity_type, key)
            if replacement is not None:  # a deprecated name, as the conf accepts
                if replacement in attributes:
                    raise ManagementError(
                        400, f"Both {key!r} and {replacement!r} given ({key!r} is the "
                             f"deprecated name of {replacement!r}; keep one)")
                attributes[replacement] = attributes.pop(key)
        for key, value in attributes.items():
            attribute = by_name.get(key)
            if attribute is None:
                raise ManagementError(
                    400, f"Unknown attribute {key!r} for type {entity_type.fully_qualified!r}")
            if not attribute.update and row.get(key) != value:
                raise ManagementError(400, f"Cannot update attribute {key!r} in UPDATE")
        changes = {k: v for k, v in attributes.items() if by_name[k].update}
        changed = self._source(entity_type).update(row, changes)
        return Response(status=200, description="OK", body=self._full(entity_type, changed.row),
                        effects=changed.effects)

    # -- the management node -----------------------------------------------------

    def _node_operation(self, operation: str, request: Request) -> Response:
        props = request.properties
        if operation not in SCHEMA.operations(_MANAGEMENT):
            raise ManagementError(
                501, f"Operation {operation!r} not implemented for {MANAGEMENT_TYPE!r}")
        selected: EntityType | None = None
        raw = props.get("entityType")
        if raw is not None:
            selected = self._type(_text(raw, "property 'entityType'"))
        if operation == "QUERY":
            return self._query(selected, props, request.body)
        if operation == "GET-TYPES":
            body: object = {t.fully_qualified: [b.fully_qualified for b in SCHEMA.bases(t)]
                            for t in self._matching(selected)}
        elif operation == "GET-OPERATIONS":
            body = {t.fully_qualified: SCHEMA.operations(t) for t in self._matching(selected)}
        elif operation == "GET-ATTRIBUTES":
            body = {t.fully_qualified: SCHEMA.attribute_names(t)
                    for t in self._matching(selected)}
        elif operation == "GET-ANNOTATIONS":
            body = {}
        elif operation == "GET-MGMT-NODES":
            body = self.mgmt_nodes()
        elif operation == "GET-SCHEMA":
            body = SCHEMA.describe()
        elif operation == "GET-JSON-SCHEMA":
            indent = props.get("indent")
            body = json.dumps(SCHEMA.describe(),
                              indent=_integer(indent, "property 'indent'", 0) or None)
        else:  # GET-LOG
            limit = _integer(props.get("limit"), "property 'limit'", _MAX_COUNT)
            records = list(self.log_records())
            body = records[-limit:] if limit else []
        return Response(status=200, description="OK", body=body)

    def _matching(self, selected: EntityType | None) -> list[EntityType]:
        return [t for t in SCHEMA if selected is None or SCHEMA.is_a(t, selected)]

    def _query(self, selected: EntityType | None, props: Mapping[str, object],
               body: object) -> Response:
        offset = _integer(props.get("offset"), "property 'offset'", 0)
        count = _integer(props.get("count"), "property 'count'", _MAX_COUNT)
        if body is not None and not isinstance(body, dict):
            raise ManagementError(400, f"Body of a QUERY request must be a map, got "
                                       f"{_kind(body)}")
        requested: Any = (body or {}).get("attributeNames")
        types = self._types_under(selected)
        if selected is None:
            types = [t for t in types if t.name not in _ASKED_BY_TYPE_ONLY]
        if requested is None or requested == []:
            names = self._default_names(selected, types)
            explicit = False
        else:
            if not isinstance(requested, list | tuple):
                raise ManagementError(400, "attributeNames must be a list")
            names = [_text(n, "an attribute name") for n in requested]
            explicit = True
            if selected is not None:
                known = set(SCHEMA.attribute_names(selected))
                for t in types:
                    known.update(SCHEMA.attribute_names(t))
                unknown = [n for n in names if n not in known]
                if unknown:
                    raise ManagementError(
                        404, f"Unknown attributes {unknown} for type "
                             f"{selected.fully_qualified}.")
        results: list[list[object]] = []
        for t in types:
            have = set(SCHEMA.attribute_names(t))
            for row in self._rows(t):
                full = self._full(t, row)
                values = [full.get(n) if n in have else None for n in names]
                if selected is None and not explicit and all(v is None for v in values):
                    continue
                results.append(values)
        return Response(status=200, description="OK",
                        body={"attributeNames": names, "results": results[offset:offset + count]})

    @staticmethod
    def _default_names(selected: EntityType | None, types: list[EntityType]) -> list[str]:
        if selected is not None and (selected in types or not types):
            return SCHEMA.attribute_names(selected)
        return _union(SCHEMA.attribute_names(t) for t in types)


def _union(lists: Iterable[list[str]]) -> list[str]:
    names: list[str] = []
    seen: set[str] = set()
    for items in lists:
        for name in items:
            if name not in seen:
                seen.add(name)
                names.append(name)
    return names
