"""The ``hopmanage`` command: AMQP management operations on a running router, as qdmanage.

Owns the operations' command line (names, options, ``name=value``
attributes, ``--stdin``), qdmanage's short type names and the JSON output.
Every connection option and entity option may come before the operation or
after it, as with qdmanage; a value after the operation wins.  Talking to the
router is ``client``'s job; this module must not import ``router.adapter``
or ``router.cli``.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

import attrs
import click

import router
from router.tools.client import (
    DEFAULT_TIMEOUT_S,
    DEFAULT_URL,
    MANAGEMENT_TYPE,
    PREFIX,
    ManagementClient,
    ToolError,
)

F = TypeVar("F", bound=Callable[..., Any])

#: qdmanage's short names that do not simply take the prefix.
_SHORT_TYPES: Final = {
    "link": "router.link",
    "node": "router.node",
    "address": "router.config.address",
    "linkRoute": "router.config.linkRoute",
    "autoLink": "router.config.autoLink",
    "exchange": "router.config.exchange",
    "binding": "router.config.binding",
}
#: Attributes whose values are names, never JSON.
_TEXT_ATTRIBUTES: Final = frozenset({"name", "identity", "type"})


class InputError(ToolError):
    """Attributes given on standard input are not what the operation takes."""


def long_type(name: str | None) -> str | None:
    """The fully qualified entity type for ``name``: ``address`` →
    ``org.apache.qpid.dispatch.router.config.address``, ``connection`` →
    ``org.apache.qpid.dispatch.connection``; ``org.…`` names are kept."""
    if not name or name.startswith("org."):
        return name
    return PREFIX + _SHORT_TYPES.get(name, name)


def attribute_value(key: str, text: str) -> object:
    """The value of ``key=text``: JSON when it parses (``10``, ``true``,
    ``["a"]``, ``"quoted text"``), else the text itself; names stay text."""
    if key in _TEXT_ATTRIBUTES:
        return text
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return text


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a value")  # NaN, Infinity: keep them as text


def _attributes_argument(ctx: click.Context, param: click.Parameter,
                         items: Sequence[str]) -> dict[str, object]:
    return parse_attributes(items)


ATTRIBUTES: Final = click.argument("attributes", nargs=-1, metavar="[ATTR=VALUE]...",
                                   callback=_attributes_argument)


def parse_attributes(items: Sequence[str]) -> dict[str, object]:
    """``["prefix=a", "waypoint=true", "cost"]`` → ``{"prefix": "a", "waypoint": True,
    "cost": None}`` (a name without ``=`` stands for null, as qdmanage).

    Raises:
        click.BadParameter: an item has no attribute name.
    """
    attributes: dict[str, object] = {}
    for item in items:
        key, equals, text = item.partition("=")
        if not key:
            raise click.BadParameter(f"{item!r} has no attribute name", param_hint="ATTR=VALUE")
        attributes[key] = attribute_value(key, text) if equals else None
    return attributes


def plain(value: object) -> object:
    """``value`` with proton's AMQP types turned into JSON's (symbol and
    described values as text, binary as UTF-8 text)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return str(value)


def to_json(value: object, indent: int | None) -> str:
    """Pretty-printed JSON, keys in the router's order (as qdmanage prints
    them); ``indent`` -1 or None: one line."""
    return json.dumps(plain(value), indent=None if indent in (None, -1) else indent)


# -- options shared by the group and every operation ---------------------------


@attrs.frozen(kw_only=True)
class Settings:
    """The options in force for one operation."""

    bus: str = DEFAULT_URL
    router: str | None = None
    edge_router: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    type: str | None = None
    name: str | None = None
    identity: str | None = None
    indent: int = 2
    stdin: bool = False


