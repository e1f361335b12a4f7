"""Run one of qpid-dispatch's system test modules, one JSON line per test.

``python3 driver.py MODULE OUT`` is started by ``python -m tests.compat`` in
the environment qpid-dispatch's harness expects (its ``tests/`` and
``python/`` on the path). It imports nothing of Hop. ``OUT`` gets a first
line ``{"total": N}`` and then ``{"test": id, "outcome": ...}`` as each test
ends, so a run cut short still tells what it reached.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
import unittest
from typing import Any, TextIO


class _Recorder(unittest.TextTestResult):
    """A verbose result that also writes each outcome to ``out``."""

    def __init__(self, out: TextIO, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._out = out
        self._started = time.monotonic()

    def _write(self, test: Any, outcome: str, detail: str = "") -> None:
        line = {"test": test.id(), "outcome": outcome,
                "seconds": round(time.monotonic() - self._started, 2)}
        if detail:
            line["detail"] = detail[-2000:]
        self._out.write(json.dumps(line) + "\n")
        self._out.flush()

    def startTest(self, test: Any) -> None:
        self._started = time.monotonic()
        super().startTest(test)

    def addSuccess(self, test: Any) -> None:
        super().addSuccess(test)
        self._write(test, "passed")

    def addFailure(self, test: Any, err: Any) -> None:
        super().addFailure(test, err)
        self._write(test, "failed", "".join(traceback.format_exception(*err)))

    def addError(self, test: Any, err: Any) -> None:
        super().addError(test, err)
        # A class or module set-up that fails reports itself here, once, and
        # its tests never start: they count as not run.
        self._write(test, "error", "".join(traceback.format_exception(*err)))

    def addSkip(self, test: Any, reason: str) -> None:
        super().addSkip(test, reason)
        self._write(test, "skipped", reason)

    def addExpectedFailure(self, test: Any, err: Any) -> None:
        super().addExpectedFailure(test, err)
        self._write(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test: Any) -> None:
        super().addUnexpectedSuccess(test)
        self._write(test, "failed", "unexpected success")


def main() -> int:
    module, out_path = sys.argv[1], sys.argv[2]
    suite = unittest.defaultTestLoader.loadTestsFromName(module)
    with open(out_path, "w", encoding="utf-8") as out:
        out.write(json.dumps({"total": suite.countTestCases()}) + "\n")
        out.flush()
        runner = unittest.TextTestRunner(
            verbosity=2, resultclass=lambda *a, **k: _Recorder(out, *a, **k))
        result = runner.run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
