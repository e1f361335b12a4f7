"""The management agent through real AMQP requests to a running hopd
(docs/operations.md#management)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from proton import Delivery, symbol
from proton.utils import BlockingConnection

from router.adapter.loop.trim import c_heap
from tests.system.clients import (
    KNOWN_PATTERN,
    connect,
    known_pattern,
    send_async,
    wait_all,
    wait_settled,
)
from tests.system.conftest import StartRouter
from tests.system.harness import Hop
from tests.system.mgmt import PREFIX, Management
from tests.system.network import start_network


@pytest.fixture
def mgmt(hop: Hop) -> Iterator[Management]:
    client = Management(hop.url)
    yield client
    client.close()


def test_node_operations_describe_the_schema(mgmt: Management) -> None:
    status, _, types = mgmt.request(operation="GET-TYPES", type="org.amqp.management",
                                    name="self")
    assert status == 200
    assert types[PREFIX + "router.link"] == [PREFIX + "operationalEntity", PREFIX + "entity"]
    _, _, operations = mgmt.request(operation="GET-OPERATIONS", name="self",
                                    entityType=PREFIX + "router.link")
    assert operations == {PREFIX + "router.link": ["UPDATE", "READ"]}
    _, _, operations = mgmt.request(operation="GET-OPERATIONS", name="self",
                                    entityType=PREFIX + "sslProfile")
    assert operations == {PREFIX + "sslProfile": ["CREATE", "UPDATE", "DELETE", "READ"]}
    _, _, attributes = mgmt.request(operation="GET-ATTRIBUTES", name="self",
                                    entityType=PREFIX + "log")
    assert attributes[PREFIX + "log"][:4] == ["name", "identity", "type", "module"]
    _, _, schema = mgmt.request(operation="GET-SCHEMA", name="self")
    listener = schema["entityTypes"]["listener"]
    assert listener["attributes"]["port"]["default"] == "amqp"
    ssl_profile = schema["entityTypes"]["sslProfile"]["attributes"]
    assert ssl_profile["certFile"] == {"type": "path", "description": "own certificate (PEM)",
                                       "create": True, "update": True}
    assert mgmt.request(operation="GET-MGMT-NODES", name="self")[2] == []


def test_query_lists_the_agents_own_addresses_and_the_connection(mgmt: Management) -> None:
    addresses = mgmt.query("router.address", "name", "distribution", "inProcess")
    assert {"name": "M0$management", "distribution": "closest", "inProcess": 1} in addresses
    assert {"name": "L$management", "distribution": "closest", "inProcess": 1} in addresses
    connections = mgmt.query("connection", "identity", "dir", "role", "opened")
    assert connections == [{"identity": "1", "dir": "in", "role": "normal", "opened": True}]
    described = BlockingConnection(mgmt.conn.url, timeout=10,
                                   properties={symbol("app"): "tester"})
    try:
        [details] = [c for c in mgmt.query("connection", "properties", "isEncrypted", "sasl",
                                           "host", "container")
                     if c["container"] == described.conn.container]
    finally:
        described.close()
    assert details["properties"] == {"app": "tester"}
    assert details["isEncrypted"] is False and details["sasl"] == "ANONYMOUS"
    assert details["host"].startswith("127.0.0.1:")


def test_counters_after_a_known_traffic_pattern(hop: Hop, mgmt: Management) -> None:
    conn = connect(hop.url)

    def last_delivery() -> object:
        [row] = [c for c in mgmt.query("connection", "container", "lastDlvSeconds")
                 if c["container"] == conn.conn.container]
        return row.get("lastDlvSeconds")

    assert last_delivery() is None, "no delivery on it yet"
    assert known_pattern(conn, "counted") == KNOWN_PATTERN
    assert last_delivery() == 0
    links = {(row["linkDir"], row["owningAddr"]): row for row in mgmt.query(
        "router.link", "linkDir", "owningAddr", "deliveryCount", "acceptedCount",
        "rejectedCount", "releasedCount")}
    assert links[("in", "M0counted")]["deliveryCount"] == 15
    assert links[("out", "M0counted")]["acceptedCount"] == 10
    assert links[("out", "M0counted")]["rejectedCount"] == 3
    assert links[("out", "M0counted")]["releasedCount"] == 2
    [address] = [a for a in mgmt.query("router.address", "name", "deliveriesIngress",
                                       "deliveriesEgress", "subscriberCount")
                 if a["name"] == "M0counted"]
    assert address == {"name": "M0counted", "deliveriesIngress": 15, "deliveriesEgress": 15,
                       "subscriberCount": 1}
    conn.close()
    [router] = mgmt.query("router", "acceptedDeliveries", "rejectedDeliveries",
                          "releasedDeliveries", "deliveriesIngress")
    # The management requests themselves are accepted deliveries too.
    assert router["rejectedDeliveries"] == 3 and router["releasedDeliveries"] == 2
    assert router["acceptedDeliveries"] >= 10


def test_the_router_says_what_memory_it_holds(mgmt: Management) -> None:
    [router] = mgmt.query("router", "memoryUsage", "residentMemory", "heapInUse", "heapFree")
    assert 0 < router["residentMemory"] < router["memoryUsage"]
    if c_heap() is not None:  # glibc: what its heap holds, within what is resident
        assert 0 < router["heapInUse"] < router["residentMemory"]
        assert 0 <= router["heapFree"] < router["residentMemory"]
    else:
        assert router["heapInUse"] is None and router["heapFree"] is None


def test_presettled_messages_with_nowhere_to_go_count_as_dropped(hop: Hop,
                                                               mgmt: Management) -> None:
    [before] = mgmt.query("router", "droppedPresettledDeliveries")
    conn = connect(hop.url)
    sender = conn.create_sender(None, name="dropper")
    for n in range(3):
        delivery = send_async(sender, f"lost {n}", address="nobody.here")
        delivery.settle()
    conn.wait(lambda: any(
        row["name"] == "dropper" and row["droppedPresettledCount"] == 3
        for row in mgmt.query("router.link", "name", "droppedPresettledCount")),
        timeout=10, msg="the sender's link counting the drops")
    [after] = mgmt.query("router", "droppedPresettledDeliveries")
    assert after["droppedPresettledDeliveries"] - before["droppedPresettledDeliveries"] == 3
    conn.close()


def test_created_address_changes_the_distribution_of_new_links(hop: Hop,
                                                                mgmt: Management) -> None:
    status, _, created = mgmt.request({"prefix": "fan", "distribution": "multicast"},
                                      operation="CREATE", type=PREFIX + "router.config.address",
                                      name="fan-out")
    assert status == 201 and created["distribution"] == "multicast"
    conn = connect(hop.url)
    receivers = [conn.create_receiver("fan/1", name=f"fan-{i}", credit=10) for i in range(2)]
    sender = conn.create_sender("fan/1")
    conn.wait(lambda: sender.link.credit > 0, timeout=10)
    send_async(sender, "both")
    assert [r.receive(timeout=10).body for r in receivers] == ["both", "both"]
    status, _, body = mgmt.request(operation="DELETE", type=PREFIX + "router.config.address",
                                   name="fan-out")
    assert (status, body) == (204, {})
    assert mgmt.request(operation="READ", type=PREFIX + "router.config.address",
                        name="fan-out")[:2] == (404, "Not Found: no entity with name=fan-out")
    conn.close()


def test_the_default_log_shows_what_the_other_modules_inherit(hop: Hop,
                                                               mgmt: Management) -> None:
    """As qdrouterd: the DEFAULT module's unset settings read as their defaults;
    another module's unset ones stay unset (it inherits)."""
    status, _, default = mgmt.request(operation="READ", type=PREFIX + "log",
                                      name="log/DEFAULT")
    assert status == 200
    assert (default["includeTimestamp"], default["includeSource"]) == (True, False)
    assert default["enable"] and default["outputFile"]
    _, _, core = mgmt.request(operation="READ", type=PREFIX + "log", name="log/ROUTER_CORE")
    assert core["includeTimestamp"] is None


