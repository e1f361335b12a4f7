"""Log modules and levels: the names the conf declares, and what a module
logs when no log section says otherwise."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import conf
from router import logs


@pytest.fixture
def root_handlers() -> Iterator[list[logging.Handler]]:
    """The root logger's handlers while ``logs.configure`` runs, the test's
    own handlers (pytest's) set aside and put back after."""
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    for handler in saved:
        root.removeHandler(handler)
    try:
        yield root.handlers
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved:
            root.addHandler(handler)
        root.setLevel(level)


def record(level: int, name: str = "router.core.policy") -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, "text", None, None)


def test_every_module_and_level_the_conf_accepts_is_known() -> None:
    assert tuple(module.value for module in conf.LogModule) == logs.MODULES
    for name in conf.LOG_LEVELS:
        assert logs.parse_enable(name + "+")
    assert set(logs.RECORDER.counts) == set(logs.MODULES)


def test_without_log_sections_modules_log_as_the_conf_says_default_does(
        root_handlers: list[logging.Handler]) -> None:
    logs.configure([])
    [handler] = [h for h in root_handlers if h is not logs.RECORDER]
    assert isinstance(handler, logging.StreamHandler)
    assert conf.DEFAULT_LOG_OUTPUT == "stderr" and handler.stream is sys.stderr
    formatter = handler.formatter
    assert isinstance(formatter, logs.QdFormatter)
    assert (formatter.timestamp, formatter.source) == (conf.DEFAULT_LOG_TIMESTAMP,
                                                       conf.DEFAULT_LOG_SOURCE)
    enabled = logs.parse_enable(conf.DEFAULT_LOG_ENABLE)
    for level in logs.LEVELS.values():
        assert bool(handler.filter(record(level))) is (level in enabled)


def _loggers_in(module: str) -> set[str]:
    """The loggers a module makes: its own (``__name__``) and its children."""
    import importlib.util
    import re
    from pathlib import Path

    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    origin = Path(spec.origin)
    if origin.name == "__init__.py":
        return {module}
    text = origin.with_name(module.rpartition(".")[2] + ".py").read_text()  # compiled or not
    found = {module} if "getLogger(__name__)" in text else set()
    found.update(f"{module}.{child}" for child in re.findall(r'getChild\("(\w+)"\)', text))
    return found


def test_the_module_map_names_only_loggers_that_exist() -> None:
    """Every logger prefix of a qdrouterd module is a package, or a module
    that logs under that name (its own logger or a child of it)."""
    import importlib.util

    from router.logs import MODULE_LOGGERS

    def is_module(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a child of a module, not of a package
            return False

    for module, prefixes in MODULE_LOGGERS.items():
        for prefix in prefixes:
            if is_module(prefix):
                assert prefix in _loggers_in(prefix), f"{module}: {prefix} logs nothing"
                continue
            parent = prefix.rpartition(".")[0]
            assert prefix in _loggers_in(parent), f"{module}: no logger {prefix}"


def test_every_logger_is_named_after_its_module() -> None:
    """No module names its logger with a literal that could drift from its name."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    for package in ("router", "addressing", "linkroute", "autolink", "conf", "spark"):
        for path in (root / package).rglob("*.py"):
            text = path.read_text()
            literal = re.search(r'getLogger\("([\w.]+)"\)', text)
            assert literal is None, f"{path.relative_to(root)}: getLogger({literal.group(1)!r})"


def test_the_system_log_gets_each_level_at_its_priority_as_daemon(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from router.logs import SYSLOG_MAX_BYTES, SyslogHandler

    # Named as syslog(3) names it: the program's name, whatever it was started as.
    monkeypatch.setattr(sys, "argv", ["/usr/sbin/qdrouterd", "-c", "x.conf"])
    assert SyslogHandler(str(tmp_path / "none")).ident == "qdrouterd: "
    monkeypatch.setattr(sys, "argv", ["/usr/sbin/hopd"])
    address = str(tmp_path / "log")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as syslog:
        syslog.bind(address)
        syslog.settimeout(5)
        handler = SyslogHandler(address)
        handler.setFormatter(logs.QdFormatter(timestamp=False, source=False))
        try:
            got = []
            for level in logs.LEVELS.values():
                record = logging.LogRecord("router.core", level, __file__, 1, "m", None, None)
                handler.emit(record)
                got.append(syslog.recv(65536).split(b":", 1)[0])
            # daemon (3 * 8) plus debug 7, debug, info 6, notice 5, warning 4, err 3, crit 2
            assert got == [f"<{24 + p}>hopd".encode() for p in (7, 7, 6, 5, 4, 3, 2)]
            long = logging.LogRecord("router.core", logging.INFO, __file__, 1, "é" * 9000,
                                     None, None)
            handler.emit(long)
            text = syslog.recv(65536).decode()
            assert text.endswith(" [cut]")
            assert len(text.removeprefix("<30>hopd: ").encode()) <= SYSLOG_MAX_BYTES + 6
        finally:
            handler.close()
