"""``hopstat`` and ``hopmanage`` run as processes against real routers."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from typing import Any

import pytest
from proton.utils import BlockingConnection

import router
from tests.system.clients import connect, send_async, wait_settled
from tests.system.conftest import StartRouter
from tests.system.harness import Hop, router_conf
from tests.system.network import start_network
from tests.waiting import free_port

PREFIX = "org.apache.qpid.dispatch."
TOOL_TIMEOUT_S = 30.0

LINK_ROUTES_AND_AUTOLINKS = """\
linkRoute {
    prefix: broker.
    direction: in
    connection: broker
}
linkRoute {
    prefix: broker.
    direction: out
    connection: broker
}
autoLink {
    address: queue.a
    direction: out
    connection: broker
}
"""


def run(module: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"router.tools.{module}", *args],
                          capture_output=True, text=True, input=stdin, timeout=TOOL_TIMEOUT_S,
                          check=False)


def hopstat(hop_or_url: Hop | str, *args: str) -> str:
    """hopstat's standard output; it must succeed."""
    url = hop_or_url if isinstance(hop_or_url, str) else hop_or_url.url
    done = run("hopstat", "-b", url, *args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def hopmanage(hop: Hop, *args: str, stdin: str | None = None) -> Any:
    """hopmanage's output, decoded; it must succeed."""
    done = run("hopmanage", "-b", hop.url, *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def table(output: str, title: str) -> list[dict[str, str]]:
    """The rows of the plain table called ``title``, as {header: cell}.

    Columns start where their header starts; headers are two or more spaces apart.
    """
    lines = output.splitlines()
    rule = lines.index(title) + 2
    while set(lines[rule].strip()) != {"="}:  # a title may have a second line
        rule += 1
    header = lines[rule - 1]
    names = re.split(r"\s{2,}", header.strip())
    starts, position = [], 0
    for name in names:
        position = header.index(name, position)
        starts.append(position)
        position += len(name)
    rows = []
    for line in lines[rule + 1:]:
        if not line.startswith("  "):
            break
        ends = [*starts[1:], None]
        rows.append({n: line[s:e].strip() for n, s, e in zip(names, starts, ends, strict=True)})
    return rows


def dated(output: str, router_id: str) -> None:
    """qdstat's first lines: the time in UTC, the router's id, a blank line."""
    lines = output.splitlines()
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ UTC", lines[0]), lines[0]
    assert lines[1:3] == [router_id, ""]


# -- hopstat -----------------------------------------------------------------------


def test_general_statistics_are_an_attribute_value_table(hop: Hop) -> None:
    output = hopstat(hop)
    dated(output, "HopTest")
    values = {row["attr"]: row["value"] for row in table(output, "Router Statistics")}
    assert values["Router Id"] == "HopTest"
    assert values["Mode"] == "standalone"
    assert values["Version"] == router.__version__
    assert values["Connections"] == "1"
    assert re.fullmatch(r"\d{3}:\d\d:\d\d:\d\d", values["Uptime"])
    for label in ("Ingress Count", "Egress Count", "Transit Count", "Accepted Count",
                  "Rejected Count", "Released Count", "Modified Count", "Presettled Count",
                  "Dropped Presettled Count", "Deliveries to Fallback", "Addresses",
                  "Link Routes", "Auto Links", "Nodes"):
        assert values[label] != "", label
    again = table(hopstat(hop, "--general"), "Router Statistics")
    assert [row["attr"] for row in again] == list(values)


def test_connections_list_the_clients_own_connection(hop: Hop) -> None:
    conn = connect(hop.url)
    try:
        rows = table(hopstat(hop, "-c"), "Connections")
        [mine] = [r for r in rows if r["container"] == conn.container.container_id]
        assert mine["dir"] == "in" and mine["role"] == "normal" and mine["proto"] == "amqp"
        assert mine["security"] == "no-security"
        assert mine["host"].startswith("127.0.0.1:")
        assert re.fullmatch(r"\d{3}:\d\d:\d\d:\d\d", mine["uptime"])
        assert len(rows) == 2  # and hopstat's own
    finally:
        conn.close()


def test_links_show_a_consumers_link_to_its_address(hop: Hop) -> None:
    conn = connect(hop.url)
    try:
        conn.create_receiver("tools.queue", credit=7)
        rows = table(hopstat(hop, "-l"), "Router Links")
        [link] = [r for r in rows if r["addr"] == "tools.queue"]
        assert (link["type"], link["dir"], link["class"], link["phs"]) == (
            "endpoint", "out", "mobile", "0")
        assert link["deliv"] == "0" and link["cap"] != ""
        verbose = table(hopstat(hop, "-l", "-v"), "Router Links")
        assert {"admin", "oper", "name"} <= set(verbose[0])
    finally:
        conn.close()


def test_addresses_count_the_deliveries_sent(hop: Hop) -> None:
    conn = connect(hop.url)
    try:
        receiver = conn.create_receiver("counted", credit=10)
        sender = conn.create_sender("counted")
        conn.wait(lambda: sender.link.credit > 0, timeout=10)
        deliveries = [send_async(sender, n) for n in range(4)]
        for _ in range(4):
            receiver.receive(timeout=10)
            receiver.accept()
        for delivery in deliveries:
            wait_settled(conn, delivery)
        rows = table(hopstat(hop, "-a"), "Router Addresses")
        [counted] = [r for r in rows if r["addr"] == "counted"]
        assert counted == {"class": "mobile", "addr": "counted", "phs": "0",
                           "distrib": "balanced", "pri": "-", "local": "1", "remote": "0",
                           "in": "4", "out": "4", "thru": "0", "fallback": "0"}
        assert [r["addr"] for r in rows] == sorted(r["addr"] for r in rows)
        assert {"in-proc", "to-proc", "from-proc"} <= set(
            table(hopstat(hop, "-a", "-v"), "Router Addresses")[0])
    finally:
        conn.close()


def test_limit_caps_the_rows(hop: Hop) -> None:
    conns = [connect(hop.url) for _ in range(2)]
    try:
        assert len(table(hopstat(hop, "-c"), "Connections")) == 3
        assert len(table(hopstat(hop, "-c", "--limit", "1"), "Connections")) == 1
        assert len(table(hopstat(hop, "-a", "--limit", "1"), "Router Addresses")) == 1
    finally:
        for conn in conns:
            conn.close()


def test_csv_output_parses_with_the_csv_module(hop: Hop) -> None:
    conn = connect(hop.url)
    try:
        lines = hopstat(hop, "-c", "--csv").splitlines()
        start = lines.index("Connections") + 1
        rows = list(csv.DictReader(lines[start:]))
        assert list(rows[0]) == ["id", "host", "container", "role", "proto", "dir",
                                 "security", "authentication", "tenant", "last dlv", "uptime"]
        assert conn.container.container_id in {r["container"] for r in rows}
        assert lines[start].startswith('"id","host"')
    finally:
        conn.close()


def test_memory_says_there_are_no_pools_and_shows_the_process_size(hop: Hop) -> None:
    output = hopstat(hop, "-m")
    assert "No memory pool statistics" in output
    [summary] = table(output, "Memory Summary")
    assert re.fullmatch(r"[\d.]+ (KiB|MiB|GiB|TiB)", summary["VmSize"]), summary
    assert summary["Pooled"] == "-"


def test_log_prints_recent_records(hop: Hop) -> None:
    lines = hopstat(hop, "--log", "--limit", "3").splitlines()
    assert len(lines) == 3
    for line in lines:
        assert re.match(r"\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4} [A-Z_]+ \(\w+\) ", line), line


def test_link_routes_and_autolinks(start_router: StartRouter) -> None:
    hop = start_router(router_conf(LINK_ROUTES_AND_AUTOLINKS))
    routes = table(hopstat(hop, "--linkroutes"), "Link Routes")
    assert sorted((r["address"], r["dir"], r["status"]) for r in routes) == [
        ("broker.", "in", "inactive"), ("broker.", "out", "inactive")]
    [autolink] = table(hopstat(hop, "--autolinks"), "AutoLinks")
    assert (autolink["addr"], autolink["dir"]) == ("queue.a", "out")


def test_autolinks_and_link_routes_say_when_there_are_none(hop: Hop) -> None:
    assert hopstat(hop, "--autolinks").splitlines()[3:] == ["AutoLinks", "No AutoLinks found"]
    assert hopstat(hop, "--linkroutes").splitlines()[3:] == ["Link Routes",
                                                             "No Link Routes found"]
    assert hopstat(hop, "-n").splitlines()[3:] == ["Router is Standalone - No Router List"]


def test_nodes_and_another_router_through_the_network(start_router: StartRouter) -> None:
    net = start_network(start_router, {"A": [], "B": ["A"]})
    output = hopstat(net.url("A"), "-n")
    dated(output, "A")
    nodes = table(output, "Routers in the Network")
    assert [n["router-id"] for n in nodes] == ["A", "B"]
    b_stats = hopstat(net.url("A"), "-r", "B", "-g")
    dated(b_stats, "B")
    values = {r["attr"]: r["value"] for r in table(b_stats, "Router Statistics")}
    assert (values["Router Id"], values["Mode"]) == ("B", "interior")
    done = run("hopmanage", "-b", net.url("A"), "-r", "B", "query", "--type", "router", "id")
    assert json.loads(done.stdout) == [{"id": "B"}], done.stderr


def test_an_unknown_router_is_one_line_and_exit_status_1(hop: Hop) -> None:
    done = run("hopstat", "-b", hop.url, "-r", "NoSuchRouter", "-c")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith("hopstat: ") and done.stderr.count("\n") == 1
    assert "_topo/0/NoSuchRouter/$management" in done.stderr


def test_an_unreachable_router_is_one_line_and_exit_status_1() -> None:
    url = f"amqp://user:secret@127.0.0.1:{free_port()}"
    done = run("hopstat", "-b", url, "-t", "3")
    assert done.returncode == 1
    assert done.stderr.startswith("hopstat: cannot reach amqp://user@127.0.0.1:")
    assert done.stderr.count("\n") == 1 and "secret" not in done.stderr
    done = run("hopmanage", "-b", url, "get-types")
    assert done.returncode == 1 and done.stderr.startswith("hopmanage: cannot reach ")


@pytest.mark.parametrize("args", [["--nonsense"], ["-c", "-l"], ["--limit", "x"],
                                  ["-t", "0"]])
def test_bad_options_are_usage_errors(args: list[str]) -> None:
    done = run("hopstat", *args)
    assert done.returncode == 2
    assert "Usage: hopstat" in done.stderr


def test_help_describes_every_option() -> None:
    done = run("hopstat", "-h")
    assert done.returncode == 0
    for flag in ("--general", "--connections", "--links", "--nodes", "--address", "--memory",
                 "--autolinks", "--linkroutes", "--log", "--bus", "--router", "--csv",
                 "--limit", "--timeout", "--help"):
        assert flag in done.stdout, flag


# -- hopmanage ---------------------------------------------------------------------


def test_create_query_read_and_delete_an_address(hop: Hop) -> None:
    created = hopmanage(hop, "create", "--type", "address", "name=x", "prefix=x",
                        "distribution=multicast")
    assert (created["name"], created["prefix"], created["distribution"]) == (
        "x", "x", "multicast")
    assert created["type"] == PREFIX + "router.config.address"
    rows = hopmanage(hop, "query", "--type", "address")
    assert next(r for r in rows if r["name"] == "x")["distribution"] == "multicast"
    assert all(None not in r.values() for r in rows)  # nulls are left out, as qdmanage
    assert hopmanage(hop, "QUERY", "--type", "address", "name", "prefix") == [
        {"name": "x", "prefix": "x"}]
    assert hopmanage(hop, "read", "--type", "address", "--name", "x") == created
    assert hopmanage(hop, "delete", "--type", "address", "--name", "x") is None
    assert hopmanage(hop, "query", "--type", "address", "name") == []
    done = run("hopmanage", "-b", hop.url, "read", "--type", "address", "--name", "x")
    assert done.returncode == 1
    assert done.stderr == "hopmanage: 404: Not Found: no entity with name=x\n"


def test_connection_options_may_follow_the_operation(hop: Hop) -> None:
    done = run("hopmanage", "read", "--name", "x", "-b", hop.url)
    assert done.stderr.startswith("hopmanage: 404")
    created = hopmanage(hop, "create", "type=address", "name=y", "prefix=y", "--indent", "-1")
    assert created["name"] == "y"


def test_create_from_standard_input(hop: Hop) -> None:
    one = hopmanage(hop, "--stdin", "create", "--type", "address",
                    stdin='{"name": "s1", "prefix": "s1", "distribution": "closest"}')
    assert (one["name"], one["distribution"]) == ("s1", "closest")
    many = hopmanage(hop, "create", "--type", "address", "--stdin",
                     stdin='[{"name": "s2", "prefix": "s2"}, {"name": "s3", "pattern": "s3/#"}]')
    assert [m["name"] for m in many] == ["s2", "s3"]
    done = run("hopmanage", "-b", hop.url, "create", "--type", "address", "--stdin", stdin="[1]")
    assert done.returncode == 1 and done.stderr.startswith("hopmanage: ")


def test_update_changes_a_log_level(hop: Hop) -> None:
    updated = hopmanage(hop, "update", "--type", "log", "--name", "log/ROUTER_CORE",
                        "enable=trace+")
    assert updated["enable"] == "trace+"


def test_refused_requests_report_the_status(hop: Hop) -> None:
    done = run("hopmanage", "-b", hop.url, "create", "--type", "address", "name=z", "bogus=1")
    assert done.returncode == 1
    assert re.fullmatch(r"hopmanage: 400: Unknown attribute 'bogus'.*\n", done.stderr)


def test_node_operations(hop: Hop) -> None:
    types = hopmanage(hop, "get-types")
    assert PREFIX + "router.link" in types
    assert list(hopmanage(hop, "get-types", "link")) == [PREFIX + "router.link"]
    operations = hopmanage(hop, "get-operations", "--type", "connection")
    assert list(operations) == [PREFIX + "connection"]
    assert "READ" in operations[PREFIX + "connection"]
    attributes = hopmanage(hop, "get-attributes", "log")[PREFIX + "log"]
    assert attributes[:3] == ["name", "identity", "type"]
    assert hopmanage(hop, "get-mgmt-nodes") == []
    schema = hopmanage(hop, "get-schema")
    assert schema["entityTypes"]["listener"]["fullyQualifiedType"] == PREFIX + "listener"
    records = hopmanage(hop, "get-log", "--limit", "2")
    assert len(records) == 2 and all(len(r) == 6 for r in records)


def test_a_blocking_client_sees_its_connection_in_hopmanage(hop: Hop) -> None:
    conn: BlockingConnection = connect(hop.url)
    try:
        rows = hopmanage(hop, "query", "--type", "connection", "container", "role")
        assert {"container": conn.container.container_id, "role": "normal"} in rows
    finally:
        conn.close()
