"""qdrouterd's own conf files and its qdstat and qdmanage, run against Hop.

They are read at test time from an Apache Qpid Dispatch source tree named by
``--qpid-dispatch-src DIR`` or ``HOP_QPID_DISPATCH_SRC=DIR`` (nothing from it
is copied into this repository); without one these tests are skipped with
that reason.  qdstat and qdmanage are run from the tree's ``tools/`` with its
``python/`` on the path; the build-time module they import for their install
location and version (``qpid_dispatch_site``) is written into the test's
temporary directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import QPID_DISPATCH_SRC_ENV
from tests.system.conftest import StartRouter
from tests.system.network import start_network

#: The one kind of refusal expected: qdrouterd 1.x itself refuses a
#: ``container`` section ("No such entity type"), which a JSON test file has.
REFUSED_BY_QDROUTERD_TOO = "unknown section 'container'"

SITE_MODULE = '''\
import os
import sys

VERSION = "1.19.0"


def populate_pythonpath():
    sys.path.insert(0, os.path.join(os.environ["QPID_DISPATCH_HOME"], "python"))
'''


@pytest.fixture(scope="module")
def tree(pytestconfig: pytest.Config) -> Path:
    given = pytestconfig.getoption("qpid_dispatch_src") or os.environ.get(QPID_DISPATCH_SRC_ENV)
    if not given:
        pytest.skip(f"no qpid-dispatch source tree: pass --qpid-dispatch-src DIR or set "
                    f"{QPID_DISPATCH_SRC_ENV}")
    path = Path(given)
    if not (path / "tools" / "qdstat").is_file():
        raise pytest.UsageError(f"{path} is not a qpid-dispatch source tree (no tools/qdstat)")
    return path


def router_conf_files(tree: Path) -> list[Path]:
    """Every router conf file of ``etc/`` and ``tests/config-*/`` (the Cyrus SASL
    conf in ``etc/sasl2/`` is not one)."""
    found = [p for p in (tree / "etc").rglob("*.conf") if "sasl2" not in p.parts]
    for folder in sorted((tree / "tests").glob("config-*")):
        found.extend(p for p in folder.rglob("*")
                     if p.is_file() and p.name.endswith((".conf", ".json", ".conf.in")))
    return sorted(found)


def test_every_qdrouterd_conf_file_loads(tree: Path) -> None:
    files = router_conf_files(tree)
    assert len(files) >= 20, files
    refused: dict[str, str] = {}
    for path in files:
        done = subprocess.run([sys.executable, "-m", "router", "--check-conf", str(path)],
                              capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            refused[str(path.relative_to(tree))] = done.stderr
    unexpected = {p: why for p, why in refused.items() if REFUSED_BY_QDROUTERD_TOO not in why}
    assert unexpected == {}
    assert len(refused) <= 1, refused


def tool(tree: Path, tmp_path: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "qpid_dispatch_site.py").write_text(SITE_MODULE)
    env = {**os.environ, "QPID_DISPATCH_HOME": str(tree),
           "PYTHONPATH": os.pathsep.join([str(site), str(tree / "python")])}
    return subprocess.run([sys.executable, str(tree / "tools" / name), *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_qdstat_and_qdmanage_work_against_hopd(tree: Path, tmp_path: Path,
                                              start_router: StartRouter) -> None:
    net = start_network(start_router, {"A": [], "B": ["A"]})
    bus = net.url("A").removeprefix("amqp://")

    def qdstat(*args: str) -> str:
        done = tool(tree, tmp_path, "qdstat", "-b", bus, *args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def qdmanage(*args: str) -> subprocess.CompletedProcess[str]:
        return tool(tree, tmp_path, "qdmanage", "-b", bus, *args)

    general = qdstat("-g")
    assert "Router Id                        A" in general and "interior" in general
    assert "Router Id                        B" in qdstat("-r", "B", "-g")
    assert "inter-router" in qdstat("-c")
    links = qdstat("-l")
    assert "router-control" in links and "endpoint" in links
    assert "$management" in qdstat("-a")
    nodes = qdstat("-n").splitlines()
    assert any(line.split()[:1] == ["B"] for line in nodes), nodes
    assert "No memory statistics available" in qdstat("-m")
    assert "No AutoLinks found" in qdstat("--autolinks")
    assert "No Link Routes found" in qdstat("--linkroutes")
    assert "Router started in Interior mode, id=A" in qdstat("--log")

    created = qdmanage("create", "--type", "address", "name=qa", "prefix=qa",
                       "distribution=multicast")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["distribution"] == "multicast"
    query = qdmanage("query", "--type", "address")
    assert [row["name"] for row in json.loads(query.stdout)] == ["qa"]
    assert qdmanage("delete", "--type", "address", "--name", "qa").returncode == 0
    missing = qdmanage("read", "--type", "address", "--name", "qa")
    assert missing.returncode == 1
    assert "NotFoundStatus: Not Found: no entity with name=qa" in missing.stdout + missing.stderr
    bad = qdmanage("create", "--type", "address", "name=b", "prefix=b",
                   "distribution=sideways")
    assert bad.returncode == 1 and "BadRequestStatus" in bad.stdout + bad.stderr
    remote = qdmanage("-r", "B", "get-mgmt-nodes")
    assert json.loads(remote.stdout) == ["amqp:/_topo/0/A/$management"]