_COMMON_OPTIONS: Final = (
    click.option("-b", "--bus", metavar="URL",
                 help=f"URL of the router to connect to; host:port is accepted "
                      f"(default {DEFAULT_URL})."),
    click.option("-r", "--router", metavar="ROUTER-ID",
                 help="Router to manage, through the one connected to "
                      "(default: the router connected to)."),
    click.option("-d", "--edge-router", metavar="EDGE-ROUTER-ID",
                 help="Edge router to manage, through the interior connected to."),
    click.option("-t", "--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True),
                 metavar="SECS",
                 help=f"Maximum time to wait for the connection and for the response, "
                      f"in seconds (default {DEFAULT_TIMEOUT_S:g})."),
    click.option("--type", metavar="TYPE",
                 help="Type of entity to operate on: a short name (address, listener, "
                      "connection...) or a fully qualified one."),
    click.option("--name", metavar="NAME", help="Name of the entity to operate on."),
    click.option("--identity", metavar="ID", help="Identity of the entity to operate on."),
    click.option("--indent", type=int, metavar="N",
                 help="Pretty-printing indent; -1: no pretty-printing (default 2)."),
    click.option("--stdin", is_flag=True, default=None,
                 help="Read the attributes as a JSON map (or, for create, a list of maps) "
                      "from standard input."),
)
_SETTING_NAMES: Final = tuple(f.name for f in attrs.fields(Settings))


def common_options(command: F) -> F:
    for option in reversed(_COMMON_OPTIONS):
        command = option(command)
    return command


def settings(ctx: click.Context) -> Settings:
    """The options of the operation's context over those of the group's."""
    given: dict[str, Any] = {}
    for context in (ctx.parent, ctx):
        if context is None:
            continue
        for key in _SETTING_NAMES:
            value = context.params.get(key)
            if value is not None:
                given[key] = value
    return Settings(**given)


def operation(command: Callable[..., None]) -> Callable[..., None]:
    """Pass the operation the client and its settings; report a failure on
    one line (``hopmanage: 404: No entity with name=x``) and exit 1."""

    @functools.wraps(command)
    def run(**params: Any) -> None:
        ctx = click.get_current_context()
        chosen = settings(ctx)
        for key in _SETTING_NAMES:
            params.pop(key, None)
        try:
            with ManagementClient(chosen.bus, router=chosen.router, edge=chosen.edge_router,
                                  timeout_s=chosen.timeout_s) as client:
                command(client, chosen, **params)
        except ToolError as exc:
            click.echo(f"hopmanage: {exc}", err=True)
            sys.exit(1)

    return run


def emit(value: object, chosen: Settings) -> None:
    click.echo(to_json(value, chosen.indent))


def bulk(chosen: Settings, attributes: dict[str, object]) -> list[dict[str, object]] | None:
    """The attribute maps from standard input with ``--stdin`` (None for a single
    map), else ``attributes`` alone."""
    if not chosen.stdin:
        return None
    try:
        data = json.load(sys.stdin)
    except ValueError as exc:
        raise InputError(f"standard input is not JSON: {exc}") from None
    if isinstance(data, dict):
        attributes.update(data)
        return None
    if isinstance(data, list) and all(isinstance(d, dict) for d in data):
        return data
    raise InputError("standard input must hold a JSON map or a list of maps")


# -- the operations ------------------------------------------------------------


