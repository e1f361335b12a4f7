"""The build: the per-message modules compiled by the install, or pure, never
stale, and a build environment that has what compiling them needs.

``pip install .`` compiles the modules listed in setup.py with mypyc;
``HOP_PURE=1``, or a machine with no C compiler, builds without. Python loads
a module's compiled extension in preference to its source, so an extension
older than its source would run old code: after editing one of these
modules, install again.

mypyc type-checks the compiled modules and every module they import, in
pip's isolated build environment: a third-party package that one of them
reaches must be among the build's requirements, or ``pip install .`` in a
new virtual environment cannot compile (``.ci/newcomer`` does that install).
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import router

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("router", "addressing", "linkroute", "autolink", "conf", "spark")


def setup_module_of_the_project() -> ModuleType:
    """setup.py as a module (its ``setup()`` call is behind ``__main__``)."""
    spec = importlib.util.spec_from_file_location("hop_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compiled_paths() -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "COMPILED":
            paths: list[str] = ast.literal_eval(node.value)
            return paths
    raise AssertionError("setup.py has no COMPILED list")


def compiled_modules() -> list[str]:
    return [p.removesuffix(".py").replace("/", ".") for p in compiled_paths()]


def pyproject() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)


def distribution_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


# -- what the compiled modules reach ------------------------------------------

def module_file(name: str) -> Path | None:
    base = ROOT / name.replace(".", "/")
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def imports_of(path: Path, name: str) -> set[str]:
    """Every module an import statement of the file may name, wherever the
    statement stands (mypy follows those under ``TYPE_CHECKING`` and in
    functions too); ``from a import b`` names ``a`` and perhaps ``a.b``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                module = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def third_party_reached(modules: Iterable[str]) -> dict[str, str]:
    """The top-level names of the packages outside the project and the
    standard library that ``modules`` import, directly or through other
    modules of the project, each with the first file seen importing it."""
    outside: dict[str, str] = {}
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = module_file(name)
        if path is None:
            continue
        for imported in sorted(imports_of(path, name)):
            parts = imported.split(".")
            if parts[0] in PROJECT:  # the module, and the packages it is in
                todo.extend(".".join(parts[:i]) for i in range(1, len(parts) + 1))
            elif parts[0] not in sys.stdlib_module_names and parts[0] != "__future__":
                outside.setdefault(parts[0], str(path.relative_to(ROOT)))
    return outside


def mypy_needs_no_install() -> set[str]:
    """Modules the type check is told to treat as missing and skip
    (``ignore_missing_imports`` in pyproject's mypy overrides)."""
    names: set[str] = set()
    for override in pyproject()["tool"]["mypy"]["overrides"]:
        if override.get("ignore_missing_imports"):
            names.update(pattern.removesuffix(".*") for pattern in override["module"])
    return names


def missing_build_requirements(reached: dict[str, str], requirements: Iterable[str]) -> list[str]:
    """What a build with ``requirements`` lacks for the packages ``reached``."""
    have = {distribution_name(r) for r in requirements}
    owners = importlib.metadata.packages_distributions()
    missing: list[str] = []
    for top, importer in sorted(reached.items()):
        if top in mypy_needs_no_install():
            continue
        dists = {distribution_name(d) for d in owners.get(top, [])}
        if not dists & have:
            missing.append(f"{importer} imports {top} (distribution "
                           f"{', '.join(sorted(dists)) or 'not installed'})")
    return missing


def build_requirements() -> list[str]:
    """``[build-system].requires``, and what setup.py adds when it compiles."""
    return [*pyproject()["build-system"]["requires"],
            *setup_module_of_the_project().runtime_dependencies()]


def test_the_build_has_every_package_the_compiled_modules_reach() -> None:
    missing = missing_build_requirements(third_party_reached(compiled_modules()),
                                         build_requirements())
    assert not missing, ("mypyc would not find these in pip's build environment; add "
                         "them to [project].dependencies: " + "; ".join(missing))


