"""Coverage-guided fuzzing of the router's decoders (docs/architecture.md#fuzzing).

    python -m tests.fuzz seed                      # write the seed inputs
    python -m tests.fuzz run TARGET --seconds 600  # fuzz one target (atheris, libFuzzer)
    python -m tests.fuzz run all --seconds 300     # each target in turn
    python -m tests.fuzz merge TARGET              # shrink its corpus to what adds coverage

Runs on the pure build (``HOP_PURE=1 pip install -e '.[fuzz]'``): compiled
modules give the fuzzer no coverage. New inputs that reach new code go to
``tests/fuzz/corpus/TARGET/``, an input that crashes to
``tests/fuzz/crashes/TARGET/``; ``tests/unit/test_fuzz_corpus.py`` runs
every one of them on each test run, so a crash found stays a regression
test once fixed.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.fuzz.seeds import write_seeds
from tests.fuzz.targets import TARGETS

HERE = Path(__file__).parent
CORPUS = HERE / "corpus"
CRASHES = HERE / "crashes"


def _child(name: str, libfuzzer_args: list[str]) -> None:
    """Runs in the fuzzing process: instrument the target's modules, then fuzz."""
    import atheris

    target = TARGETS[name]
    with atheris.instrument_imports(include=list(target.modules)):
        run = target.make()
    allowed = target.allowed()

    def one(data: bytes) -> None:
        with contextlib.suppress(*allowed):
            run(data)

    # libFuzzer runs its own command again for some jobs (a merge does):
    # that command is this child, for this target.
    command = Path(tempfile.gettempdir()) / f"hop-fuzz-{name}"
    command.write_text(f"#!/bin/sh\ncd {HERE.parents[1]}\n"
                       f'exec {sys.executable} -m tests.fuzz child {name} "$@"\n')
    command.chmod(0o755)
    atheris.Setup([str(command), *libfuzzer_args], one)
    atheris.Fuzz()


def _fuzz(name: str, seconds: int) -> int:
    target = TARGETS[name]
    corpus = CORPUS / name
    crashes = CRASHES / name
    corpus.mkdir(parents=True, exist_ok=True)
    crashes.mkdir(parents=True, exist_ok=True)
    args = [str(corpus), f"-max_total_time={seconds}", f"-max_len={target.max_len}",
            f"-artifact_prefix={crashes}/", "-print_final_stats=1", "-timeout=10",
            "-rss_limit_mb=2048"]
    started = time.monotonic()
    status = subprocess.call([sys.executable, "-m", "tests.fuzz", "child", name, *args])
    print(f"{name}: {time.monotonic() - started:.0f} s, exit {status}, "
          f"{len(list(corpus.iterdir()))} corpus inputs, "
          f"{len(list(crashes.iterdir()))} crash inputs", flush=True)
    return status


def _merge(name: str) -> int:
    corpus = CORPUS / name
    with tempfile.TemporaryDirectory() as scratch:
        merged = Path(scratch) / "merged"
        merged.mkdir()
        status = subprocess.call([sys.executable, "-m", "tests.fuzz", "child", name,
                                  "-merge=1", str(merged), str(corpus)])
        if status == 0 and any(merged.iterdir()):
            for old in corpus.iterdir():
                old.unlink()
            for new in merged.iterdir():
                (corpus / new.name).write_bytes(new.read_bytes())
    print(f"{name}: {len(list(corpus.iterdir()))} corpus inputs after merging")
    return status


def main(argv: list[str]) -> int:
    if argv[:1] == ["child"]:
        _child(argv[1], argv[2:])
        return 0
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=("seed", "run", "merge"))
    parser.add_argument("target", nargs="?", default="all",
                        choices=("all", *TARGETS))
    parser.add_argument("--seconds", type=int, default=300)
    options = parser.parse_args(argv)
    names = list(TARGETS) if options.target == "all" else [options.target]
    if options.command == "seed":
        for name in names:
            print(f"{name}: {write_seeds(name, CORPUS / name)} seed inputs")
        return 0
    worst = 0
    for name in names:
        status = _fuzz(name, options.seconds) if options.command == "run" else _merge(name)
        worst = worst or status
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
