"""The per-message modules: compiled by the install, or pure, and never stale.

``pip install .`` compiles the modules listed in setup.py with mypyc;
``HOP_PURE=1`` builds without. Python loads a module's compiled extension in
preference to its source, so an extension older than its source would run
old code: after editing one of these modules, install again.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def compiled_modules() -> list[str]:
    text = (ROOT / "setup.py").read_text()
    block = text[text.index("COMPILED = [") + len("COMPILED = ["):]
    block = block[:block.index("]")]
    paths = [line.strip().strip('",') for line in block.splitlines()]
    return [p.removesuffix(".py").replace("/", ".") for p in paths if p.endswith(".py")]


def test_the_compiled_list_names_real_modules() -> None:
    names = compiled_modules()
    assert "router.adapter.forwarder" in names and len(names) >= 10
    for name in names:
        assert (ROOT / (name.replace(".", "/") + ".py")).is_file(), name


@pytest.mark.parametrize("name", compiled_modules())
def test_no_compiled_module_is_older_than_its_source(name: str) -> None:
    source = ROOT / (name.replace(".", "/") + ".py")
    for ext in source.parent.glob(source.stem + ".*.so"):
        assert ext.stat().st_mtime >= source.stat().st_mtime, \
            f"{ext.name} is older than {source.name}: run 'pip install -e .' again"


def test_one_build_throughout() -> None:
    """Every listed module is compiled, or none is; ``.ci/run`` also says which it
    tests (HOP_EXPECT_BUILD=compiled or pure)."""
    builds = {name: str(importlib.import_module(name).__file__).endswith(".so")
              for name in compiled_modules()}
    expected = os.environ.get("HOP_EXPECT_BUILD")
    want = (expected == "compiled") if expected else next(iter(builds.values()))
    wrong = [name for name, compiled in builds.items() if compiled != want]
    assert not wrong, f"expected the {'compiled' if want else 'pure'} build: {wrong}"


def test_the_accelerator_comes_with_the_compiled_build() -> None:
    """``router/adapter/accel.c`` is compiled with the modules (setup.py), and
    is never older than its source."""
    from router.adapter import accel

    compiled = str(importlib.import_module("router.adapter.forwarder").__file__).endswith(".so")
    assert compiled == accel.COMPILED
    source = ROOT / "router" / "adapter" / "accel.c"
    for ext in source.parent.glob("_accel.*.so"):
        assert ext.stat().st_mtime >= source.stat().st_mtime, \
            f"{ext.name} is older than {source.name}: run 'pip install -e .' again"
