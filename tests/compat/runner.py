"""Run qpid-dispatch's system tests with hopd in place of qdrouterd.

    python -m tests.compat --src QPID_DISPATCH_SRC --build QPID_DISPATCH_BUILD \
        [--files one_router,two_routers] [--router hopd|qdrouterd|both] [--out DIR]

Each chosen ``tests/system_tests_<name>.py`` of the tree runs under the
tree's own harness (``system_test.py``) with a ``qdrouterd`` first on PATH
that starts ``hopd`` with the same arguments (``--router qdrouterd`` runs the
build's own qdrouterd instead, for the other column). Outcomes are kept per
router and file under ``--out``, so a later run of some files keeps the
others; ``table.md`` is the per-file table and ``differences.md`` lists the
tests that pass on qdrouterd and not on hopd. See
docs/compatibility.md#qdrouterds-own-system-tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROUTERS = ("qdrouterd", "hopd")

#: Newer python-qpid-proton prints a delivery state as its number where the
#: suite compares it with a name ("ACCEPTED"); every Python program of the
#: harness (not hopd, not the Python qdrouterd embeds, which has no argv and
#: must not import proton) gets the name back.
SITECUSTOMIZE = '''\
import sys
if getattr(sys, "argv", None) and sys.argv[0]:
    try:
        from proton._delivery import DispositionType
        DispositionType.__str__ = lambda self: self.name
    except Exception:
        pass
    try:
        # The suite's authservice.py sets the SASL configuration of every
        # transport with pn_sasl_config_path(None, path), which the binding
        # since 0.39 refuses (it wants a pointer, not None).
        import cproton
        from cproton_ffi import ffi as _ffi, lib as _lib
        _config_path = cproton.pn_sasl_config_path

        def _pn_sasl_config_path(sasl, path):
            if sasl is None:
                _lib.pn_sasl_config_path(_ffi.NULL, path.encode())
            else:
                _config_path(sasl, path)

        cproton.pn_sasl_config_path = _pn_sasl_config_path
    except Exception:
        pass
'''


@dataclass
class FileResult:
    """One file's outcomes on one router."""

    total: int = 0
    outcomes: dict[str, str] = field(default_factory=dict)
    #: Set-up errors (``setUpClass``...), which stop a class's tests.
    setup_errors: list[str] = field(default_factory=list)
    #: Why the run ended early, if it did.
    cut: str = ""
    seconds: float = 0.0

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)

    @property
    def passed(self) -> int:
        return self.count("passed")

    @property
    def skipped(self) -> int:
        return self.count("skipped")

    def cell(self) -> str:
        """``passed/run`` where ``run`` leaves out skipped tests."""
        text = f"{self.passed}/{self.total - self.skipped}"
        if self.skipped:
            text += f" ({self.skipped} skipped)"
        if self.cut:
            text += f", {self.cut}"
        return text


def read_outcomes(lines: list[str]) -> FileResult:
    """The driver's JSON lines as a ``FileResult`` (a truncated last line is ignored)."""
    result = FileResult()
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "total" in record:
            result.total = int(record["total"])
            continue
        test, outcome = record["test"], record["outcome"]
        if " (" in test:  # "setUpClass (module.Class)": not a test
            result.setup_errors.append(test)
            continue
        result.outcomes[test] = outcome
    return result


def differences(qdr: FileResult, hop: FileResult) -> list[str]:
    """Tests that passed on qdrouterd and did not pass on hopd, sorted."""
    return sorted(t for t, o in qdr.outcomes.items()
                  if o == "passed" and hop.outcomes.get(t) != "passed")


def table(results: dict[str, dict[str, FileResult]]) -> str:
    """A markdown table: one row per file, a column per router, then totals."""
    files = sorted({f for per in results.values() for f in per})
    routers = [r for r in ROUTERS if r in results]
    rows = ["| file | " + " | ".join(routers) + " |",
            "|---|" + "---|" * len(routers)]
    totals = dict.fromkeys(routers, (0, 0))
    for name in files:
        cells = []
        for r in routers:
            got = results[r].get(name)
            if got is None:
                cells.append("not run")
                continue
            passed, run = totals[r]
            totals[r] = (passed + got.passed, run + got.total - got.skipped)
            cells.append(got.cell())
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    rows.append("| **total** | " + " | ".join(
        f"**{p}/{n}**" for p, n in (totals[r] for r in routers)) + " |")
    return "\n".join(rows) + "\n"


#: The Hop checkout this runner belongs to: the hopd it runs.
HOP_ROOT = Path(__file__).resolve().parents[2]


