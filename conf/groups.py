"""The settings of a vhost's user group, declared once (qdrouterd's ``vhostUserGroupSettings``).

Owns what a group of a vhost's ``groups`` map may set: each setting's name
as qdrouterd spells it, its type, default and description, and checking a
``groups`` map against them, so that a value of the wrong type is an error
at its position in the file, as for any attribute. A setting it does not
know is ignored with a warning (the nearest name suggested), as qdrouterd
ignores it.  A vhost keeps its groups as they were written
(management shows them so); ``user_groups`` types them for whoever applies
them.  Group settings are matched exactly as written, as qdrouterd does:
their names are not normalised.  It must not apply a policy.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Mapping
from typing import Any

import attrs

from conf.diagnostics import FILE_POSITION, ConfError, Diagnostic, Position
from conf.document import JsonValue, Node, ObjectValue, describe_kind, from_plain
from conf.fields import Section, schema_fields, setting
from conf.names import did_you_mean
from conf.types import (
    INT32_MAX,
    UINT32_MAX,
    BooleanType,
    EnumType,
    IntegerType,
    JsonMapType,
    NameListType,
    ValueTypeError,
)

__all__ = [
    "GROUPS_TYPE",
    "ManagementAccess",
    "UserGroupSection",
    "ignored_group_settings",
    "user_groups",
]


class ManagementAccess(enum.Enum):
    """Which management requests a group's users may make (a Hop setting)."""

    NONE = "none"
    READ = "read"
    WRITE = "write"


_NAMES = NameListType()
_CONNECTIONS = IntegerType(0, INT32_MAX)
_SIZE = IntegerType(0, UINT32_MAX)
_COUNT = IntegerType(0, UINT32_MAX)


@attrs.frozen(kw_only=True)
class UserGroupSection(Section):
    """One user group: the value of an entry of a vhost's ``groups`` map."""

    users: tuple[str, ...] | None = attrs.field(
        default=None,
        metadata=setting("users", _NAMES, "the group's users; a user is in one group of a vhost",
                         default_doc="none"),
    )
    remote_hosts: tuple[str, ...] | None = attrs.field(
        default=None,
        metadata=setting(
            "remoteHosts", _NAMES,
            "hosts the users may connect from: addresses, ranges low-high, CIDR networks, or *; "
            "empty: any host",
            default_doc="any host",
        ),
    )
    max_connections_per_user: int | None = attrs.field(
        default=None,
        metadata=setting("maxConnectionsPerUser", _CONNECTIONS,
                         "connections per user, instead of the vhost's limit",
                         default_doc="the vhost's"),
    )
    max_connections_per_host: int | None = attrs.field(
        default=None,
        metadata=setting("maxConnectionsPerHost", _CONNECTIONS,
                         "connections per remote host, instead of the vhost's limit",
                         default_doc="the vhost's"),
    )
    max_message_size: int | None = attrs.field(
        default=None,
        metadata=setting("maxMessageSize", _SIZE,
                         "largest message the users may send, in bytes; 0: no limit",
                         default_doc="the vhost's"),
    )
    max_frame_size: int | None = attrs.field(
        default=None,
        metadata=setting("maxFrameSize", _SIZE,
                         "max-frame-size of the router's OPEN to the users, in bytes (at least "
                         "512); 0: the listener's",
                         default_doc="the listener's"),
    )
    max_session_window: int | None = attrs.field(
        default=None,
        metadata=setting("maxSessionWindow", _SIZE,
                         "incoming window of each session, in bytes; 0: the listener's",
                         default_doc="the listener's"),
    )
    max_sessions: int | None = attrs.field(
        default=None,
        metadata=setting("maxSessions", _COUNT,
                         "sessions per connection (channel-max is one less), when fewer than "
                         "the listener's; 0: the listener's",
                         default_doc="the listener's"),
    )
    max_senders: int = attrs.field(
        default=INT32_MAX,
        metadata=setting("maxSenders", _COUNT, "sending links per connection; 0: no limit"),
    )
    max_receivers: int = attrs.field(
        default=INT32_MAX,
        metadata=setting("maxReceivers", _COUNT, "receiving links per connection; 0: no limit"),
    )
    allow_dynamic_source: bool = attrs.field(
        default=False,
        metadata=setting("allowDynamicSource", BooleanType(),
                         "receivers may ask for a dynamic source"),
    )
    allow_anonymous_sender: bool = attrs.field(
        default=False,
        metadata=setting("allowAnonymousSender", BooleanType(),
                         "senders may attach without a target address"),
    )
    allow_user_id_proxy: bool = attrs.field(
        default=False,
        metadata=setting("allowUserIdProxy", BooleanType(),
                         "messages may carry a user-id other than the connection's user"),
    )
    allow_waypoint_links: bool = attrs.field(
        default=True,
        metadata=setting("allowWaypointLinks", BooleanType(),
                         "links may claim the qd.waypoint capability"),
    )
    allow_fallback_links: bool = attrs.field(
        default=True,
        metadata=setting("allowFallbackLinks", BooleanType(),
                         "links may claim the qd.fallback capability"),
    )
    allow_dynamic_link_routes: bool = attrs.field(
        default=True,
        metadata=setting(
            "allowDynamicLinkRoutes", BooleanType(),
            "connections may create connection-scoped link routes (connection.linkRoute, "
            "how edge routers offer their brokers)",
        ),
    )
    allow_admin_status_update: bool = attrs.field(
        default=True,
        metadata=setting("allowAdminStatusUpdate", BooleanType(),
                         "users may close other connections through management"),
    )
    sources: tuple[str, ...] | None = attrs.field(
        default=None,
        metadata=setting("sources", _NAMES,
                         "addresses the users may receive from: names, prefix* and ${user} "
                         "(the user's name); empty: none",
                         default_doc="any address"),
    )
    targets: tuple[str, ...] | None = attrs.field(
        default=None,
        metadata=setting("targets", _NAMES,
                         "addresses the users may send to, as for sources; empty: none",
                         default_doc="any address"),
    )
    source_pattern: tuple[str, ...] | None = attrs.field(
        default=None,
        metadata=setting("sourcePattern", _NAMES,
                         "addresses the users may receive from, as address patterns ('.' or "
                         "'/' between tokens, '*' one token, '#' any number; ${user} as the "
                         "first or last token); instead of sources",
                         default_doc="any address"),
    )
    target_pattern: tuple[str, ...] | None = attrs.field(
        default=None,
        metadata=setting("targetPattern", _NAMES,
                         "addresses the users may send to, as for sourcePattern; instead of "
                         "targets",
                         default_doc="any address"),
    )
    management: ManagementAccess | None = attrs.field(
        default=None,
        metadata=setting(
            "management", EnumType(ManagementAccess),
            "management requests the users may make (a Hop setting): none, read (all but "
            "CREATE, UPDATE and DELETE) or write (by authenticated users only)",
            default_doc="as qdrouterd: every request, when targets allow $management",
        ),
    )


