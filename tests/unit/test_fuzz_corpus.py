"""Every input the fuzzers kept (tests/fuzz/corpus: inputs that reached new
code; tests/fuzz/crashes: inputs that once crashed a decoder, kept once
fixed) runs through its target again: each returns or raises only the
refusal its decoder is allowed (docs/architecture.md#fuzzing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"


def inputs(name: str) -> list[Path]:
    return sorted(p for kind in ("corpus", "crashes") for p in (FUZZ / kind / name).glob("*")
                  if p.is_file())


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_kept_input_is_answered_or_refused(name: str) -> None:
    target = TARGETS[name]
    run = target.make()
    allowed = target.allowed()
    kept = inputs(name)
    assert kept, f"no corpus for {name}: python -m tests.fuzz seed"
    failures = []
    for path in kept:
        try:
            run(path.read_bytes())
        except allowed:
            pass
        except Exception as error:  # each failure named with its input
            failures.append(f"{path.relative_to(FUZZ)}: {type(error).__name__}: {error}")
    assert not failures, "\n".join(failures)