def qdrouterd_shim(folder: Path, hop: Path = HOP_ROOT) -> Path:
    """A ``qdrouterd`` that runs the hopd of checkout ``hop`` with this Python
    and the same arguments (hopd accepts qdrouterd's ``-I`` and ``-T``), on
    a PYTHONPATH of its own instead of the harness's: hopd as a user who
    swaps the program starts it, with no option of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "qdrouterd"
    shim.write_text(f"#!/bin/sh\nPYTHONPATH='{hop}'\nexport PYTHONPATH\n"
                    f"exec '{sys.executable}' -m router \"$@\"\n")
    shim.chmod(0o755)
    return folder


def build_overlay(build: Path, folder: Path, shim: Path) -> Path:
    """A build directory like ``build`` (its entries linked) whose
    ``router/qdrouterd`` is ``shim``: some tests start
    ``$BUILD_DIR/router/qdrouterd`` by its path."""
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "router").mkdir(parents=True)
    for entry in build.iterdir():
        if entry.name != "router":
            (folder / entry.name).symlink_to(entry)
    for entry in (build / "router").iterdir():
        if entry.name != "qdrouterd":
            (folder / "router" / entry.name).symlink_to(entry)
    (folder / "router" / "qdrouterd").symlink_to(shim)
    return folder


def environment(router: str, src: Path, build: Path, out: Path, timeout: float) -> dict[str, str]:
    """The harness's environment, with ``router``'s qdrouterd first on PATH
    and in ``$BUILD_DIR/router``."""
    site = out / "site"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    first = qdrouterd_shim(out / "bin") if router == "hopd" else build / "router"
    build_dir = (build_overlay(build, out / "build", first / "qdrouterd")
                 if router == "hopd" else build)
    path = [first, build / "tests", src / "tools", build / "tools"]
    python_path = [site, src / "python", build / "python", src / "tests"]
    return {**os.environ,
            "PATH": os.pathsep.join([*map(str, path), os.environ.get("PATH", "")]),
            "PYTHONPATH": os.pathsep.join(map(str, python_path)),
            "QPID_DISPATCH_HOME": str(src), "SOURCE_DIR": str(src),
            "BUILD_DIR": str(build_dir), "QPID_SYSTEM_TEST_TIMEOUT": str(timeout)}


def run_file(name: str, router: str, env: dict[str, str], out: Path, limit: float) -> FileResult:
    """Run ``system_tests_<name>`` with ``router``; at most ``limit`` seconds."""
    work = out / "work" / router / name
    work.mkdir(parents=True, exist_ok=True)
    record = out / router / f"{name}.jsonl"
    record.parent.mkdir(parents=True, exist_ok=True)
    driver = Path(__file__).with_name("driver.py")
    started = time.monotonic()
    cut = ""
    with open(out / router / f"{name}.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen([sys.executable, str(driver), f"system_tests_{name}", str(record)],
                                cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            cut = f"stopped after {limit:.0f} s"
        finally:
            # The harness's routers and clients are in the driver's group.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    result = read_outcomes(record.read_text(encoding="utf-8").splitlines()
                           if record.exists() else [])
    if not cut and result.total == 0:
        cut = "did not load"
    result.cut = cut
    result.seconds = time.monotonic() - started
    (out / router / f"{name}.cut").write_text(f"{cut}\n{result.seconds:.0f}\n")
    return result


def load(out: Path, router: str, name: str) -> FileResult | None:
    """A file's outcomes kept from an earlier run, if any."""
    record = out / router / f"{name}.jsonl"
    if not record.exists():
        return None
    result = read_outcomes(record.read_text(encoding="utf-8").splitlines())
    marker = out / router / f"{name}.cut"
    if marker.exists():
        cut, _, seconds = marker.read_text(encoding="utf-8").partition("\n")
        result.cut = cut.strip()
        result.seconds = float(seconds or 0)
    return result


def kept(out: Path) -> dict[str, dict[str, FileResult]]:
    """Every file's outcomes under ``out``, per router."""
    results: dict[str, dict[str, FileResult]] = {}
    for router in ROUTERS:
        folder = out / router
        for record in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            got = load(out, router, record.stem)
            if got is not None:
                results.setdefault(router, {})[record.stem] = got
    return results


def write_reports(out: Path) -> str:
    results = kept(out)
    text = table(results)
    (out / "table.md").write_text(text)
    lines: list[str] = []
    for name, qdr in sorted(results.get("qdrouterd", {}).items()):
        hop = results.get("hopd", {}).get(name)
        if hop is None:
            continue
        missing = differences(qdr, hop)
        if missing:
            lines.append(f"## {name}\n")
            lines.extend(f"- {t.rpartition('.')[2]} ({hop.outcomes.get(t, 'not run')})"
                         for t in missing)
            lines.append("")
    (out / "differences.md").write_text("\n".join(lines))
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.compat", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, required=True, help="qpid-dispatch source tree")
    parser.add_argument("--build", type=Path, required=True,
                        help="its build directory (tests/, python/, router/qdrouterd)")
    parser.add_argument("--files", default="",
                        help="comma-separated names after system_tests_ (default: all)")
    parser.add_argument("--router", choices=(*ROUTERS, "both"), default="hopd")
    parser.add_argument("--out", type=Path, default=Path("compat-results"))
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="the harness's QPID_SYSTEM_TEST_TIMEOUT (default 20)")
    parser.add_argument("--file-limit", type=float, default=900.0,
                        help="seconds one file may run (default 900)")
    args = parser.parse_args(argv)
    src, build, out = args.src.resolve(), args.build.resolve(), args.out.resolve()
    if not (src / "tests" / "system_test.py").is_file():
        parser.error(f"{src} is not a qpid-dispatch source tree (no tests/system_test.py)")
    if not (build / "tests").is_dir():
        parser.error(f"{build} is not a qpid-dispatch build directory (no tests/)")
    names = ([n.strip().removeprefix("system_tests_").removesuffix(".py")
              for n in args.files.split(",") if n.strip()] if args.files else
             sorted(p.stem.removeprefix("system_tests_")
                    for p in (src / "tests").glob("system_tests_*.py")))
    routers = ROUTERS if args.router == "both" else (args.router,)
    for router in routers:
        env = environment(router, src, build, out, args.timeout)
        for name in names:
            if not (src / "tests" / f"system_tests_{name}.py").is_file():
                parser.error(f"no tests/system_tests_{name}.py in {src}")
            got = run_file(name, router, env, out, args.file_limit)
            print(f"{router} {name}: {got.cell()} in {got.seconds:.0f} s", flush=True)
    print(write_reports(out), end="")
    return 0
