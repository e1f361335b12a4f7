"""Hypothesis profiles shared by every test directory.

``ci`` (the default) is deterministic and has no per-example deadline: the
same examples run on every machine, and a slow shared machine cannot fail a
test by timing. ``fuzz`` draws fresh random examples on every run; select it
with ``HOP_HYPOTHESIS_PROFILE=fuzz`` to search for new failures.
"""

import os

import pytest
from hypothesis import settings

settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.register_profile("fuzz", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HOP_HYPOTHESIS_PROFILE", "ci"))

QPID_DISPATCH_SRC_ENV = "HOP_QPID_DISPATCH_SRC"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--qpid-dispatch-src", metavar="DIR", default=None,
                     help="an Apache Qpid Dispatch source tree: its conf files and its "
                          f"qdstat/qdmanage are run against Hop (or set {QPID_DISPATCH_SRC_ENV})")
