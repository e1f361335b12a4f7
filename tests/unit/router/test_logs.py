"""Log modules and levels: the names the conf declares, and what a module
logs when no log section says otherwise."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator

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