def test_log_level_update_takes_effect(hop: Hop, mgmt: Management) -> None:
    status, _, row = mgmt.request({"enable": "trace+"}, operation="UPDATE",
                                  type=PREFIX + "log", name="log/ROUTER_CORE")
    assert status == 200 and row["enable"] == "trace+"
    conn = connect(hop.url)
    conn.create_receiver("traced", credit=1)
    conn.close()
    hop.wait_log(r"ROUTER_CORE \(debug\) address record AddressRecord\('M0traced'")


@pytest.mark.parametrize(("properties", "body", "status", "description"), [
    ({}, None, 400, "No 'operation' property in the request"),
    ({"operation": "READ", "type": PREFIX + "nothing", "name": "x"}, None, 404,
     "Unknown entity type 'org.apache.qpid.dispatch.nothing'"),
    ({"operation": "READ", "type": PREFIX + "listener"}, None, 400,
     "No name or identity provided"),
    ({"operation": "CREATE", "type": PREFIX + "router.config.address", "name": "b"}, [1], 400,
     "Body of a CREATE request must be a map, got a list"),
    ({"operation": "CREATE", "type": PREFIX + "router.config.address", "name": "b"},
     {"prefix": "a", "colour": "red"}, 400,
     "Unknown attribute 'colour' for type 'org.apache.qpid.dispatch.router.config.address'"),
    ({"operation": "CREATE", "type": PREFIX + "router.config.address", "name": "b"},
     {"prefix": "a", "distribution": "sideways"}, 400,
     "invalid value for 'distribution' in section 'address': expected one of 'multicast', "
     "'closest', 'balanced', 'unavailable' (or an index 0..3), got 'sideways'"),
    ({"operation": "CREATE", "type": PREFIX + "connection"}, {}, 501,
     "Operation 'CREATE' not implemented for 'org.apache.qpid.dispatch.connection'"),
    ({"operation": "UPDATE", "type": PREFIX + "log", "name": "log/DEFAULT"},
     {"module": "SERVER"}, 400, "Cannot update attribute 'module' in UPDATE"),
    ({"operation": "QUERY", "name": "self", "entityType": PREFIX + "listener"},
     {"attributeNames": ["port", "colour"]}, 404,
     "Unknown attributes ['colour'] for type org.apache.qpid.dispatch.listener."),
])
def test_bad_requests_get_an_error_status(mgmt: Management, properties: dict[str, object],
                                          body: object, status: int,
                                          description: str) -> None:
    assert mgmt.request(body, **properties)[:2] == (status, description)
    # The router keeps serving.
    assert mgmt.request(operation="GET-MGMT-NODES", name="self")[0] == 200


