"""hopstat's views over canned management answers: columns, optional columns,
absent attributes and the lines qdstat prints when there is nothing to show."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from router.tools.client import PREFIX, StatusError
from router.tools.hopstat import (
    VIEWS,
    Options,
    addresses,
    autolinks,
    connections,
    general,
    linkroutes,
    links,
    log_lines,
    memory,
    nodes,
    render,
    run,
)
from router.tools.tables import Table


class Canned:
    """Answers QUERY from ``rows`` by short type; GET-LOG from ``log``."""

    def __init__(self, rows: dict[str, list[dict[str, Any]]],
                 log: list[list[Any]] | None = None) -> None:
        self.rows = rows
        self.log = log or []
        self.queries: list[tuple[str | None, int | None]] = []

    def query(self, entity_type: str | None, attribute_names: Iterable[str] = (),
              limit: int | None = None) -> list[dict[str, Any]]:
        self.queries.append((entity_type, limit))
        assert entity_type is not None and entity_type.startswith(PREFIX)
        short = entity_type.removeprefix(PREFIX)
        if short not in self.rows:
            raise StatusError(404, f"Unknown entity type {entity_type!r}")
        found = self.rows[short][:limit] if limit else self.rows[short]
        names = list(attribute_names)
        return [{k: v for k, v in r.items() if not names or k in names} for r in found]

    def node_call(self, operation: str, body: object = None, **properties: object) -> Any:
        assert operation == "GET-LOG"
        limit = properties.get("limit")
        return self.log[-limit:] if isinstance(limit, int) else self.log


def only_table(output: list[Table | str]) -> Table:
    [t] = [item for item in output if isinstance(item, Table)]
    return t


def pairs(t: Table) -> dict[str, str]:
    return {row[0]: row[1] for row in t.rows}


def test_general_shows_absent_counters_as_dashes() -> None:
    t = only_table(general(Canned({"router": [{"id": "R", "mode": "interior",
                                               "linkCount": None}]}), Options()))
    values = pairs(t)
    assert (values["Router Id"], values["Mode"], values["Version"]) == ("R", "interior", "-")
    assert values["Links"] == "-" and values["Ingress Count"] == "-"
    assert "Uptime" not in values and "VmSize" not in values  # optional rows
    assert t.headers == ("attr", "value") and t.title == "Router Statistics"


def test_general_formats_uptime_and_process_size() -> None:
    t = only_table(general(Canned({"router": [{"uptimeSeconds": 90061,
                                               "memoryUsage": 3 * 1024 ** 3}]}), Options()))
    values = pairs(t)
    assert values["Uptime"] == "001:01:01:01" and values["VmSize"] == "3.00 GiB"
    assert "Resident Memory" not in values, "qdrouterd has no such attribute: no row"


def test_general_shows_hops_resident_memory_and_c_heap() -> None:
    t = only_table(general(Canned({"router": [{"memoryUsage": 3 * 1024 ** 3,
                                               "residentMemory": 48 * 1024 ** 2,
                                               "heapInUse": 10 * 1024 ** 2,
                                               "heapFree": 1024}]}), Options()))
    values = pairs(t)
    assert values["Resident Memory"] == "48.0 MiB" and values["C Heap In Use"] == "10.0 MiB"


def test_connections_summarise_security_and_authentication() -> None:
    conns = [
        {"identity": "1", "host": "h:1", "container": "c1", "role": "normal",
         "protocol": "amqp", "dir": "in", "isEncrypted": True, "sslProto": "TLSv1.3",
         "sslCipher": "AES", "isAuthenticated": True, "sasl": "PLAIN", "user": "bob",
         "tenant": "vhost/", "lastDlvSeconds": None, "uptimeSeconds": 5},
        {"identity": "2", "host": "h:2", "container": "c2", "role": "inter-router",
         "protocol": "amqp", "dir": "out", "isEncrypted": False, "isAuthenticated": True,
         "sasl": "ANONYMOUS", "tenant": None, "lastDlvSeconds": 61, "uptimeSeconds": 70},
        {"identity": "3", "host": "h:3", "container": "c3", "role": "normal",
         "protocol": "amqp", "dir": "in", "isEncrypted": True, "sasl": "EXTERNAL",
         "isAuthenticated": True, "user": "CN=x", "lastDlvSeconds": 0, "uptimeSeconds": 1},
    ]
    t = only_table(connections(Canned({"connection": conns}), Options()))
    assert t.headers[-2:] == ("last dlv", "uptime")
    rows = {r[0]: r for r in t.rows}
    assert rows["1"][6:] == ("TLSv1.3(AES)", "bob(PLAIN)", "vhost", "-", "000:00:00:05")
    assert rows["2"][6:] == ("no-security", "anonymous-user", "", "000:00:01:01",
                             "000:00:01:10")
    assert rows["3"][6:9] == ("None(None)", "CN=x(x.509)", "-")


def test_connections_without_uptime_attributes_drop_those_columns() -> None:
    t = only_table(connections(Canned({"connection": [{"identity": "1"}]}), Options()))
    assert t.headers[-1] == "tenant"
    assert t.rows[0][:3] == ("1", "-", "-")


def test_links_split_the_address_and_add_optional_columns() -> None:
    link = {"linkType": "endpoint", "linkDir": "out", "connectionId": "3", "identity": "9",
            "peer": None, "owningAddr": "M0q", "capacity": 250, "undeliveredCount": 1,
            "unsettledCount": 2, "deliveryCount": 3, "presettledCount": 0,
            "acceptedCount": 3, "rejectedCount": 0, "releasedCount": 0, "modifiedCount": 0,
            "deliveriesDelayed1Sec": 1, "deliveriesDelayed10Sec": 2, "settleRate": 4,
            "creditAvailable": 0, "zeroCreditSeconds": 75, "adminStatus": "enabled",
            "operStatus": "up", "linkName": "n"}
    t = only_table(links(Canned({"router.link": [link]}), Options(verbose=True)))
    row = dict(zip(t.headers, t.rows[0], strict=True))
    assert "psdrop" not in row and "pri" not in row and "stuck" not in row
    assert (row["class"], row["addr"], row["phs"], row["peer"]) == ("mobile", "q", "0", "")
    assert (row["delay"], row["rate"], row["cred"], row["blkd"]) == ("3", "4", "0", "00:01:15")
    assert (row["admin"], row["oper"], row["name"]) == ("enabled", "up", "n")
    assert t.headers[:9] == ("type", "dir", "conn id", "id", "peer", "class", "addr", "phs",
                             "cap")


def test_nodes_sorted_with_next_hop_or_link() -> None:
    found: list[dict[str, Any]] = [
        {"id": "C", "nextHop": "B", "routerLink": None, "lastTopoChange": 0},
        {"id": "A", "nextHop": None, "routerLink": None},
        {"id": "B", "nextHop": None, "routerLink": "5", "cost": 1, "linkState": ["A"],
         "validOrigins": [], "protocolVersion": 1, "lastTopoChange": 1700000000}]
    t = only_table(nodes(Canned({"router.node": found}), Options(verbose=True)))
    assert t.title == ("Routers in the Network\n"
                       "Last Topology Change: Tuesday Nov 14 22:13:20 2023 GMT")
    assert [r[:3] for r in t.rows] == [("A", "-", "-"), ("B", "-", "5"), ("C", "B", "-")]
    assert t.rows[1][3:] == ("1", "1", "['A']", "[]")


def test_a_standalone_router_has_no_node_table() -> None:
    assert nodes(Canned({"router.node": []}), Options()) == [
        "Router is Standalone - No Router List"]


def test_addresses_use_container_count_for_link_routes_and_commas() -> None:
    found = [{"name": "M0b", "distribution": "balanced", "priority": 4, "subscriberCount": 2,
              "containerCount": 9, "remoteCount": 0, "deliveriesIngress": 12345,
              "deliveriesEgress": 0, "deliveriesTransit": 0,
              "deliveriesRedirectedToFallback": 0},
             {"name": "Dbroker", "distribution": "linkBalanced", "priority": -1,
              "subscriberCount": 0, "containerCount": 1}]
    t = only_table(addresses(Canned({"router.address": found}), Options()))
    assert t.rows[0] == ("mobile", "b", "0", "balanced", "4", "2", "0", "12,345", "0", "0",
                         "0")
    assert t.rows[1][:6] == ("link-out", "broker", "", "linkBalanced", "-", "1")
    assert t.rows[1][6:] == ("-",) * 5


def test_configured_entities_or_a_line_saying_there_are_none() -> None:
    assert autolinks(Canned({"router.config.autoLink": []}), Options()) == [
        "AutoLinks", "No AutoLinks found"]
    assert linkroutes(Canned({"router.config.linkRoute": []}), Options()) == [
        "Link Routes", "No Link Routes found"]
    routes = [{"prefix": None, "pattern": "a.#", "direction": "in", "distribution": "x",
               "operStatus": "active", "addExternalPrefix": "p.", "delExternalPrefix": None}]
    t = only_table(linkroutes(Canned({"router.config.linkRoute": routes}), Options()))
    assert t.headers[-2:] == ("add-ext-prefix", "del-ext-prefix")
    assert t.rows == (("a.#", "in", "x", "active", "p.", ""),)


def test_memory_without_pools_says_so_and_never_invents_numbers() -> None:
    lines = render(memory(Canned({"allocator": [], "router": [{"memoryUsage": 2048}]}),
                          Options()), csv=False)
    assert lines[0] == "No memory pool statistics: the router does not keep memory pools"
    assert lines[-1].split() == ["2.00", "KiB", "-"]
    unknown = render(memory(Canned({"router": [{}]}), Options()), csv=False)
    assert unknown[-1].split() == ["-", "-"]


def test_log_lines_and_limit() -> None:
    log = [["SERVER", "info", f"line {n}", "f.py", 1, 0.0] for n in range(5)] + [["bad"]]
    lines = log_lines(Canned({}, log), Options(limit=2))
    assert len(lines) == 2 and lines[-1] == "['bad']"
    assert str(lines[0]).endswith(" SERVER (info) line 4")


def test_limit_is_passed_to_the_query_but_never_for_the_router_entity() -> None:
    canned = Canned({"connection": [{"identity": str(n)} for n in range(5)],
                     "router": [{"id": "R"}]})
    lines = run(VIEWS[1], canned, Options(limit=2), csv=True)
    assert lines[1:4] == ["R", "", "Connections"]
    assert lines[5:] == ['"0","-","-","-","-","-","no-security","no-auth","-"',
                         '"1","-","-","-","-","-","no-security","no-auth","-"']
    assert (PREFIX + "connection", 2) in canned.queries
    assert (PREFIX + "router", None) in canned.queries


@pytest.mark.parametrize("view", VIEWS, ids=[v.dest for v in VIEWS])
def test_every_view_copes_with_a_router_that_reports_nothing(view: Any) -> None:
    empty = Canned({t: [] for t in ("router", "connection", "router.link", "router.node",
                                    "router.address", "allocator", "router.config.autoLink",
                                    "router.config.linkRoute")})
    lines = run(view, empty, Options(), csv=False)
    assert lines or view.show is log_lines  # an empty log prints nothing
