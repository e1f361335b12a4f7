"""Peer groups: routers that find each other by multicast beacons on loopback
and connect themselves, with no connector in their conf."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from proton import Delivery
from proton.handlers import MessagingHandler
from proton.reactor import Container

from router.client_discovery import Discovered, DiscoveryError, discover
from tests.system.clients import connect, deliver_across, pump, send_async
from tests.system.conftest import StartRouter
from tests.system.harness import Hop
from tests.system.mgmt import Management
from tests.system.rabbitmq import free_port
from tests.waiting import wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def member(start_router: StartRouter, router_id: str, group: str, port: int,
           extra: str = "") -> Hop:
    conf = (f"router {{\n    mode: interior\n    id: {router_id}\n}}\n"
            "listener {\n    host: 127.0.0.1\n    port: 0\n    saslMechanisms: ANONYMOUS\n}\n"
            "listener {\n    host: 127.0.0.1\n    port: 0\n    role: inter-router\n"
            "    saslMechanisms: ANONYMOUS\n}\n"
            f"discovery {{\n    group: {group}\n    address: 239.255.77.1\n    port: {port}\n"
            f"    announceInterval: 200\n    expiry: 1500\n{extra}}}\n"
            "log {\n    module: DEFAULT\n    enable: info+\n}\n")
    return start_router(conf, name=router_id, listeners=2)


def direct_peers(hop: Hop) -> set[str]:
    """The routers this one reaches over a connection of its own (cost 1)."""
    client = Management(hop.url)
    try:
        return {row["id"] for row in client.query("router.node", "id", "cost")
                if row["cost"] == 1}
    finally:
        client.close()


def reachable(hop: Hop) -> set[str]:
    """The other routers this one has a route to."""
    client = Management(hop.url)
    try:
        return {row["id"] for row in client.query("router.node", "id", "cost")
                if row["cost"] is not None}
    finally:
        client.close()


def nodes(hop: Hop) -> set[str]:
    client = Management(hop.url)
    try:
        return {row["id"] for row in client.query("router.node", "id")}
    finally:
        client.close()


def test_three_routers_of_one_group_form_a_network_and_route(
        start_router: StartRouter) -> None:
    group, port = f"g-{secrets.token_hex(4)}", free_port()
    started = time.monotonic()
    routers = [member(start_router, name, group, port) for name in ("A", "B", "C")]
    wait_for(lambda: all(nodes(hop) == {"A", "B", "C"} for hop in routers), 30,
             "the group to form a full network")
    wait_for(lambda: all(direct_peers(hop) == {"A", "B", "C"} - {name}
                         for hop, name in zip(routers, "ABC", strict=True)), 30,
             "every pair to be connected and its routes computed")
    formed = time.monotonic() - started
    assert formed < 30
    a, _, c = routers
    consumer = connect(c.url)
    receiver = consumer.create_receiver("grouped", credit=1)
    producer = connect(a.url)
    sender = producer.create_sender("grouped")
    producer.wait(lambda: sender.link.credit > 0, timeout=15)
    send_async(sender, "across the group")
    pump(producer, 0.3)
    assert receiver.receive(timeout=15).body == "across the group"
    producer.close()
    consumer.close()
    # Exactly one connection per pair: A connects to B and C, B to C.
    for hop, outgoing in zip(routers, (2, 1, 0), strict=True):
        client = Management(hop.url)
        try:
            rows = client.query("connection", "role", "dir")
        finally:
            client.close()
        assert sum(1 for r in rows if r == {"role": "inter-router", "dir": "out"}) == outgoing
    assert "Peer group" in a.log_text() and "peer B at 127.0.0.1:" in a.log_text()
    client = Management(a.url)
    try:
        [row] = client.query("discovery", "group", "peers", "beaconsSent", "secret")
    finally:
        client.close()
    assert row["group"] == group and row["peers"] == ["B", "C"] and row["beaconsSent"] > 0


def test_other_groups_and_wrong_secrets_stay_out(start_router: StartRouter) -> None:
    group, port = f"g-{secrets.token_hex(4)}", free_port()
    a = member(start_router, "A", group, port, "    secret: right\n")
    b = member(start_router, "B", group, port, "    secret: right\n")
    stranger = member(start_router, "S", f"{group}-other", port, "    secret: right\n")
    spoof = member(start_router, "W", group, port, "    secret: wrong\n")
    wait_for(lambda: nodes(a) == {"A", "B"} and nodes(b) == {"A", "B"}, 30, "A and B to meet")
    time.sleep(1.0)
    assert nodes(a) == {"A", "B"}
    assert nodes(stranger) == {"S"} and nodes(spoof) == {"W"}
    a.wait_log(r"ignoring a beacon \(other-group")
    a.wait_log(r"ignoring a beacon \(bad-signature")


def test_a_restarted_router_rejoins(start_router: StartRouter) -> None:
    group, port = f"g-{secrets.token_hex(4)}", free_port()
    a = member(start_router, "A", group, port)
    b = member(start_router, "B", group, port)
    wait_for(lambda: nodes(a) == {"A", "B"}, 30, "A and B to meet")
    assert b.stop() == 0
    wait_for(lambda: nodes(a) == {"A"}, 30, "A to lose B")
    a.wait_log(r"peer B gone", timeout=10)
    member(start_router, "B", group, port)
    wait_for(lambda: nodes(a) == {"A", "B"}, 30, "B to rejoin")


def test_a_killed_router_restarted_rejoins_and_routes(start_router: StartRouter) -> None:
    """SIGKILL: no goodbye, the peers see the connection drop; the new
    instance (same id, new port) is heard, connected and routed to."""
    group, port = f"g-{secrets.token_hex(4)}", free_port()
    routers = [member(start_router, name, group, port) for name in ("A", "B", "C")]
    a, b, c = routers
    wait_for(lambda: all(direct_peers(hop) == {"A", "B", "C"} - {name}
                         for hop, name in zip(routers, "ABC", strict=True)), 40,
             "the full mesh")
    b.kill()
    # B stays in their tables (unreachable) until its link state ages out.
    wait_for(lambda: direct_peers(a) == {"C"} and direct_peers(c) == {"A"}, 30,
             "A and C to lose their connections to the dead B")
    wait_for(lambda: "B" not in reachable(a) | reachable(c), 30,
             "A and C to compute that B cannot be reached")
    b2 = member(start_router, "B", group, port)
    wait_for(lambda: all(direct_peers(hop) == {"A", "B", "C"} - {name}
                         for hop, name in zip((a, b2, c), "ABC", strict=True)), 40,
             "B to rejoin every peer")
    assert deliver_across(a.url, b2.url, "rejoined", "to the new B") == Delivery.ACCEPTED


class FailoverClient(MessagingHandler):  # type: ignore[misc]
    """Connects along a discovered list; kills the first router it reaches and
    records which routers it was connected to."""

    def __init__(self, found: Discovered, routers: dict[str, Hop]) -> None:
        super().__init__()
        self.found = found
        self.routers = routers
        self.opened: list[str] = []

    def on_start(self, event: Any) -> None:
        self.found.connect(event.container, handler=self)
        self.guard = event.container.schedule(60, self)

    def on_timer_task(self, event: Any) -> None:
        event.container.stop()

    def on_connection_opened(self, event: Any) -> None:
        self.opened.append(event.connection.remote_container)
        if len(self.opened) == 1:
            self.routers[self.opened[0]].kill()
        else:
            self.guard.cancel()
            event.connection.close()

    def on_transport_error(self, event: Any) -> None:
        pass  # the killed router: proton reconnects along the list


def test_a_client_discovers_the_routers_of_a_group_and_fails_over(
        start_router: StartRouter) -> None:
    group, port = f"g-{secrets.token_hex(4)}", free_port()
    routers = {name: member(start_router, name, group, port) for name in ("A", "B")}
    url = (f"discovery://(multicast://239.255.77.1:{port}?group={group}&interface=127.0.0.1)"
           "?initialReconnectDelay=100&maxReconnectDelay=1000&randomize=false")
    found = discover(url)
    assert found.routers == {name: [hop.url] for name, hop in routers.items()}
    assert found.urls == [routers["A"].url, routers["B"].url]
    client = FailoverClient(found, routers)
    Container(client).run()
    assert client.opened == ["A", "B"], "reconnected to the next router of the list"


def test_client_discovery_needs_the_group_secret(start_router: StartRouter) -> None:
    group, port = f"g-{secrets.token_hex(4)}", free_port()
    member(start_router, "A", group, port, "    secret: right\n")
    base = f"discovery://(multicast://239.255.77.1:{port}?group={group}&interface=127.0.0.1"
    assert list(discover(base + "&secret=right)").routers) == ["A"]
    with pytest.raises(DiscoveryError, match="no router of group"):
        discover(base + "&secret=wrong)?discoveryTimeout=1500")


def test_the_discovery_client_example_fails_over_and_receives_every_tick(
        start_router: StartRouter) -> None:
    group, port = f"g-{secrets.token_hex(4)}", free_port()
    routers = {name: member(start_router, name, group, port) for name in ("A", "B")}
    wait_for(lambda: direct_peers(routers["A"]) == {"B"}, 30, "A and B to connect")
    url = (f"discovery://(multicast://239.255.77.1:{port}?group={group}&interface=127.0.0.1)"
           "?initialReconnectDelay=100&maxReconnectDelay=1000&randomize=false")
    client = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "peer-group" / "client.py"), "--url", url,
         "--count", "12", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert client.stdout is not None
        head = [client.stdout.readline() for _ in range(3)]
        assert head == ["found router A at " + routers["A"].url + "\n",
                        "found router B at " + routers["B"].url + "\n",
                        "connected to router A\n"]
        assert client.stdout.readline() == "received tick 0\n"
        routers["A"].kill()
        out, _ = client.communicate(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    assert client.returncode == 0, out
    assert "connected to router B\n" in out
    ticks = {int(line.rsplit(" ", 1)[1]) for line in out.splitlines()
             if line.startswith("received tick")}
    assert ticks | {0} == set(range(12)), "every tick received at least once"