def test_stuck_and_delayed_deliveries_and_blocked_links_are_counted(hop: Hop,
                                                                     mgmt: Management) -> None:
    conn = connect(hop.url)
    receiver = conn.create_receiver("slow", credit=5)
    idle = conn.create_receiver("starved", credit=0)
    assert idle is not None
    sender = conn.create_sender("slow")
    conn.wait(lambda: sender.link.credit > 0, timeout=10)
    delivery = send_async(sender, "held")
    assert receiver.receive(timeout=10).body == "held"  # received, never settled
    hop.wait_log(r"\[C\d+\]\[L\d+\] 1 delivery unsettled for more than 10 seconds",
                 timeout=20)
    links = {(row["linkDir"], row["owningAddr"]): row for row in mgmt.query(
        "router.link", "linkDir", "owningAddr", "deliveriesStuck", "zeroCreditSeconds")}
    assert links[("in", "M0slow")]["deliveriesStuck"] == 1
    assert links[("out", "M0slow")]["deliveriesStuck"] == 1
    # Stuck now: the producer's delivery and the consumer's, as qdrouterd counts.
    assert mgmt.query("router", "deliveriesStuck") == [{"deliveriesStuck": 2}]
    hop.wait_log(r"Link blocked with zero credit for 10 seconds", timeout=10)
    [starved] = [row for row in mgmt.query("router.link", "owningAddr", "zeroCreditSeconds")
                 if row["owningAddr"] == "M0starved"]
    assert starved["zeroCreditSeconds"] >= 10
    receiver.accept()
    assert wait_settled(conn, delivery) == Delivery.ACCEPTED
    time.sleep(2.5)  # the next sweeps see it settled

    def delayed() -> dict[str, object]:
        [row] = [r for r in mgmt.query("router.link", "linkDir", "owningAddr",
                                       "deliveriesDelayed1Sec", "deliveriesDelayed10Sec")
                 if (r["linkDir"], r["owningAddr"]) == ("in", "M0slow")]
        return row

    assert delayed()["deliveriesDelayed10Sec"] == 1
    assert delayed()["deliveriesDelayed1Sec"] == 0
    [router] = mgmt.query("router", "deliveriesStuck", "deliveriesDelayed10Sec", "linksBlocked")
    # Settled: stuck no more. Blocked: the starved receiver only; this
    # management client's reply link is without credit between requests, but
    # each request brings it credit, which ends a zero-credit spell at once.
    assert router == {"deliveriesStuck": 0, "deliveriesDelayed10Sec": 1, "linksBlocked": 1}
    conn.close()


