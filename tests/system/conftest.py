"""Fixtures for system tests: real ``hopd`` processes and proton clients."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.system.harness import Hop, router_conf, start
from tests.system.rabbitmq import RabbitMQ, running
from tests.system.tcpservices import EchoServer

StartRouter = Callable[..., Hop]


def _routers(tmp_path: Path, exited_well: Callable[[Hop, int], bool]) -> Iterator[StartRouter]:
    """Start routers from conf text; on teardown SIGTERM them and fail the
    test for each whose exit status ``exited_well`` does not accept."""
    started: list[Hop] = []

    def _start(conf_text: str | None = None, name: str = "hop", listeners: int = 1,
               max_files: int | None = None, args: tuple[str, ...] = ()) -> Hop:
        hop = start(tmp_path, conf_text if conf_text is not None else router_conf(), name,
                    listeners, max_files, args)
        started.append(hop)
        return hop

    yield _start
    failures = []
    for hop in started:
        status = hop.stop()
        if not exited_well(hop, status):
            failures.append(f"{hop.conf_path.name}: exit status {status}\n{hop.log_text()}")
    if failures:
        pytest.fail("\n".join(failures))


@pytest.fixture
def start_router(tmp_path: Path) -> Iterator[StartRouter]:
    """Start routers from conf text; on teardown SIGTERM them and require exit 0."""
    yield from _routers(tmp_path, lambda hop, status: status == hop.expected_status)


@pytest.fixture
def killable(tmp_path: Path) -> Iterator[StartRouter]:
    """Like ``start_router``, but a router the test SIGKILLed may exit -9."""
    yield from _routers(tmp_path, lambda hop, status: status in (0, -signal.SIGKILL))


@pytest.fixture
def hop(start_router: StartRouter) -> Hop:
    """One standalone router with the default test listener."""
    return start_router()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/system" in str(item.fspath):
            item.add_marker(pytest.mark.system)


@pytest.fixture(scope="module")
def rabbitmq() -> Iterator[RabbitMQ]:
    """A RabbitMQ broker for the whole test module (it takes seconds to start)."""
    with running("rabbit") as broker:
        yield broker


@pytest.fixture
def echo() -> Iterator[list[EchoServer]]:
    """Echo services a test starts (``EchoServer``), closed after it."""
    servers: list[EchoServer] = []
    yield servers
    for server in servers:
        server.close()
