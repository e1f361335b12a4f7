"""The runner of qpid-dispatch's system tests: its driver, shim and tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.compat.runner import (
    FileResult,
    build_overlay,
    differences,
    qdrouterd_shim,
    read_outcomes,
    table,
)

DRIVER = Path(__file__).parents[2] / "compat" / "driver.py"

SAMPLE = '''\
import unittest


class Plain(unittest.TestCase):
    def test_passes(self):
        self.assertEqual(1, 1)

    def test_fails(self):
        self.assertEqual(1, 2)

    @unittest.skip("not here")
    def test_skipped(self):
        pass


class BrokenSetUp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise RuntimeError("no router")

    def test_never_runs(self):
        pass
'''


def test_the_driver_writes_one_line_per_test_and_marks_a_failed_set_up(tmp_path: Path) -> None:
    (tmp_path / "sample_tests.py").write_text(SAMPLE)
    out = tmp_path / "out.jsonl"
    done = subprocess.run([sys.executable, str(DRIVER), "sample_tests", str(out)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    lines = out.read_text().splitlines()
    assert json.loads(lines[0]) == {"total": 4}
    result = read_outcomes(lines)
    assert result.total == 4
    assert result.outcomes == {"sample_tests.Plain.test_passes": "passed",
                               "sample_tests.Plain.test_fails": "failed",
                               "sample_tests.Plain.test_skipped": "skipped"}
    assert result.setup_errors == ["setUpClass (sample_tests.BrokenSetUp)"]
    assert result.cell() == "1/3 (1 skipped)"


def test_a_truncated_last_line_is_ignored() -> None:
    lines = ['{"total": 2}', '{"test": "m.C.test_a", "outcome": "passed"}', '{"test": "m.C.te']
    result = read_outcomes(lines)
    assert result.outcomes == {"m.C.test_a": "passed"}
    result.cut = "stopped after 900 s"
    assert result.cell() == "1/2, stopped after 900 s"


def test_differences_are_the_tests_only_qdrouterd_passed() -> None:
    qdr = FileResult(total=3, outcomes={"m.C.a": "passed", "m.C.b": "passed", "m.C.c": "failed"})
    hop = FileResult(total=3, outcomes={"m.C.a": "passed", "m.C.c": "passed"})
    assert differences(qdr, hop) == ["m.C.b"]


def test_the_table_has_a_row_per_file_and_totals_without_skipped_tests() -> None:
    results = {
        "qdrouterd": {"one": FileResult(total=2, outcomes={"a": "passed", "b": "passed"}),
                      "two": FileResult(total=2, outcomes={"c": "passed", "d": "skipped"})},
        "hopd": {"one": FileResult(total=2, outcomes={"a": "passed", "b": "failed"})},
    }
    lines = table(results).splitlines()
    assert lines[0] == "| file | qdrouterd | hopd |"
    assert lines[2] == "| one | 2/2 | 1/2 |"
    assert lines[3] == "| two | 1/1 (1 skipped) | not run |"
    assert lines[4] == "| **total** | **3/3** | **1/2** |"


def test_the_shim_runs_hopd_with_qdrouterds_arguments(tmp_path: Path) -> None:
    shim = qdrouterd_shim(tmp_path) / "qdrouterd"
    conf = tmp_path / "bad.conf"
    conf.write_text("router {\n    mode: nowhere\n}\n")
    done = subprocess.run([str(shim), "-I", str(tmp_path), "-T", "-c", str(conf)],
                          env={**os.environ, "PYTHONPATH": "/nonexistent"},
                          capture_output=True, text=True, timeout=60)
    # hopd itself answered: its configuration error, with file and line.
    assert done.returncode == 1
    assert f"{conf}:2:" in done.stderr


def test_the_build_overlay_puts_the_shim_where_tests_start_qdrouterd_by_path(
        tmp_path: Path) -> None:
    build = tmp_path / "build"
    (build / "router").mkdir(parents=True)
    (build / "router" / "qdrouterd").write_text("the real one")
    (build / "router" / "other").write_text("kept")
    (build / "tests").mkdir()
    shim = qdrouterd_shim(tmp_path / "bin") / "qdrouterd"
    overlay = build_overlay(build, tmp_path / "overlay", shim)
    assert (overlay / "router" / "qdrouterd").resolve() == shim.resolve()
    assert (overlay / "router" / "other").read_text() == "kept"
    assert (overlay / "tests").resolve() == (build / "tests").resolve()
    assert (build / "router" / "qdrouterd").read_text() == "the real one"
    again = build_overlay(build, tmp_path / "overlay", shim)  # a second run starts afresh
    assert sorted(p.name for p in (again / "router").iterdir()) == ["other", "qdrouterd"]
