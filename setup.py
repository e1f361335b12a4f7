"""Build hook: the per-message modules compiled to C extensions with mypyc.

The same modules stay valid pure Python; ``HOP_PURE=1 pip install .`` builds
without compiling them (no C compiler needed for Hop itself then).
"""

from __future__ import annotations

import os

from setuptools import setup

# The modules every message passes through (bench.engine_cost measures them).
COMPILED = [
    "addressing/forwarding.py",
    "addressing/priority.py",
    "router/core/amqp_codec.py",
    "router/core/message.py",
    "router/core/records.py",
    "router/core/router.py",
    "router/core/settlement.py",
    "router/adapter/pending.py",
    "router/adapter/outcomes.py",
    "router/adapter/sending.py",
    "router/adapter/streaming.py",
    "router/adapter/network.py",
    "router/adapter/forwarder.py",
    "router/adapter/relay.py",
    "router/adapter/transports.py",
    "router/adapter/events.py",
]


def _pure() -> bool:
    return os.environ.get("HOP_PURE", "").strip().lower() in ("1", "yes", "true", "on")


def ext_modules() -> list[object]:
    if _pure():
        return []
    from mypyc.build import mypycify

    return list(mypycify(COMPILED, opt_level="3", debug_level="0"))


def cffi_modules() -> list[str]:
    # The accelerator: several proton calls of the per-message path in one
    # (router/adapter/accel.c, docs/performance.md#the-accelerator).
    return [] if _pure() else ["router/adapter/accel_build.py:ffibuilder"]


setup(ext_modules=ext_modules(), cffi_modules=cffi_modules())
