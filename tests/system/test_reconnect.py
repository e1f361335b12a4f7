"""Connectors that reconnect with back-off, fail over along a list of peers,
learn the list a peer announces, and give up after maxReconnectAttempts."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from proton.utils import BlockingConnection

from tests.system.conftest import StartRouter
from tests.system.harness import Hop, router_conf
from tests.system.mgmt import Management
from tests.system.rabbitmq import free_port
from tests.waiting import wait_for


def listener(port: int, extra: str = "") -> str:
    return (f"listener {{\n    host: 127.0.0.1\n    port: {port}\n"
            f"    saslMechanisms: ANONYMOUS\n{extra}}}\n")


def connector(port: int, extra: str = "") -> str:
    return (f"connector {{\n    name: peer\n    host: 127.0.0.1\n    port: {port}\n"
            f"    role: normal\n    saslMechanisms: ANONYMOUS\n{extra}}}\n")


def peer_router(start_router: StartRouter, name: str, port: int, extra: str = "") -> Hop:
    return start_router(router_conf(router_id=name, listener=listener(port, extra)), name=name)


def connector_row(hop: Hop) -> dict[str, Any]:
    client = Management(hop.url)
    try:
        [row] = client.query("connector", "connectionStatus", "connectionMsg",
                             "reconnectAttempts", "nextRetrySeconds", "failoverUrls")
        return row
    finally:
        client.close()


def connected_to(hop: Hop, container: str) -> Callable[[], bool]:
    def check() -> bool:
        client = Management(hop.url)
        try:
            return any(row["container"] == container
                       for row in client.query("connection", "container"))
        finally:
            client.close()
    return check


def test_back_off_reaches_a_router_that_starts_late_within_the_bound(
        start_router: StartRouter) -> None:
    port = free_port()
    a = start_router(router_conf(connector(port, "    initialReconnectDelay: 50\n"
                                                 "    maxReconnectDelay: 800\n"), router_id="A"),
                     name="A")
    failures = re.compile(rf"Connection to 127\.0\.0\.1:{port} failed")
    wait_for(lambda: len(failures.findall(a.log_text())) >= 4, 10, "four failed attempts")
    row = connector_row(a)
    assert row["connectionStatus"] == "CONNECTING" and row["reconnectAttempts"] >= 4
    started = time.monotonic()
    peer_router(start_router, "Late", port)
    wait_for(lambda: connector_row(a)["connectionStatus"] == "SUCCESS", 10, "the connection")
    # The wait between attempts is at most maxReconnectDelay plus 20 % jitter.
    assert time.monotonic() - started < 0.8 * 1.2 + 2.0
    assert connector_row(a)["reconnectAttempts"] == 0, "reset once connected"


def test_failover_to_the_next_peer_when_the_first_dies_and_back(
        start_router: StartRouter) -> None:
    port_b, port_c = free_port(), free_port()
    b = peer_router(start_router, "B", port_b)
    c = peer_router(start_router, "C", port_c)
    a = start_router(router_conf(connector(port_b, f"    failoverUrls: 127.0.0.1:{port_c}\n"
                                                   "    initialReconnectDelay: 50\n"),
                                 router_id="A"), name="A")
    wait_for(connected_to(b, "A"), 10, "A connected to B")
    assert connector_row(a)["failoverUrls"] == \
        f"amqp://127.0.0.1:{port_b}, amqp://127.0.0.1:{port_c}"
    assert b.stop() == 0
    wait_for(connected_to(c, "A"), 10, "A failed over to C")
    b2 = peer_router(start_router, "B2", port_b)
    assert c.stop() == 0
    wait_for(connected_to(b2, "A"), 10, "A back on B")


def test_a_connector_learns_the_failover_list_its_peer_announces(
        start_router: StartRouter) -> None:
    port_b, port_c = free_port(), free_port()
    b = peer_router(start_router, "B", port_b, f"    failoverUrls: 127.0.0.1:{port_c}\n")
    a = start_router(router_conf(connector(port_b, "    initialReconnectDelay: 50\n"),
                                 router_id="A"), name="A")
    wait_for(connected_to(b, "A"), 10, "A connected to B")
    wait_for(lambda: connector_row(a)["failoverUrls"]
             == f"amqp://127.0.0.1:{port_b}, amqp://127.0.0.1:{port_c}", 10,
             "the announced list")
    c = peer_router(start_router, "C", port_c)
    assert b.stop() == 0
    wait_for(connected_to(c, "A"), 10, "A on the announced peer C")


def test_a_listener_announces_its_failover_list_with_a_scheme_only_where_given(
        start_router: StartRouter) -> None:
    port = free_port()
    b = peer_router(start_router, "B", port,
                    "    failoverUrls: second-host:25000, amqps://third-host:5671\n")
    conn = BlockingConnection(b.url, timeout=10)
    try:
        announced = conn.conn.remote_properties["failover-server-list"]
    finally:
        conn.close()
    assert announced == [{"network-host": "second-host", "port": "25000"},
                         {"network-host": "third-host", "port": "5671", "scheme": "amqps"}]


def test_a_listener_sends_its_open_properties_after_the_routers_own(
        start_router: StartRouter) -> None:
    port = free_port()
    b = peer_router(start_router, "B", port,
                    '    openProperties: {"simple": "string", "int": -3, "Null": null, '
                    '"list": [1, "a", false], "map": {"key": "value"}}\n')
    conn = BlockingConnection(b.url, timeout=10)
    try:
        props = dict(conn.conn.remote_properties)
    finally:
        conn.close()
    assert props.pop("product") == "hop" and props.pop("version")
    assert isinstance(props.pop("qd.conn-id"), int)
    assert props == {"simple": "string", "int": -3, "Null": None, "list": [1, "a", False],
                     "map": {"key": "value"}}


def test_max_reconnect_attempts_marks_the_connector_failed(start_router: StartRouter) -> None:
    port = free_port()
    a = start_router(router_conf(connector(port, "    initialReconnectDelay: 20\n"
                                                 "    maxReconnectAttempts: 3\n"),
                                 router_id="A"), name="A")
    a.wait_log(r"Connector to amqp://127\.0\.0\.1:\d+ failed: gave up after 3 attempts")
    row = connector_row(a)
    assert (row["connectionStatus"], row["reconnectAttempts"], row["nextRetrySeconds"]) == \
        ("FAILED", 3, None)
    assert row["connectionMsg"].startswith("Gave up after 3 attempts")
    time.sleep(0.5)
    assert len(re.findall(rf"Connection to 127\.0\.0\.1:{port} failed", a.log_text())) == 3


def test_a_host_name_that_does_not_resolve_is_a_failed_attempt_and_names_work(
        start_router: StartRouter) -> None:
    """A connector's host name is resolved off the loop: one that does not
    resolve is retried like a refused connection, the router keeps serving,
    and a name that resolves connects (to its failover peer here)."""
    port = free_port()
    named = ("connector {\n    name: peer\n    host: nosuchhost.invalid\n    port: 5672\n"
             "    role: normal\n    saslMechanisms: ANONYMOUS\n"
             f"    failoverUrls: amqp://localhost:{port}\n"
             "    initialReconnectDelay: 50\n    maxReconnectDelay: 100\n}\n")
    a = start_router(router_conf(named, router_id="A"), name="A")
    a.wait_log(r"Connection to nosuchhost\.invalid:5672 failed: cannot resolve the host name")
    client = Management(a.url)  # still serving
    [row] = client.query("router", "id")
    client.close()
    assert row == {"id": "A"}
    peer_router(start_router, "Named", port)
    wait_for(connected_to(a, "Named"), 15, "the connection through localhost")
    assert connector_row(a)["connectionStatus"] == "SUCCESS"