_SETTINGS = {field.schema.conf_name: field for field in schema_fields(UserGroupSection)}
_FIELDS = {field.field.name: field.schema.conf_name for field in _SETTINGS.values()}


def _group(name: str, node: Node,
           unknown: list[tuple[Position, str]] | None = None) -> UserGroupSection:
    """The group ``name`` written as ``node``. A setting it does not know is
    ignored, as qdrouterd ignores it, and told in ``unknown`` with the
    warning qdrouterd logs (and the nearest name).

    Raises:
        ValueTypeError: at the first setting that is given twice or of the
            wrong type (or at the group, when it is not a map).
    """
    if not isinstance(node.value, ObjectValue):
        raise ValueTypeError(
            f"group {name!r} must be a map of settings, got {describe_kind(node)}", node.pos)
    values: dict[str, Any] = {}  # typed by each setting's own type
    for key, value in node.value.members:
        assert isinstance(key.value, str)
        field = _SETTINGS.get(key.value)
        if field is None:
            if unknown is not None:
                hint = did_you_mean(key.value, _SETTINGS)
                unknown.append((key.pos, f"user group {name!r} option {key.value!r} is "
                                         f"ignored{hint}"))
            continue
        if field.field.name in values:
            raise ValueTypeError(f"setting {key.value!r} given twice in group {name!r}", key.pos)
        try:
            values[field.field.name] = field.schema.type.convert(value)
        except ValueTypeError as error:
            raise ValueTypeError(f"setting {key.value!r} in group {name!r}: {error.message}",
                                 error.pos or value.pos) from None
    _check_names(name, node, values)
    return UserGroupSection(**values)


USER_TOKEN = "${user}"
"""Stands for the connection's user in sources, targets and their patterns."""


def _check_names(name: str, node: Node, values: Mapping[str, Any]) -> None:
    """qdrouterd's rules for the address lists: a list or its pattern form,
    not both; ``${user}`` at most once in a name, and in a pattern only as
    its first or last token."""
    for names, patterns in (("sources", "source_pattern"), ("targets", "target_pattern")):
        if values.get(names) is not None and values.get(patterns) is not None:
            shown = _FIELDS[patterns]
            raise ValueTypeError(f"group {name!r} gives both {names!r} and {shown!r}; "
                                 "use only one", node.pos)
        for field in (names, patterns):
            for item in values.get(field) or ():
                if item.count(USER_TOKEN) > 1:
                    raise ValueTypeError(f"setting {_FIELDS[field]!r} in group {name!r}: "
                                         f"{item!r} gives {USER_TOKEN} more than once",
                                         node.pos)
                if field == patterns and USER_TOKEN in item and not (
                        item.startswith(USER_TOKEN) or item.endswith(USER_TOKEN)):
                    raise ValueTypeError(f"setting {_FIELDS[field]!r} in group {name!r}: "
                                         f"{item!r} may give {USER_TOKEN} only as a prefix "
                                         "or a suffix", node.pos)


def _check_group(name: str, node: Node) -> None:
    _group(name, node)


def _unknown_settings(name: str, node: Node) -> list[tuple[Position, str]]:
    unknown: list[tuple[Position, str]] = []
    with contextlib.suppress(ValueTypeError):  # reported by _check_group
        _group(name, node, unknown)
    return unknown


#: The type of a vhost's ``groups``: kept as written, each group checked.
GROUPS_TYPE = JsonMapType("JSON map: group name to the group's settings (see vhost groups)",
                          check_value=_check_group, warn_value=_unknown_settings)


def user_groups(groups: Mapping[str, JsonValue] | None) -> dict[str, UserGroupSection]:
    """A vhost's ``groups``, as written, typed by name.

    Raises:
        ConfError: a group that does not fit its declaration; the conf loader
            has checked the groups of every section it made.
    """
    typed = {}
    for name, settings in (groups or {}).items():
        try:
            typed[name] = _group(name, from_plain(settings, FILE_POSITION))
        except ValueTypeError as error:
            diagnostic = Diagnostic(filename="groups", line=0, column=0, message=error.message)
            raise ConfError([diagnostic]) from None
    return typed


def ignored_group_settings(settings: Mapping[str, object]) -> list[tuple[str, str]]:
    """The settings a written group gives that Hop accepts and does not apply,
    each with the reason, in declaration order."""
    return [(name, field.schema.ignored) for name, field in _SETTINGS.items()
            if field.schema.ignored is not None and name in settings]
