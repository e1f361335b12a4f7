"""Log modules, levels and the qdrouterd-like line format.

Owns the mapping between qdrouterd's log modules (``SERVER``, ``ROUTER_CORE``
...) and Hop's Python loggers (named after their modules), the extra levels
``trace`` and ``notice``, the enable masks (``info+``, ``trace,debug``) and
the handlers.  Only ``router.cli`` calls ``configure``; every other module
just logs through ``logging.getLogger(__name__)``.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Final, TextIO

import attrs

import conf

TRACE = 5
NOTICE = 25
logging.addLevelName(TRACE, "TRACE")
logging.addLevelName(NOTICE, "NOTICE")

# The conf names the levels, lowest first; these are their Python levels.
LEVELS: dict[str, int] = dict(zip(conf.LOG_LEVELS, (
    TRACE, logging.DEBUG, logging.INFO, NOTICE, logging.WARNING, logging.ERROR,
    logging.CRITICAL), strict=True))
_NAMES = {v: k for k, v in LEVELS.items()}

# Which Python loggers each qdrouterd module covers (longest prefix wins).
MODULE_LOGGERS: dict[str, tuple[str, ...]] = {
    "ROUTER": ("router", "router.adapter.endpoints.opening.router", "router.assembly.router"),
    "ROUTER_CORE": ("router.core", "router.adapter.events", "router.adapter.endpoints.lifecycle",
                    "router.adapter.endpoints.attaching",
                    "router.adapter.endpoints.ownlinks", "router.adapter.endpoints.opening",
                    "router.adapter.endpoints.termini", "router.adapter.forwarding.forwarder",
                    "router.adapter.forwarding.redelivery",
                    "router.adapter.sweep", "autolink", "linkroute"),
    "ROUTER_HELLO": ("router.core.routing.hello",),
    "ROUTER_LS": ("router.core.routing.linkstate",),
    "ROUTER_MA": ("router.core.routing.mobile",),
    "SERVER": ("router.adapter.connections.transports", "router.adapter.connections.listeners",
               "router.adapter.connections.connectors", "router.adapter.connections.certificates",
               "router.adapter.engine", "router.adapter.endpoints.opening.server",
               "router.assembly", "router.cli"),
    "AGENT": ("router.adapter.admin.node", "router.management"),
    "POLICY": ("router.adapter.endpoints.attaching.policy",
               "router.adapter.endpoints.opening.policy",
               "router.adapter.endpoints.lifecycle.policy",
               "router.adapter.connections.listeners.policy",
               "router.adapter.admin.entities.policy"),
    "PROTOCOL": ("router.adapter.connections.tracing",),
    "MESSAGE": ("router.adapter.forwarding.message_log",),
    "AUTHSERVICE": ("router.adapter.connections.authservice",
                    "router.adapter.connections.saslplugin"),
    "TCP_ADAPTOR": ("router.adapter.tcp",),
    "DEFAULT": ("addressing", "conf"),
}
MODULES = tuple(module.value for module in conf.LogModule)
_PREFIXES = sorted(((p, m) for m, ps in MODULE_LOGGERS.items() for p in ps),
                   key=lambda pm: -len(pm[0]))


def module_of(logger_name: str) -> str:
    """The qdrouterd module a Python logger belongs to."""
    for prefix, module in _PREFIXES:
        if logger_name == prefix or logger_name.startswith(prefix + "."):
            return module
    return "DEFAULT"


def parse_enable(text: str) -> frozenset[int]:
    """The set of levels an ``enable`` string turns on (docs/operations.md#logging).

    Raises:
        ValueError: for an unknown level name.
    """
    levels: set[int] = set()
    for word in text.replace(",", " ").replace(";", " ").replace(":", " ").split():
        word = word.lower()
        plus = word.endswith("+")
        name = word.rstrip("+")
        if name == "none":
            continue
        if name not in LEVELS:
            raise ValueError(f"'{word}' is not a valid log level; expected one of "
                             f"none, {', '.join(LEVELS)}")
        level = LEVELS[name]
        levels.update(v for v in LEVELS.values() if v >= level) if plus else levels.add(level)
    return frozenset(levels)


@attrs.frozen(kw_only=True)
class LogSpec:
    """One ``log`` section: ``None`` fields inherit from ``DEFAULT``."""

    module: str
    enable: str | None = None
    include_timestamp: bool | None = None
    include_source: bool | None = None
    output: str | None = None


@attrs.frozen
class _Effective:
    levels: frozenset[int]
    timestamp: bool
    source: bool
    output: str


class QdFormatter(logging.Formatter):
    """``[timestamp ]MODULE (level) text[ (file:line)]``."""

    def __init__(self, timestamp: bool, source: bool) -> None:
        super().__init__()
        self.timestamp = timestamp
        self.source = source

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text = f"{text}\n{self.formatException(record.exc_info)}"
        module = getattr(record, "qd_module", None) or module_of(record.name)
        level = _NAMES.get(record.levelno, record.levelname.lower())
        line = f"{module} ({level}) {text}"
        if self.source:
            line = f"{line} ({record.filename}:{record.lineno})"
        if self.timestamp:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created))
            usec = int((record.created % 1) * 1_000_000)
            zone = time.strftime("%z", time.localtime(record.created))
            line = f"{stamp}.{usec:06d} {zone} {line}"
        return line


class _ModuleFilter(logging.Filter):
    def __init__(self, masks: dict[str, frozenset[int]]) -> None:
        super().__init__()
        self.masks = masks

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "qd_forced", False):
            return True  # a connection's own protocol trace (enableProtocolTrace)
        module = getattr(record, "qd_module", None) or module_of(record.name)
        return record.levelno in self.masks.get(module, self.masks["DEFAULT"])


#: ``outputFile: syslog`` sends each record to the system log's socket, as
#: syslog(3) does; this variable names another socket (a container's, a test's).
SYSLOG_SOCKET_ENV = "HOP_SYSLOG_SOCKET"
SYSLOG_SOCKET = "/dev/log"
#: A record longer than this is cut there (a datagram has a size limit, and
#: rsyslog's default for a message is 8 KiB).
SYSLOG_MAX_BYTES = 8192


def _program() -> str:
    """The name the system log shows, as syslog(3) takes it: the program's."""
    name = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "hopd" if not name or name.endswith(".py") or name == "-c" else name


_SYSLOG_PRIORITIES: Final = {"TRACE": "debug", "DEBUG": "debug", "INFO": "info",
                              "NOTICE": "notice", "WARNING": "warning", "ERROR": "err",
                              "CRITICAL": "crit"}


class SyslogHandler(logging.handlers.SysLogHandler):
    """``outputFile: syslog``: facility ``daemon``, as qdrouterd's; each level
    at its syslog priority (trace, which syslog lacks, as debug); no
    timestamp (the system log stamps each message itself).

    As syslog(3), a system log that is not there yet (or goes away) is
    tried again with each record, and the records meant for it meanwhile
    are dropped; this says so once on stderr each time, not a traceback a
    record, and once more when it is back."""

    def __init__(self, address: str) -> None:
        super().__init__(address=address, facility=logging.handlers.SysLogHandler.LOG_DAEMON)
        self.ident = f"{_program()}: "
        self.append_nul = False  # syslog(3) sends none
        self._down = False
        self._failed = False
        problem = _unreachable(address)  # the base class keeps no reason
        if problem is not None:
            self._went_down(problem)

    def mapPriority(self, levelName: str) -> str:
        return _SYSLOG_PRIORITIES.get(levelName, "warning")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        raw = text.encode("utf-8")
        if len(raw) > SYSLOG_MAX_BYTES:
            text = raw[:SYSLOG_MAX_BYTES].decode("utf-8", "ignore") + " [cut]"
        return text

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
        super().emit(record)
        if self._down and not self._failed:
            self._down = False
            sys.stderr.write(f"hopd: the system log at {self.address} is back\n")

    def handleError(self, record: logging.LogRecord) -> None:
        self._failed = True
        if not self._down:
            self._went_down(sys.exc_info()[1])

    def _went_down(self, exc: BaseException | None) -> None:
        self._down = True
        why = getattr(exc, "strerror", None) or exc
        sys.stderr.write(f"hopd: cannot reach the system log at {self.address}: {why}; "
                         "the records meant for it are dropped until it is back\n")


def _unreachable(address: str) -> OSError | None:
    """Why nothing listens on the Unix socket ``address`` (None: something does)."""
    problem: OSError | None = None
    for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
        with socket.socket(socket.AF_UNIX, kind) as probe:
            try:
                probe.connect(address)
                return None
            except OSError as exc:
                problem = problem or exc
    return problem


def _open(output: str) -> logging.Handler:
    if output == "stderr":
        return logging.StreamHandler(sys.stderr)
    if output == "syslog":
        return SyslogHandler(os.environ.get(SYSLOG_SOCKET_ENV) or SYSLOG_SOCKET)
    if output == "stdout":
        stream: TextIO = sys.stdout
        return logging.StreamHandler(stream)
    return logging.FileHandler(output, mode="a", encoding="utf-8")


class Recorder(logging.Handler):
    """Keeps the last records for management's GET-LOG and counts records per
    module and level for ``logStats`` (docs/operations.md#logging)."""

    def __init__(self, size: int = 1000) -> None:
        super().__init__(level=1)
        self.records: deque[list[object]] = deque(maxlen=size)
        self.counts: dict[str, dict[str, int]] = {m: dict.fromkeys(LEVELS, 0) for m in MODULES}

    def emit(self, record: logging.LogRecord) -> None:
        module = getattr(record, "qd_module", None) or module_of(record.name)
        level = _NAMES.get(record.levelno, "info")
        counts = self.counts.get(module)
        if counts is not None:
            counts[level] += 1
        self.records.append([module, level, record.getMessage(), record.filename,
                             record.lineno, record.created])


RECORDER = Recorder()
_current: dict[str, LogSpec] = {}
#: Called after each change of settings (``configure``), by owner: the
#: adapter turns frame tracing on or off as the PROTOCOL module's level says.
_CHANGED: dict[int, Callable[[], None]] = {}


def on_change(owner: object, callback: Callable[[], None]) -> None:
    """Call ``callback`` after every change of the settings, until ``forget(owner)``."""
    _CHANGED[id(owner)] = callback


def forget(owner: object) -> None:
    """Stop calling what ``owner`` registered (a router that stopped)."""
    _CHANGED.pop(id(owner), None)
_levels: dict[str, frozenset[int]] = {}


def enabled(module: str, level: int) -> bool:
    """Whether ``module`` (a qdrouterd module name) logs at ``level`` now."""
    return level in _levels.get(module, frozenset())


def current() -> dict[str, LogSpec]:
    """The ``log`` settings in force, by module (modules never configured are absent)."""
    return dict(_current)


def update(spec: LogSpec) -> None:
    """Change one module's settings at run time (management UPDATE of ``log``).

    Raises:
        ValueError: bad ``enable`` text; the settings in force are kept.
        OSError: the output file cannot be opened; the settings are kept.
    """
    specs = dict(_current)
    specs[spec.module] = spec
    configure(specs.values())


def reopen() -> None:
    """Close and open again every log file (SIGHUP, after logrotate moved them).

    Raises:
        OSError: a file cannot be opened; the handlers in force are kept.
    """
    configure(_current.values())


def configure(specs: Iterable[LogSpec]) -> None:
    """Install handlers for the given ``log`` sections (replacing earlier ones).

    Raises:
        ValueError: bad ``enable`` text.
        OSError: an output file cannot be opened.
    """
    by_module = {s.module: s for s in specs}
    default = by_module.get("DEFAULT", LogSpec(module="DEFAULT"))
    d = _Effective(
        levels=parse_enable(conf.DEFAULT_LOG_ENABLE if default.enable is None
                            else default.enable),
        timestamp=conf.DEFAULT_LOG_TIMESTAMP if default.include_timestamp is None
        else default.include_timestamp,
        source=conf.DEFAULT_LOG_SOURCE if default.include_source is None
        else default.include_source,
        output=default.output or conf.DEFAULT_LOG_OUTPUT,
    )
    effective: dict[str, _Effective] = {}
    for module in MODULES:
        s = by_module.get(module)
        if s is None or module == "DEFAULT":
            effective[module] = d
            continue
        effective[module] = _Effective(
            levels=parse_enable(s.enable) if s.enable is not None else d.levels,
            timestamp=s.include_timestamp if s.include_timestamp is not None else d.timestamp,
            source=s.include_source if s.include_source is not None else d.source,
            output=s.output or d.output,
        )
    groups: dict[tuple[str, bool, bool], dict[str, frozenset[int]]] = {}
    for module, eff in effective.items():
        # The system log stamps each message: no timestamp of our own, as qdrouterd.
        timestamp = eff.timestamp and eff.output != "syslog"
        groups.setdefault((eff.output, timestamp, eff.source), {})[module] = eff.levels
    handlers: list[logging.Handler] = []
    for (output, timestamp, source), masks in groups.items():
        full = {m: masks.get(m, frozenset()) for m in MODULES}
        handler = _open(output)
        handler.setFormatter(QdFormatter(timestamp, source))
        handler.addFilter(_ModuleFilter(full))
        handlers.append(handler)
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        if handler is not RECORDER:
            handler.close()
    _current.clear()
    _current.update(by_module)
    _levels.clear()
    _levels.update({module: eff.levels for module, eff in effective.items()})
    root.addHandler(RECORDER)
    for handler in handlers:
        root.addHandler(handler)
    lowest = min((min(e.levels) for e in effective.values() if e.levels), default=logging.CRITICAL)
    root.setLevel(lowest)
    for changed in list(_CHANGED.values()):
        changed()
