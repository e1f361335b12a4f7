"""Run-time CREATE, UPDATE and DELETE through the management agent: listeners,
connectors, connections, link routes, auto-links and sslProfiles take
effect at once (docs/operations.md#changes-at-run-time)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Delivery
from proton.utils import ConnectionClosed

from tests.system.brokered import LOG_INFO, broker_connector, wait_autolinks
from tests.system.certs import KEY_PASSWORD, make_pki
from tests.system.clients import connect, pump, send_async, send_settled, wait_all
from tests.system.conftest import StartRouter
from tests.system.harness import Hop, router_conf
from tests.system.mgmt import PREFIX, Management
from tests.system.rabbitmq import RabbitMQ, free_port
from tests.waiting import wait_for


@pytest.fixture
def mgmt(hop: Hop) -> Iterator[Management]:
    client = Management(hop.url)
    yield client
    client.close()


def _refused(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_a_created_listener_listens_and_a_deleted_one_stops(hop: Hop,
                                                             mgmt: Management) -> None:
    status, _, row = mgmt.request(
        {"host": "127.0.0.1", "port": "0", "saslMechanisms": "ANONYMOUS",
         "authenticatePeer": False}, operation="CREATE", type=PREFIX + "listener",
        name="extra")
    assert status == 201, row
    port = int(row["port"])
    assert port != 0 and row["name"] == "extra" and row["host"] == "127.0.0.1"
    hop.wait_log(rf"Listening on 127\.0\.0\.1:{port} \(extra\)")
    conn = connect(f"amqp://127.0.0.1:{port}")
    receiver = conn.create_receiver("via-extra", credit=5)
    assert [r["name"] for r in mgmt.query("listener", "name")] == \
        [f"listener/127.0.0.1:{hop.ports[0]}", "extra"]

    status, _, _ = mgmt.request(operation="DELETE", type=PREFIX + "listener", name="extra")
    assert status == 204
    assert _refused(port), "a deleted listener no longer accepts connections"
    # The connection it accepted stays up and keeps its link.
    other = connect(hop.url)
    sender = other.create_sender("via-extra")
    other.wait(lambda: sender.link.credit > 0, timeout=10)
    delivery = send_async(sender, "still here")
    pump(other, 0.2)
    assert receiver.receive(timeout=10).body == "still here"
    receiver.accept()
    wait_all([conn, other], lambda: delivery.settled, what="the outcome")
    assert delivery.remote_state == Delivery.ACCEPTED
    conn.close()
    other.close()


def test_creating_a_listener_on_a_busy_port_is_refused(hop: Hop, mgmt: Management) -> None:
    status, description, _ = mgmt.request(
        {"host": "127.0.0.1", "port": str(hop.ports[0])}, operation="CREATE",
        type=PREFIX + "listener", name="clash")
    assert status == 400
    assert description.startswith(f"Cannot listen on 127.0.0.1:{hop.ports[0]}: ")
    assert mgmt.query("listener", "name") == [{"name": f"listener/127.0.0.1:{hop.ports[0]}"}]


def test_a_listener_created_without_a_host_shows_the_host_as_given(
        hop: Hop, mgmt: Management) -> None:
    """"" (every interface), as qdrouterd shows it; it listens on all of them."""
    status, _, row = mgmt.request({"port": "0", "saslMechanisms": "ANONYMOUS"},
                                  operation="CREATE", type=PREFIX + "listener", name="any")
    assert status == 201 and row["host"] == ""
    hop.wait_log(rf"Listening on 0\.0\.0\.0:{row['port']} \(any\)")


@pytest.mark.parametrize("kind", ["listener", "connector"])
def test_a_standalone_router_refuses_to_create_an_inter_router_listener_or_connector(
        hop: Hop, mgmt: Management, kind: str) -> None:
    """Checked as a conf file is (qdrouterd refuses it too)."""
    status, description, _ = mgmt.request(
        {"host": "127.0.0.1", "port": str(free_port()), "role": "inter-router"},
        operation="CREATE", type=PREFIX + kind, name="bad")
    assert status == 400
    assert description == ("role='standalone' not allowed to connect to or accept "
                           "connections from other routers. (a "
                           f"{kind} with role 'inter-router' on a standalone router)")
    # The role is the reason even when another attribute is wrong too, as
    # qdrouterd's clients expect.
    _, description, _ = mgmt.request(
        {"host": "127.0.0.1", "port": "77777", "role": "inter-router"},
        operation="CREATE", type=PREFIX + kind, name="bad")
    assert description.startswith("role='standalone' not allowed")
    assert [r for r in mgmt.query(kind, "name") if r["name"] == "bad"] == []


def test_a_created_connector_connects_and_a_deleted_one_closes(
        start_router: StartRouter, hop: Hop, mgmt: Management) -> None:
    other = start_router(router_conf(router_id="Other"), name="other")
    peer = Management(other.url)
    try:
        status, _, row = mgmt.request(
            {"host": "127.0.0.1", "port": str(other.ports[0]), "role": "normal"},
            operation="CREATE", type=PREFIX + "connector", name="to-other")
        assert status == 201, row

        def from_hop() -> list[dict[str, object]]:
            return [c for c in peer.query("connection", "container", "dir")
                    if c["container"] == "HopTest"]

        wait_for(lambda: from_hop() == [{"container": "HopTest", "dir": "in"}], 15.0,
              "the created connector to connect")
        [connector] = mgmt.query("connector", "name", "connectionStatus")
        assert connector == {"name": "to-other", "connectionStatus": "SUCCESS"}

        status, _, _ = mgmt.request(operation="DELETE", type=PREFIX + "connector",
                                    name="to-other")
        assert status == 204
        wait_for(lambda: from_hop() == [], 15.0, "the deleted connector's connection to close")
        time.sleep(2.5)  # past the reconnect delay of a dropped connection
        assert from_hop() == [], "a deleted connector does not reconnect"
        assert mgmt.query("connector", "name") == []
    finally:
        peer.close()


def test_a_connection_is_closed_by_updating_its_admin_status(hop: Hop,
                                                             mgmt: Management) -> None:
    victim = connect(hop.url)
    victim.create_receiver("doomed", credit=1)
    [row] = [c for c in mgmt.query("connection", "identity", "container")
             if c["container"] == victim.conn.container]
    status, description, _ = mgmt.request(operation="DELETE", type=PREFIX + "connection",
                                          identity=row["identity"])
    assert (status, description.split(":")[0]) == (403, "Forbidden"), "closed by UPDATE only"
    status, _, updated = mgmt.request({"adminStatus": "deleted"}, operation="UPDATE",
                                      type=PREFIX + "connection", identity=row["identity"])
    assert (status, updated["adminStatus"]) == (200, "deleted")
    assert all(c["container"] != victim.conn.container
               for c in mgmt.query("connection", "container")), \
        "a connection the router closed is no longer listed, as in qdrouterd"
    with pytest.raises(ConnectionClosed) as closed:
        victim.wait(lambda: False, timeout=10)
    assert "amqp:connection:forced" in str(closed.value)
    wait_for(lambda: all(c["container"] != victim.conn.container
                      for c in mgmt.query("connection", "container")), 15.0,
          "the connection to go")
    status, description, _ = mgmt.request({"adminStatus": "paused"}, operation="UPDATE",
                                          type=PREFIX + "connection", identity="1")
    assert status == 400 and "adminStatus" in description


def test_ssl_profiles_are_created_read_and_deleted_without_their_password(
        mgmt: Management, tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    status, _, row = mgmt.request(
        {"certFile": str(pki.server_cert), "privateKeyFile": str(pki.server_key_encrypted),
         "password": f"pass:{KEY_PASSWORD}"}, operation="CREATE", type=PREFIX + "sslProfile",
        name="tls")
    assert status == 201 and row["certFile"] == str(pki.server_cert)
    assert row["password"] is None
    status, _, read = mgmt.request(operation="READ", type=PREFIX + "sslProfile", name="tls")
    assert (status, read["identity"], read["password"]) == (200, "sslProfile/tls", None)
    # A row read and sent back keeps the password it does not show: the key loads.
    status, description, _ = mgmt.request(read, operation="UPDATE",
                                          type=PREFIX + "sslProfile", identity="sslProfile/tls")
    assert (status, description) == (200, "OK")
    assert mgmt.request(operation="DELETE", type=PREFIX + "sslProfile", name="tls")[0] == 204
    assert mgmt.query("sslProfile", "name") == []


def test_link_routes_and_auto_links_are_created_and_deleted_at_run_time(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + LOG_INFO))
    mgmt = Management(hop.url)
    client = connect(hop.url)
    try:
        wait_for(lambda: mgmt.query("connector", "connectionStatus")
              == [{"connectionStatus": "SUCCESS"}], 15.0, "the broker connection")
        for direction in ("in", "out"):
            status, _, row = mgmt.request(
                {"prefix": "rtlr", "direction": direction, "connection": "broker"},
                operation="CREATE", type=PREFIX + "router.config.linkRoute",
                name=f"rtlr-{direction}")
            assert (status, row["operStatus"]) == (201, "active"), row
        sender = client.create_sender("rtlr.q")
        assert send_settled(client, sender, ["routed"]) == [Delivery.ACCEPTED]
        assert rabbitmq.queue_depth("rtlr.q") == 1
        sender.close()
        status, _, _ = mgmt.request(operation="DELETE", type=PREFIX + "router.config.linkRoute",
                                    name="rtlr-in")
        assert status == 204
        assert [r["name"] for r in mgmt.query("router.config.linkRoute", "name")] == ["rtlr-out"]
        # Without the route a sender is an ordinary producer with no consumer.
        later = client.create_sender("rtlr.q")
        time.sleep(0.5)
        assert later.link.credit == 0 and rabbitmq.queue_depth("rtlr.q") == 1

        status, _, row = mgmt.request(
            {"address": "rtal", "direction": "out", "connection": "broker"},
            operation="CREATE", type=PREFIX + "router.config.autoLink", name="rtal-out")
        assert status == 201, row
        wait_autolinks(hop, "rtal", ("out",))
        [autolink] = mgmt.query("router.config.autoLink", "name", "operStatus")
        assert autolink == {"name": "rtal-out", "operStatus": "active"}
        producer = client.create_sender("rtal")
        assert send_settled(client, producer, ["stored"]) == [Delivery.ACCEPTED]
        assert rabbitmq.queue_depth("rtal") == 1
        status, _, _ = mgmt.request(operation="DELETE", type=PREFIX + "router.config.autoLink",
                                    name="rtal-out")
        assert status == 204
        hop.wait_log(r"Auto link deleted")
        wait_for(lambda: all(link["owningAddr"] != "M0rtal" or link["linkDir"] == "in"
                          for link in mgmt.query("router.link", "owningAddr", "linkDir")), 15.0,
              "the auto-link's link to go")
        assert mgmt.query("router.config.autoLink", "name") == []
    finally:
        client.close()
        mgmt.close()


def _frames(hop: Hop, address: str) -> list[str]:
    return [line for line in hop.log_text().splitlines()
            if "PROTOCOL (trace)" in line and "@attach" in line and address in line]


def test_the_protocol_trace_follows_the_module_and_each_connections_switch(
        hop: Hop, mgmt: Management) -> None:
    """docs/operations.md#protocol-trace"""
    quiet = connect(hop.url)
    quiet.create_receiver("untraced")
    traced = connect(hop.url)
    [row] = [c for c in mgmt.query("connection", "identity", "container",
                                   "enableProtocolTrace")
             if c["container"] == traced.conn.container]
    assert row["enableProtocolTrace"] is False
    status, _, updated = mgmt.request({"enableProtocolTrace": "true"}, operation="UPDATE",
                                      type=PREFIX + "connection", identity=row["identity"])
    assert (status, updated["enableProtocolTrace"]) == (200, True)
    traced.create_receiver("alone")
    quiet.create_receiver("still-untraced")
    wait_for(lambda: len(_frames(hop, "alone")) == 2, 15.0, "the traced connection's attaches")
    assert _frames(hop, "untraced") == [] and _frames(hop, "still-untraced") == []

    assert mgmt.request({"enable": "trace+"}, operation="UPDATE", type=PREFIX + "log",
                        name="log/PROTOCOL")[0] == 200
    quiet.create_receiver("everyone")
    wait_for(lambda: len(_frames(hop, "everyone")) == 2, 15.0, "every connection's frames")
    assert mgmt.request({"enable": "info+"}, operation="UPDATE", type=PREFIX + "log",
                        name="log/PROTOCOL")[0] == 200
    quiet.create_receiver("off-again")
    traced.create_receiver("off-for-all")
    time.sleep(0.5)
    assert _frames(hop, "off-again") == [] and _frames(hop, "off-for-all") == []
    quiet.close()
    traced.close()


