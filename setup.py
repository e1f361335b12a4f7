"""Build hook: the per-message modules compiled to C extensions with mypyc,
and the accelerator (``router/adapter/forwarding/accel.c``) with cffi.

The same modules stay valid pure Python, so the build falls back to them
rather than failing: ``HOP_PURE=1`` asks for the pure build, and a machine
with no working C compiler (or no Python headers) gets it too, with one line
saying why (docs/performance.md#the-compiled-build).

mypyc type-checks the compiled modules and every module they import, so
when it runs the build environment needs the runtime dependencies as well:
they are taken from ``[project].dependencies`` in pyproject.toml, the one
list, and handed to the build as its dynamic requirements
(``setup_requires``, which setuptools' PEP 517 backend returns from
``get_requires_for_build_wheel``).  tests/unit/test_build.py checks that no
compiled module reaches a third-party package outside that list.
"""

from __future__ import annotations

import os
import sys
import tempfile
import tomllib
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.errors import CCompilerError, ExecError, PlatformError

HERE = Path(__file__).resolve().parent

# The modules every message passes through (bench.engine_cost measures them).
COMPILED = [
    "addressing/forwarding.py",
    "addressing/priority.py",
    "router/core/amqp/wire.py",
    "router/core/message.py",
    "router/core/records.py",
    "router/core/router.py",
    "router/core/settlement.py",
    "router/adapter/pending.py",
    "router/adapter/forwarding/outcomes.py",
    "router/adapter/forwarding/dispositions.py",
    "router/adapter/forwarding/sending.py",
    "router/adapter/forwarding/streaming.py",
    "router/adapter/forwarding/network.py",
    "router/adapter/forwarding/forwarder.py",
    "router/adapter/forwarding/relay.py",
    "router/adapter/connections/transports.py",
    "router/adapter/events.py",
]

#: Commands that finalize ``build_ext`` only to list sources (an sdist's
#: manifest): mypyc need not type-check and generate C for them.
METADATA_ONLY = {"egg_info", "dist_info", "sdist", "check"}

#: What the pure build costs, said with every fallback to it.
PURE_COST = ("the same router at about 1.7x the CPU per message, "
             "see docs/performance.md#the-compiled-build")


def say_pure(why: str) -> None:
    """The one line on the build's output (``pip install -v`` shows it; so do
    ``hopd --version`` and the router's log, afterwards)."""
    print(f"hop: installing the pure build: {why}; {PURE_COST}", file=sys.stderr, flush=True)


def pure_requested() -> bool:
    return os.environ.get("HOP_PURE", "").strip().lower() in ("1", "yes", "true", "on")


def runtime_dependencies() -> list[str]:
    """``[project].dependencies``: the build needs them when mypyc type-checks."""
    with (HERE / "pyproject.toml").open("rb") as file:
        return list(tomllib.load(file)["project"]["dependencies"])


def compiler_problem() -> str | None:
    """Why this machine cannot compile an extension module, or ``None``.

    Compiles one file that includes ``Python.h`` with the compiler setuptools
    would use, so a missing compiler and missing headers are both found before
    the build depends on them."""
    from distutils.ccompiler import new_compiler
    from distutils.sysconfig import customize_compiler, get_python_inc

    compiler = new_compiler()
    customize_compiler(compiler)
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp, "probe.c")
        probe.write_text("#include <Python.h>\nint hop_probe(void) { return 0; }\n")
        try:
            compiler.compile([str(probe)], output_dir=tmp, include_dirs=[get_python_inc()])
        except (CCompilerError, ExecError, PlatformError, OSError) as error:
            return f"no working C compiler ({error})"
    return None


class CompiledDistribution(Distribution):
    """A distribution with extension modules from the start (the wheel is
    platform-specific), though the mypyc ones join only in ``build_ext``,
    where type-checking them cannot delay ``get_requires_for_build_wheel``."""

    mypyc_done = False

    def has_ext_modules(self) -> bool:
        return True


class CompiledBuild(build_ext):
    """Adds the mypyc modules to the extensions, and installs the pure build
    instead of failing when they or the accelerator cannot be built."""

    distribution: CompiledDistribution

    def finalize_options(self) -> None:
        dist = self.distribution
        building = not set(dist.commands) <= METADATA_ONLY
        if building and not dist.mypyc_done:  # once, though commands are made again
            dist.mypyc_done = True
            from mypyc.build import mypycify

            try:
                compiled = mypycify(COMPILED, opt_level="3", debug_level="0")
            except SystemExit as stop:  # mypyc reports type errors by exiting
                say_pure(f"mypyc could not compile the modules, exit status {stop.code}, "
                         "its errors above")
                dist.ext_modules = []
            else:
                dist.ext_modules = [*(dist.ext_modules or []), *compiled]
        super().finalize_options()

    def run(self) -> None:
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError) as error:
            for output in self.get_outputs():
                Path(output).unlink(missing_ok=True)
            self.extensions = []
            say_pure(f"compiling the modules failed ({error})")


def pure_build(why: str) -> type[build_py]:
    """``build_py`` saying, when the build runs, why it is the pure one."""

    class PureBuild(build_py):
        def run(self) -> None:
            say_pure(why)
            super().run()

    return PureBuild


def main() -> None:
    problem = "HOP_PURE is set" if pure_requested() else compiler_problem()
    if problem is not None:
        setup(cmdclass={"build_py": pure_build(problem)})
        return
    setup(
        distclass=CompiledDistribution,
        cmdclass={"build_ext": CompiledBuild},
        setup_requires=runtime_dependencies(),
        # The accelerator: several proton calls of the per-message path in one
        # (router/adapter/forwarding/accel.c, docs/performance.md#the-accelerator).
        cffi_modules=["router/adapter/forwarding/accel_build.py:ffibuilder"],
    )


if __name__ == "__main__":
    main()
