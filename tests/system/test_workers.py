"""``hopd --workers N``: one router on N worker processes
(docs/scaling.md#workers): one port, messages between clients of any
workers, a killed worker started again while the others go on, one
SIGTERM stopping them all."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import time
from pathlib import Path
from typing import Any

from proton import Delivery
from proton.utils import BlockingConnection, ConnectionClosed

from tests.system.clients import connect, deliver_across, receive_all, send_async, wait_all
from tests.system.conftest import StartRouter
from tests.system.harness import LISTENING, Hop, router_conf
from tests.system.mgmt import PREFIX, Management
from tests.system.network import interior_conf
from tests.system.sasl_users import PASSWORD, make_users
from tests.system.test_console_api import basic, request
from tests.system.test_metrics import HTTP_LISTENER, scrape
from tests.waiting import wait_for

WORKERS = ("--workers", "2")


def _started(start_router: StartRouter, *args: str) -> Hop:
    hop = start_router(router_conf(router_id="W"), args=(*WORKERS, *args))
    hop.wait_log(r"Operational, 2 Threads Running")
    return hop


def _worker_pid(hop: Hop, index: int) -> int:
    """The live process of worker ``index``: the last one the log started."""
    found = re.findall(rf"Worker {index} started \(process ID (\d+)\)", hop.log_text())
    assert found, hop.log_text()
    return int(found[-1])


def _node_of(url: str) -> str:
    """The node a new connection to ``url`` lands on (its container id)."""
    conn = connect(url)
    try:
        return str(conn.conn.remote_container)
    finally:
        conn.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: its parent has not reaped it yet.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ")[1][0] != "Z"


def test_one_port_serves_every_worker_and_messages_cross(start_router: StartRouter) -> None:
    hop = _started(start_router)
    seen: set[str] = set()
    deadline = time.monotonic() + 20
    while seen != {"W", "W.w1"} and time.monotonic() < deadline:
        seen.add(_node_of(hop.url))
    assert seen == {"W", "W.w1"}, "every worker accepts on the one port"
    # Producers and consumers land on either worker: every message arrives,
    # whether it stays on a worker or crosses to the other.
    for i in range(8):
        assert deliver_across(hop.url, hop.url, f"q{i}", f"m{i}") == Delivery.ACCEPTED


def test_a_killed_worker_is_started_again_and_the_other_goes_on(
        start_router: StartRouter) -> None:
    hop = _started(start_router)
    # A local flow on worker 0: producer and consumer on one connection.
    conn = connect(hop.url)
    while str(conn.conn.remote_container) != "W":
        conn.close()
        conn = connect(hop.url)
    receiver = conn.create_receiver("local", credit=100)
    sender = conn.create_sender("local")
    wait_all([conn], lambda: sender.link.credit > 0, 10, "credit")
    first = _worker_pid(hop, 1)
    before = [send_async(sender, f"before {i}") for i in range(5)]
    os.kill(first, signal.SIGKILL)
    hop.wait_log(r"Worker 1 \(process ID \d+\) was killed by SIGKILL; starting it again")
    after = [send_async(sender, f"after {i}") for i in range(5)]
    bodies = [m.body for m in receive_all(receiver, 10)]
    assert bodies == [f"before {i}" for i in range(5)] + [f"after {i}" for i in range(5)]
    wait_all([conn], lambda: all(d.settled for d in before + after), 15, "every outcome")
    assert {d.remote_state for d in before + after} == {Delivery.ACCEPTED}
    conn.close()
    wait_for(lambda: _worker_pid(hop, 1) != first, 15, "worker 1 started again")
    hop.wait_log(r"Operational, worker 1 of 2, node W.w1 \(process ID "
                 rf"{_worker_pid(hop, 1)}\)")
    assert not _alive(first)
    # The new worker serves clients and is joined to the other again.
    seen: set[str] = set()
    deadline = time.monotonic() + 20
    while "W.w1" not in seen and time.monotonic() < deadline:
        seen.add(_node_of(hop.url))
    assert "W.w1" in seen
    assert deliver_across(hop.url, hop.url, "again", "m") == Delivery.ACCEPTED


def test_sigterm_stops_every_worker_and_sighup_reaches_each(start_router: StartRouter,
                                                           tmp_path: Path) -> None:
    pidfile = tmp_path / "hopd.pid"
    hop = _started(start_router, "--pidfile", str(pidfile))
    assert int(pidfile.read_text()) == hop.proc.pid, "one pidfile: the supervisor's"
    workers = [_worker_pid(hop, 0), _worker_pid(hop, 1)]
    hop.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: hop.log_text().count("Log files reopened") == 2, 10,
             "each worker reopened its log files")
    assert hop.stop() == 0
    assert not any(_alive(pid) for pid in workers)
    assert not pidfile.exists()
    assert "Stopping 2 workers" in hop.log_text()


def test_a_message_in_flight_when_stopping_gets_its_outcome(start_router: StartRouter) -> None:
    hop = _started(start_router)
    conn = connect(hop.url)
    receiver = conn.create_receiver("drain", credit=10)
    sender = conn.create_sender("drain")
    wait_all([conn], lambda: sender.link.credit > 0, 10, "credit")
    delivery = send_async(sender, "late")
    wait_all([conn], lambda: receiver.fetcher.has_message, 10, "the message")
    hop.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    receiver.receive(timeout=1)
    receiver.accept()
    # The worker settles the delivery, then closes the connection: the
    # client may read both in one go.
    with contextlib.suppress(ConnectionClosed):
        wait_all([conn], lambda: delivery.settled, 10, "the outcome")
    assert delivery.settled
    assert delivery.remote_state == Delivery.ACCEPTED
    assert hop.proc.wait(15) == 0


def _on_each_worker(url: str, count: int = 2) -> list[BlockingConnection]:
    """Client connections until each of ``count`` workers serves one (the
    others opened on the way are closed)."""
    chosen: dict[str, BlockingConnection] = {}
    deadline = time.monotonic() + 20
    while len(chosen) < count and time.monotonic() < deadline:
        conn = connect(url)
        node = str(conn.conn.remote_container)
        if node in chosen:
            conn.close()
        else:
            chosen[node] = conn
    assert len(chosen) == count, f"only {sorted(chosen)} took connections"
    return [chosen[node] for node in sorted(chosen)]


def _local_query(mgmt: Management, entity_type: str) -> list[dict[str, Any]]:
    """A QUERY one worker answers for itself alone, through the router network."""
    status, description, body = mgmt.request(
        {"attributeNames": []}, operation="QUERY", type="org.amqp.management", name="self",
        entityType=PREFIX + entity_type, hopWorkerLocal=True)
    assert status == 200, description
    return [dict(zip(body["attributeNames"], row, strict=True)) for row in body["results"]]


def test_management_shows_and_changes_the_whole_router(start_router: StartRouter) -> None:
    hop = _started(start_router)
    clients = _on_each_worker(hop.url)
    receivers = [c.create_receiver(f"seen.{i}", credit=5) for i, c in enumerate(clients)]
    assert len(receivers) == 2
    mgmt = Management(hop.url)
    try:
        first = mgmt.query("connection")
        listed = [c for c in first if c["role"] == "normal"]
        # Both clients and the management connection, whichever worker has them;
        # not the workers' own connections to each other.
        assert len(listed) == 3, listed
        assert not [c for c in mgmt.query("connection") if c["role"] == "inter-router"]
        assert len({c["identity"] for c in listed}) == 3, "identities are the router's"
        addresses = {a["name"]: a for a in mgmt.query("router.address")}
        assert addresses["M0seen.0"]["subscriberCount"] == 1
        assert addresses["M0seen.1"]["subscriberCount"] == 1
        [router] = mgmt.query("router")
        assert router["id"] == "W"
        assert router["workerThreads"] == 2
        assert router["connectionCount"] == 3
        # A change to the configuration is made on every worker.
        status, description, _ = mgmt.request(
            {"prefix": "made", "distribution": "multicast"}, operation="CREATE",
            type=PREFIX + "router.config.address", name="made")
        assert status == 201, description
        for node in ("W", "W.w1"):
            one = Management(hop.url, f"_topo/0/{node}/$management")
            try:
                made = [a for a in _local_query(one, "router.config.address")
                        if a["name"] == "made"]
                assert made, f"the address made on {node}"
            finally:
                one.close()
    finally:
        mgmt.close()
        for c in clients:
            c.close()


def test_metrics_and_the_console_show_the_whole_router(start_router: StartRouter) -> None:
    hop = start_router(router_conf(HTTP_LISTENER, router_id="W"), listeners=2, args=WORKERS)
    hop.wait_log(r"Operational, 2 Threads Running")
    amqp, http_port = dict.fromkeys(int(m.group(2)) for m in LISTENING.finditer(hop.log_text()))
    clients = _on_each_worker(f"amqp://127.0.0.1:{amqp}")
    try:
        # Three messages accepted on each worker, each flow on its own worker.
        for i, conn in enumerate(clients):
            receiver = conn.create_receiver(f"metered.{i}", credit=10)
            sender = conn.create_sender(f"metered.{i}")
            wait_all([conn], lambda s=sender: s.link.credit > 0, 10, "credit")
            sent = [send_async(sender, n) for n in range(3)]
            receive_all(receiver, 3)
            wait_all([conn], lambda d=sent: all(x.settled for x in d), 10, "outcomes")
        status, _, samples = scrape(http_port)
        assert status == 200
        # Whichever worker answered, it counts both workers' deliveries and
        # clients (the scrape's own HTTP connection is not an AMQP one).
        assert samples["qdr_accepted_deliveries_total"] == 6
        assert samples["qdr_connections_total"] == 2
        assert samples["hop_connections{role=normal}"] == 2
        assert samples["hop_connections{role=inter-router}"] == 0
        # The console's endpoint lists every worker's connections too.
        status, body, _ = request(http_port, "GET", "/api/v1/connection?attributes=role")
        assert status == 200
        assert [row[0] for row in body["results"]] == ["normal", "normal"]
    finally:
        for conn in clients:
            conn.close()


def test_users_log_in_on_every_worker_and_the_console_changes_each(
        start_router: StartRouter, tmp_path: Path) -> None:
    (tmp_path / "sasl").mkdir()
    users = make_users(tmp_path / "sasl", ("alice",))
    plain = ("    authenticatePeer: yes\n    saslMechanisms: PLAIN\n"
             "    allowInsecureMechanisms: yes\n")
    hop = start_router(
        f"router {{\n    mode: standalone\n    id: W\n    workerThreads: 2\n"
        f"    saslConfigDir: {users.config_dir}\n    saslConfigName: {users.config_name}\n}}\n"
        "listener {\n    host: 127.0.0.1\n    port: 0\n}\n"
        f"listener {{\n    host: 127.0.0.1\n    port: 0\n    http: yes\n{plain}}}\n"
        f"listener {{\n    host: 127.0.0.1\n    port: 0\n{plain}}}\n", listeners=3)
    hop.wait_log(r"Operational, 2 Threads Running")
    # A user logs in whichever worker serves the connection (each sets its
    # SASL library up from the conf file, the workers' own listener too).
    served: set[str] = set()
    deadline = time.monotonic() + 20
    while served != {"W", "W.w1"} and time.monotonic() < deadline:
        conn = BlockingConnection(f"amqp://127.0.0.1:{hop.ports[2]}", user="alice@hop",
                                  password=PASSWORD, allowed_mechs="PLAIN", timeout=10)
        served.add(str(conn.conn.remote_container))
        conn.close()
    assert served == {"W", "W.w1"}
    status, made, _ = request(hop.ports[1], "POST", "/api/v1/router.config.address",
                              {"name": "console-made", "prefix": "console-made",
                               "distribution": "closest"}, basic("alice@hop"))
    assert status == 201, made
    for node in ("W", "W.w1"):
        one = Management(hop.url, f"_topo/0/{node}/$management")
        try:
            assert [a for a in _local_query(one, "router.config.address")
                    if a["name"] == "console-made"], f"the address made on {node}"
        finally:
            one.close()


def test_the_conf_files_worker_threads_is_run_and_the_option_overrides_it(
        start_router: StartRouter) -> None:
    conf_text = router_conf(router_id="W").replace("    id: W\n",
                                                    "    id: W\n    workerThreads: 2\n")
    two = start_router(conf_text, name="two")
    two.wait_log(r"Operational, 2 Threads Running")
    mgmt = Management(two.url)
    try:
        [router] = mgmt.query("router", "workerThreads")
        assert router["workerThreads"] == 2
    finally:
        mgmt.close()
    one = start_router(conf_text, name="one", args=("--workers", "1"))
    one.wait_log(r"Operational, 1 Threads Running")
    # An edge router runs one worker, and says why.
    edge = start_router(conf_text.replace("mode: standalone", "mode: edge"), name="edge")
    edge.wait_log(r"Operational, 1 Threads Running")
    assert "is not run by an edge router" in edge.log_text()


def test_two_routers_of_workers_are_two_routers_to_each_other(
        start_router: StartRouter) -> None:
    def started(router_id: str, connectors: dict[int, int]) -> Hop:
        conf_text = interior_conf(router_id, connectors).replace(
            f"    id: {router_id}\n", f"    id: {router_id}\n    workerThreads: 2\n")
        hop = start_router(conf_text, name=router_id, listeners=3)
        hop.wait_log(r"Operational, 2 Threads Running")
        return hop

    a = started("A", {})
    b = started("B", {a.ports[1]: 1})
    # A consumer on any worker of B is known to A as one remote router.
    receiver_conn = connect(b.url)
    receiver_conn.create_receiver("far.away", credit=10)
    mgmt = Management(a.url)
    try:
        def known() -> dict[str, Any] | None:
            rows = [r for r in mgmt.query("router.address") if r["name"] == "M0far.away"]
            return rows[0] if rows and rows[0]["remoteCount"] else None
        wait_for(known, 20, "the address on A")
        row = known()
        assert row is not None
        assert row["remoteCount"] == 1
        assert row["remoteHostRouters"] == ["B"]
        assert row["subscriberCount"] == 0
        # One inter-router connection between them (B's first worker's), as
        # between two routers: the other worker lists its connector, held.
        links = [c for c in mgmt.query("connection") if c["role"] == "inter-router"]
        assert [c["container"] for c in links] == ["B"], links
    finally:
        mgmt.close()
        receiver_conn.close()
    for i in range(4):
        assert deliver_across(a.url, b.url, f"far.{i}", i) == Delivery.ACCEPTED


def test_deliveries_held_by_a_killed_worker_get_an_outcome(start_router: StartRouter) -> None:
    hop = _started(start_router)
    producer, consumer = _on_each_worker(hop.url)  # on W and on W.w1
    try:
        receiver = consumer.create_receiver("held", credit=20)
        sender = producer.create_sender("held")
        wait_all([producer, consumer], lambda: sender.link.credit > 0, 15, "credit")
        sent = [send_async(sender, i) for i in range(10)]
        # The consumer on worker 1 has them all and settles none.
        wait_all([producer, consumer], lambda: len(receiver.fetcher.incoming) == 10, 15,
                 "the messages at the consumer")
        os.kill(_worker_pid(hop, 1), signal.SIGKILL)
        with contextlib.suppress(ConnectionClosed):
            wait_all([producer], lambda: all(d.settled for d in sent), 15, "every outcome")
        assert all(d.settled for d in sent)
        # Not delivered for sure: the producer may send them again.
        assert {d.remote_state for d in sent} <= {Delivery.RELEASED, Delivery.MODIFIED}
    finally:
        producer.close()
        with contextlib.suppress(Exception):
            consumer.close()


EDGE_LISTENER = """listener {
    host: 127.0.0.1
    port: 0
    role: edge
    saslMechanisms: ANONYMOUS
    authenticatePeer: no
}
"""


def test_an_edge_routers_workers_are_one_router(start_router: StartRouter) -> None:
    interior = start_router(router_conf(EDGE_LISTENER, router_id="I").replace(
        "mode: standalone", "mode: interior"), name="interior", listeners=2)
    edge_conf = router_conf(
        f"connector {{\n    host: 127.0.0.1\n    port: {interior.ports[1]}\n    role: edge\n}}\n",
        router_id="E").replace("mode: standalone", "mode: edge")
    edge = start_router(edge_conf, name="edge", args=WORKERS)
    edge.wait_log(r"Operational, 2 Threads Running")
    clients = _on_each_worker(edge.url)
    try:
        for i, conn in enumerate(clients):
            conn.create_receiver(f"edge.{i}", credit=5)
        # Each worker is an edge router of its own uplink: a message from a
        # client of one reaches a client of the other through the interior.
        receiver = clients[1].create_receiver("across", credit=1)
        sender = clients[0].create_sender("across")
        wait_all(clients, lambda: sender.link.credit > 0, 15, "credit through the interior")
        delivery = send_async(sender, "m")
        wait_all(clients, lambda: receiver.fetcher.has_message, 15, "the message")
        assert receive_all(receiver, 1)[0].body == "m"
        wait_all(clients, lambda: delivery.settled, 15, "the outcome")
        assert delivery.remote_state == Delivery.ACCEPTED
        mgmt = Management(edge.url)
        try:
            wait_for(lambda: len([c for c in mgmt.query("connection", "role")
                                  if c["role"] == "normal"]) == 3, 15,
                     "both workers' clients and the management connection")
            addresses = {a["name"]: a for a in mgmt.query("router.address")}
            assert addresses["M0edge.0"]["subscriberCount"] == 1
            assert addresses["M0edge.1"]["subscriberCount"] == 1
            [router] = mgmt.query("router", "id", "workerThreads")
            assert (router["id"], router["workerThreads"]) == ("E", 2)
        finally:
            mgmt.close()
    finally:
        for conn in clients:
            conn.close()


def test_workers_end_when_the_supervisor_is_killed(killable: StartRouter) -> None:
    hop = killable(router_conf(router_id="W"), args=WORKERS)
    hop.wait_log(r"Operational, 2 Threads Running")
    workers = [_worker_pid(hop, 0), _worker_pid(hop, 1)]
    hop.kill()  # SIGKILL: the supervisor passes nothing on
    wait_for(lambda: not any(_alive(pid) for pid in workers), 15,
             "the workers to end with their supervisor")
    # Nothing serves the port any more.
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", hop.ports[0])) != 0
