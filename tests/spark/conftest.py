"""Fixtures for the Spark tests: one local SparkSession, and real hopd routers.

The session runs ``local[2,4]``: two tasks at a time, four tries per task,
so that a failed task is run again as on a cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.system.harness import Hop, router_conf, start


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/spark" in str(item.fspath):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from spark import session

    s = session("hop-tests")
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


@pytest.fixture
def router(tmp_path: Path) -> Iterator[Hop]:
    hop = start(tmp_path, router_conf(), "hop")
    yield hop
    status = hop.stop()
    assert status == 0, f"hopd exit status {status}\n{hop.log_text()}"