def test_a_connection_closed_while_its_peer_reads_nothing_lets_go_of_its_socket(
        hop: Hop, mgmt: Management) -> None:
    # A consumer that stopped reading: the router's writes to it fill its
    # socket (the router lends the producer 250 deliveries of 256 KiB). Closed
    # by management, it never answers the close; the router drops it after
    # the close's grace without waiting for room to write.
    from bench.idle import open_idle_connections

    def descriptors() -> int:
        return len(os.listdir(f"/proc/{hop.proc.pid}/fd"))

    with open_idle_connections(hop.ports[0], 1, consumer="full", credit=400):
        producer = connect(hop.url)
        try:
            sender = producer.create_sender("full")
            body = b"x" * 256 * 1024  # 250 of them: more than both sockets hold
            sent = [send_async(sender, body) for _ in range(300)]
            pump(producer, 3.0)  # as much as the sockets take
            assert not all(d.settled for d in sent)
            held = descriptors()
            [row] = [c for c in mgmt.query("connection", "identity", "container")
                     if c["container"] == "idle-0"]
            status, _, _ = mgmt.request({"adminStatus": "deleted"}, operation="UPDATE",
                                        type=PREFIX + "connection", identity=row["identity"])
            assert status == 200
            wait_for(lambda: descriptors() < held, 15.0, "the router to let go of the socket")
        finally:
            producer.close()