class _Operations(click.Group):
    """Operation names in any case: ``QUERY`` is ``query``, as with qdmanage."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, cmd_name.lower())


@click.group(cls=_Operations, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Exit status: 0 on success, 1 when the router cannot be reached or "
                    "refuses the request (hopmanage: STATUS: DESCRIPTION on standard "
                    "error), 2 for bad options.")
@common_options
@click.version_option(router.__version__, prog_name="hopmanage")
def hopmanage(**_: Any) -> None:
    """Manage a running Hop router (or qdrouterd) over AMQP management, as qdmanage does.

    Attributes are given as NAME=VALUE; a VALUE that parses as JSON (10, true,
    ["a","b"], "text") is sent as that value, any other as text.
    """


@hopmanage.command()
@common_options
@click.option("--attribute", "attribute_options", multiple=True, metavar="ATTR",
              help="An attribute to show (repeatable); the same as the ATTR arguments.")
@click.argument("attribute_names", nargs=-1, metavar="[ATTR]...")
@operation
def query(client: ManagementClient, chosen: Settings, attribute_options: tuple[str, ...],
          attribute_names: tuple[str, ...]) -> None:
    """Print entities as a JSON list of maps.

    The entities of --type (every type without it), with the attributes named
    (all of them without any); null values are left out.
    """
    rows = client.query(long_type(chosen.type), [*attribute_options, *attribute_names])
    emit([{k: v for k, v in row.items() if v is not None} for row in rows], chosen)


def _create_one(client: ManagementClient, chosen: Settings,
                attributes: dict[str, object]) -> object:
    attributes = dict(attributes)
    entity_type = long_type(chosen.type or _text(attributes.get("type")))
    if entity_type is not None and "type" in attributes:
        attributes["type"] = entity_type
    name = chosen.name or _text(attributes.get("name"))
    return client.call("CREATE", attributes, type=entity_type, name=name)


def _text(value: object) -> str | None:
    return None if value is None else str(value)


@hopmanage.command()
@common_options
@ATTRIBUTES
@operation
def create(client: ManagementClient, chosen: Settings, attributes: dict[str, object]) -> None:
    """Create an entity and print it.

    The entity is of --type and called --name; both may be given as type= and
    name= instead.  With --stdin, a list of maps creates one entity per map.
    """
    given = dict(attributes)
    many = bulk(chosen, given)
    if many is None:
        emit(_create_one(client, chosen, given), chosen)
    else:
        emit([_create_one(client, chosen, {**given, **one}) for one in many], chosen)


@hopmanage.command()
@common_options
@operation
def read(client: ManagementClient, chosen: Settings) -> None:
    """Print the attributes of one entity.

    The entity is selected by --identity or --name (and --type).
    """
    identity = chosen.identity
    emit(client.call("READ", type=long_type(chosen.type),
                     name=None if identity else chosen.name, identity=identity), chosen)


@hopmanage.command()
@common_options
@ATTRIBUTES
@operation
def update(client: ManagementClient, chosen: Settings, attributes: dict[str, object]) -> None:
    """Change attributes of one entity and print it.

    The entity is selected by --identity or --name (and --type).
    """
    given = dict(attributes)
    if bulk(chosen, given) is not None:
        raise InputError("update takes one JSON map on standard input")
    entity_type = long_type(chosen.type or _text(given.get("type")))
    identity = chosen.identity or _text(given.get("identity"))
    name = None if identity else chosen.name or _text(given.get("name"))
    emit(client.call("UPDATE", given, type=entity_type, name=name, identity=identity), chosen)


@hopmanage.command()
@common_options
@operation
def delete(client: ManagementClient, chosen: Settings) -> None:
    """Delete one entity.

    The entity is selected by --identity or --name (and --type); nothing is
    printed.
    """
    identity = chosen.identity
    client.call("DELETE", type=long_type(chosen.type),
                name=None if identity else chosen.name, identity=identity)


def _node_operation(op: str, summary: str) -> None:
    """A management-node operation on the entity type given by --type or TYPE."""

    @hopmanage.command(name=op.lower(), help=f"{summary}\n\nOnly TYPE (or --type) and the "
                                             "types extending it, when given.")
    @common_options
    @click.argument("type_name", required=False, metavar="[TYPE]")
    @operation
    def command(client: ManagementClient, chosen: Settings, type_name: str | None) -> None:
        entity_type = long_type(chosen.type or type_name)
        emit(client.node_call(op, entityType=entity_type), chosen)


_node_operation("GET-TYPES", "List entity types with their base types.")
_node_operation("GET-ATTRIBUTES", "List entity types with their attribute names.")
_node_operation("GET-OPERATIONS", "List entity types with their operations.")
_node_operation("GET-ANNOTATIONS", "List entity types with their annotations.")


@hopmanage.command(name="get-mgmt-nodes")
@common_options
@operation
def get_mgmt_nodes(client: ManagementClient, chosen: Settings) -> None:
    """List the other routers' management nodes."""
    emit(client.node_call("GET-MGMT-NODES"), chosen)


@hopmanage.command(name="get-schema")
@common_options
@operation
def get_schema(client: ManagementClient, chosen: Settings) -> None:
    """Print the management schema.

    Every entity type with its attributes (type, default, whether CREATE and
    UPDATE take it) and operations.
    """
    emit(client.node_call("GET-SCHEMA"), chosen)


@hopmanage.command(name="get-log")
@common_options
@click.option("--limit", type=click.IntRange(min=0), metavar="N",
              help="Only the N most recent records.")
@operation
def get_log(client: ManagementClient, chosen: Settings, limit: int | None) -> None:
    """Print recent log records.

    Each record is [module, level, text, source file, source line, time in
    seconds since the epoch], oldest first.
    """
    emit(client.call("GET-LOG", type=MANAGEMENT_TYPE, name="self", limit=limit), chosen)


def main() -> None:
    """The ``hopmanage`` console script."""
    hopmanage(prog_name="hopmanage")


if __name__ == "__main__":
    main()