def test_the_check_finds_a_package_the_build_lacks() -> None:
    """Without the dependencies setup.py adds (the build of 05b7a2b), the check
    names wsproto, which router/adapter/connections/websockets.py imports."""
    reached = third_party_reached(compiled_modules())
    assert reached.get("wsproto") == "router/adapter/connections/websockets.py"
    static_only = pyproject()["build-system"]["requires"]
    missing = missing_build_requirements(reached, static_only)
    assert any(line.startswith("router/adapter/connections/websockets.py imports wsproto")
               for line in missing), missing


def test_setup_hands_the_runtime_dependencies_to_a_compiled_build() -> None:
    """pip asks the backend what the build needs (PEP 517): with a compiler,
    the answer holds every runtime dependency; for the pure build, none."""
    env = {k: v for k, v in os.environ.items() if k != "HOP_PURE"}
    code = ("from setuptools import build_meta; "
            "print('\\n'.join(build_meta.get_requires_for_build_wheel()))")
    answer = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True,
                            capture_output=True, text=True).stdout.split()
    runtime = pyproject()["project"]["dependencies"]
    if setup_module_of_the_project().compiler_problem() is None:
        assert set(runtime) <= set(answer), answer
    else:
        assert not set(runtime) & set(answer), answer


# -- the installed build -------------------------------------------------------

def test_the_compiled_list_names_real_modules() -> None:
    names = compiled_modules()
    assert "router.adapter.forwarding.forwarder" in names and len(names) >= 10
    for name in names:
        assert (ROOT / (name.replace(".", "/") + ".py")).is_file(), name


@pytest.mark.parametrize("name", compiled_modules())
def test_no_compiled_module_is_older_than_its_source(name: str) -> None:
    source = ROOT / (name.replace(".", "/") + ".py")
    for ext in source.parent.glob(source.stem + ".*.so"):
        assert ext.stat().st_mtime >= source.stat().st_mtime, \
            f"{ext.name} is older than {source.name}: run 'pip install -e .' again"


def test_one_build_throughout() -> None:
    """Every listed module is compiled, or none is, and ``router.installed_build``
    (which ``hopd --version`` shows) says which; ``.ci/run`` also says which it
    tests (HOP_EXPECT_BUILD=compiled or pure)."""
    builds = {name: str(importlib.import_module(name).__file__).endswith(".so")
              for name in compiled_modules()}
    expected = os.environ.get("HOP_EXPECT_BUILD")
    want = (expected == "compiled") if expected else next(iter(builds.values()))
    wrong = [name for name, compiled in builds.items() if compiled != want]
    assert not wrong, f"expected the {'compiled' if want else 'pure'} build: {wrong}"
    assert router.installed_build() == ("compiled" if want else "pure")


def test_every_part_the_dispatcher_calls_per_message_is_in_the_compiled_list() -> None:
    """A module of the per-message path left out of setup.py's list runs as
    Python in the compiled build, and nothing else says so: the parts a
    delivery passes through, as assembled, come from listed modules."""
    from addressing import AddressTable
    from router.assembly import build_engine
    from router.core import Router

    engine = build_engine(core=Router(router_id="Build", addresses=AddressTable(),
                                      token=lambda: "t"),
                          router_id="Build", management=False)
    try:
        events, fwd = engine.events, engine.forwarder
        parts = [events, fwd, fwd.outcomes, fwd.dispositions, fwd.sender, fwd.network,
                 fwd.streams, fwd.buffer, events.relay, events.pending, engine.transports]
        listed = set(compiled_modules())
        unlisted = sorted({type(part).__module__ for part in parts} - listed)
        assert not unlisted, f"per-message parts not compiled (add them to setup.py): {unlisted}"
    finally:
        engine.close()


def test_the_accelerator_comes_with_the_compiled_build() -> None:
    """``router/adapter/forwarding/accel.c`` is compiled with the modules (setup.py), and
    is never older than its source."""
    from router.adapter.forwarding import accel

    forwarder = importlib.import_module("router.adapter.forwarding.forwarder")
    compiled = str(forwarder.__file__).endswith(".so")
    assert compiled == accel.COMPILED
    source = ROOT / "router" / "adapter" / "forwarding" / "accel.c"
    for ext in source.parent.glob("_accel.*.so"):
        assert ext.stat().st_mtime >= source.stat().st_mtime, \
            f"{ext.name} is older than {source.name}: run 'pip install -e .' again"