def test_a_link_is_blocked_while_credit_is_withheld_not_when_the_router_spent_it(
        start_router: StartRouter) -> None:
    """A producer the router gives no credit and a consumer that gives none
    are blocked; a reply link whose one credit the router spent, on a client
    that reads its reply and then goes quiet, is not (qdrouterd's reading)."""
    hop: Hop = start_router(args=("-T",))  # blocked after 3 s
    quiet = Management(hop.url)
    assert quiet.request(operation="GET-MGMT-NODES", name="self")[0] == 200
    conn = connect(hop.url)
    sender = conn.create_sender("blocked.tx")  # no consumer: no credit
    idle = conn.create_receiver("blocked.rx", credit=0)
    hop.wait_log(r"Link blocked with zero credit for 3 seconds", timeout=10)
    time.sleep(1.5)  # a sweep after both links went 3 s without credit
    mgmt = Management(hop.url)

    def blocked() -> int:
        [router] = mgmt.query("router", "linksBlocked")
        return int(router["linksBlocked"])

    def producer() -> dict[str, object]:
        [row] = [r for r in mgmt.query("router.link", "linkDir", "owningAddr",
                                       "creditAvailable", "zeroCreditSeconds")
                 if (r["linkDir"], r["owningAddr"]) == ("in", "M0blocked.tx")]
        return row

    assert blocked() == 2
    assert producer()["creditAvailable"] == 0
    assert int(producer()["zeroCreditSeconds"]) >= 3  # type: ignore[call-overload]
    receiver = conn.create_receiver("blocked.tx", credit=10)
    conn.wait(lambda: sender.link.credit == 250, timeout=10)
    assert producer()["creditAvailable"] == 250
    assert producer()["zeroCreditSeconds"] == 0
    idle.flow(10)
    conn.wait(lambda: blocked() == 0, timeout=10)
    receiver.close()
    quiet.close()
    mgmt.close()
    conn.close()


def test_another_routers_agent_is_reached_through_the_network(
        start_router: StartRouter) -> None:
    net = start_network(start_router, {"A": [], "B": ["A"]})
    remote = Management(net.url("A"), address="_topo/0/B/$management")
    try:
        [router] = remote.query("router", "id")
        assert router == {"id": "B"}
        nodes = {row["id"]: row for row in remote.query("router.node", "id", "nextHop",
                                                        "cost", "address")}
        assert nodes["A"]["cost"] == 1 and nodes["A"]["nextHop"] is None
        assert nodes["A"]["address"] == "amqp:/_topo/0/A"  # as qdrouterd: the router's own
    finally:
        remote.close()
    local = Management(net.url("A"))
    try:
        _, _, nodes = local.request(operation="GET-MGMT-NODES", name="self")
        assert nodes == ["amqp:/_topo/0/A/$management", "amqp:/_topo/0/B/$management"]
    finally:
        local.close()


def test_every_router_a_message_crossed_counts_its_outcome(start_router: StartRouter) -> None:
    """As in qdrouterd, an outcome counts on each router's incoming link,
    the one from the other router too; deliveries count where they enter
    and leave the network."""
    net = start_network(start_router, {"A": [], "B": ["A"]})
    at_b = Management(net.url("B"))
    counters = ("acceptedDeliveries", "deliveriesIngress", "deliveriesEgress")
    try:
        consumer = connect(net.url("B"))
        receiver = consumer.create_receiver("crossing", credit=10)
        [before] = at_b.query("router", *counters)
        producer = connect(net.url("A"))
        sender = producer.create_sender("crossing")
        sent = [send_async(sender, f"m{i}") for i in range(4)]
        wait_all([producer, consumer], lambda: receiver.fetcher.has_message == 4,
                 what="arrivals")
        for _ in sent:
            receiver.receive(timeout=10)
            receiver.accept()
        wait_all([producer, consumer], lambda: all(d.settled for d in sent), what="outcomes")
        assert [d.remote_state for d in sent] == [Delivery.ACCEPTED] * 4
        [after] = at_b.query("router", *counters)
        delta = {k: after[k] - before[k] for k in counters}
        # The queries themselves are one more delivery in and out, accepted.
        assert delta == {"acceptedDeliveries": 5, "deliveriesIngress": 1,
                         "deliveriesEgress": 5}
        producer.close()
        consumer.close()
    finally:
        at_b.close()


def test_a_request_without_reply_to_is_rejected(hop: Hop, mgmt: Management) -> None:
    conn = connect(hop.url)
    sender = conn.create_sender("$management")
    delivery = send_async(sender, None, properties={"operation": "GET-TYPES",
                                                    "name": "self"})
    assert wait_settled(conn, delivery) == Delivery.REJECTED
    conn.close()
    assert mgmt.request(operation="GET-MGMT-NODES", name="self")[0] == 200
