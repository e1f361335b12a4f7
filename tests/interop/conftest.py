"""Opt-in interoperability tests: Hop and qdrouterd 1.x routers in one network.

qdrouterd is not part of this project and nothing here builds or fetches it.
The tests run only when pointed at an installed binary::

    python -m pytest tests/interop --qdrouterd /opt/qdr/qdrouterd
    HOP_QDROUTERD=/opt/qdr/qdrouterd python -m pytest tests/interop

Without either, nothing in this directory is collected (no skips are
reported). ``--qdrouterd`` is registered by this conftest, which pytest reads
before parsing the command line only when ``tests/interop`` (or a file in it)
is named on that command line; a run over the whole repository
(``python -m pytest``) does not know the option, so select the suite there
with the ``HOP_QDROUTERD`` environment variable instead.

Each router's conf and log are written to the test's ``tmp_path``; when a
test fails, the tail of every router's log is attached to its report.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests.interop.mixed import MakeNetwork, MixedNetwork, log_tail
from tests.system.rabbitmq import RabbitMQ, running

ENV = "HOP_QDROUTERD"
NETWORK = pytest.StashKey[list[MixedNetwork]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--qdrouterd", metavar="PATH", default=None,
                     help=f"run tests/interop against this qdrouterd 1.x binary "
                          f"(or set {ENV})")


def qdrouterd_binary(config: pytest.Config) -> str | None:
    option: str | None = config.getoption("qdrouterd", default=None)
    return option or os.environ.get(ENV) or None


def pytest_configure(config: pytest.Config) -> None:
    binary = qdrouterd_binary(config)
    if binary is not None and not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        raise pytest.UsageError(f"qdrouterd binary {binary!r} is not an executable file")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Without a qdrouterd, collect nothing below this directory."""
    if qdrouterd_binary(config) is None:
        return True
    return None


@pytest.fixture(scope="session")
def qdrouterd(pytestconfig: pytest.Config) -> str:
    binary = qdrouterd_binary(pytestconfig)
    assert binary is not None  # otherwise nothing was collected
    return binary


@pytest.fixture
def mixed(request: pytest.FixtureRequest, tmp_path: Path,
          qdrouterd: str) -> Iterator[MakeNetwork]:
    """Make mixed networks; on teardown SIGTERM every router and require exit 0."""
    networks = request.node.stash.setdefault(NETWORK, [])

    def _make(extra: str = "") -> MixedNetwork:
        network = MixedNetwork(tmp_path, qdrouterd, extra=extra)
        networks.append(network)
        return network

    yield _make
    failures = [line for network in networks for line in network.stop()]
    if failures:
        pytest.fail("\n".join(failures))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
        item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed and call.when == "call":
        for network in item.stash.get(NETWORK, []):
            for router_id, router in network.routers.items():
                report.sections.append(
                    (f"{router_id} ({network.kind(router_id)}) log tail, full log "
                     f"{router.log_path}", log_tail(router)))
    return report


@pytest.fixture(scope="module")
def rabbitmq() -> Iterator[RabbitMQ]:
    """A RabbitMQ broker for the whole test module (it takes seconds to start)."""
    with running("interop") as broker:
        yield broker
