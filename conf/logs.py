"""The ``log`` section: which levels of which module go where (docs/operations.md#logging).

Owns the log modules, the level names and the check of ``enable`` values.
It must not configure Python logging; ``router.cli`` does that from these
sections.
"""

from __future__ import annotations

import enum
import re

import attrs

from conf.fields import Section, setting
from conf.names import did_you_mean
from conf.types import BooleanType, EnumType, StringType

__all__ = [
    "DEFAULT_LOG_ENABLE",
    "DEFAULT_LOG_OUTPUT",
    "DEFAULT_LOG_SOURCE",
    "DEFAULT_LOG_TIMESTAMP",
    "LOG_LEVELS",
    "LogModule",
    "LogSection",
    "check_log_enable",
]

LOG_LEVELS = ("trace", "debug", "info", "notice", "warning", "error", "critical")

# What the DEFAULT module has, and so every module inherits, where no log
# section says otherwise.
DEFAULT_LOG_ENABLE = "info+"
DEFAULT_LOG_TIMESTAMP = True
DEFAULT_LOG_SOURCE = False
DEFAULT_LOG_OUTPUT = "stderr"


class LogModule(enum.Enum):
    """The configurable log sources (docs/operations.md#log-modules)."""

    ROUTER = "ROUTER"
    ROUTER_CORE = "ROUTER_CORE"
    ROUTER_HELLO = "ROUTER_HELLO"
    ROUTER_LS = "ROUTER_LS"
    ROUTER_MA = "ROUTER_MA"
    MESSAGE = "MESSAGE"
    SERVER = "SERVER"
    AGENT = "AGENT"
    AUTHSERVICE = "AUTHSERVICE"
    CONTAINER = "CONTAINER"
    ERROR = "ERROR"
    POLICY = "POLICY"
    HTTP = "HTTP"
    CONN_MGR = "CONN_MGR"
    PYTHON = "PYTHON"
    PROTOCOL = "PROTOCOL"
    TCP_ADAPTOR = "TCP_ADAPTOR"
    DEFAULT = "DEFAULT"


def _split_levels(text: str) -> list[str]:
    return [word for word in re.split(r"[,;:\s]+", text.strip()) if word]


def check_log_enable(text: str) -> str | None:
    """Check a log ``enable`` value (docs/operations.md#logging), returning why it is refused.

    Items are separated by commas, blanks, semicolons or colons; each is
    ``none`` (alone), a level name (that level only) or a level name followed
    by ``+`` (that level and all higher).  Level names are matched without
    regard to case but, unlike qdrouterd, must be spelled in full: qdrouterd
    takes any prefix (``warn`` for ``warning``), Hop refuses it and suggests
    the full name.
    """
    words = _split_levels(text)
    if not words:
        return "expected a list of log levels such as 'info+', got ''"
    for word in words:
        level = word.lower()
        if level == "none":
            if len(words) > 1:
                return "'none' cannot be combined with other log levels"
            continue
        if level.removesuffix("+") not in LOG_LEVELS:
            hint = did_you_mean(level.removesuffix("+"), LOG_LEVELS)
            return (
                f"{word!r} is not a log level; expected 'none' or one of "
                f"{', '.join(LOG_LEVELS)}, optionally followed by '+'{hint}"
            )
    return None


@attrs.frozen(kw_only=True)
class LogSection(Section):
    """A ``log`` section: settings of one log module (docs/operations.md#logging)."""

    name: str | None = attrs.field(
        default=None, metadata=setting("name", StringType(), "unique name of the section")
    )
    module: LogModule = attrs.field(
        metadata=setting("module", EnumType(LogModule), "the log source configured"),
    )
    enable: str | None = attrs.field(
        default=None,
        metadata=setting(
            "enable",
            StringType(
                "levels: none, or trace..critical each optionally followed by +", check_log_enable
            ),
            "levels logged, e.g. info+ or trace,debug",
            default_doc=f"inherited from DEFAULT ({DEFAULT_LOG_ENABLE})",
        ),
    )
    include_timestamp: bool | None = attrs.field(
        default=None,
        metadata=setting(
            "includeTimestamp",
            BooleanType(),
            "prefix lines with the time",
            aliases=("timestamp",),
            default_doc=f"inherited from DEFAULT ({BooleanType().format(DEFAULT_LOG_TIMESTAMP)})",
        ),
    )
    include_source: bool | None = attrs.field(
        default=None,
        metadata=setting(
            "includeSource",
            BooleanType(),
            "append the source file and line",
            aliases=("source",),
            default_doc=f"inherited from DEFAULT ({BooleanType().format(DEFAULT_LOG_SOURCE)})",
        ),
    )
    output_file: str | None = attrs.field(
        default=None,
        metadata=setting(
            "outputFile",
            StringType("string: stderr, stdout, syslog or a path"),
            "where lines go (files are appended to); syslog is the system log (facility "
            "daemon, without the router's timestamp; HOP_SYSLOG_SOCKET names a socket "
            "other than /dev/log)",
            aliases=("output",),
            default_doc=f"inherited from DEFAULT ({DEFAULT_LOG_OUTPUT})",
        ),
    )
