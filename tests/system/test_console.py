"""The web console (docs/operations.md#the-web-console) in headless
Chromium against real routers: a 3-router network with an edge router and
a route container, traffic whose rates the page shows, a stuck delivery it
highlights, an address created through management that appears, and
write actions offered only to a user policy lets change the router."""

from __future__ import annotations

import base64
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Message, Timeout
from proton.reactor import Container
from proton.utils import BlockingConnection

from tests.system.cdp import Page, chromium_page
from tests.system.clients import connect, send_async
from tests.system.conftest import StartRouter
from tests.system.harness import LISTENING, Hop
from tests.system.mgmt import Management
from tests.system.network import Network, start_network
from tests.system.sasl_users import PASSWORD, Users, make_users
from tests.waiting import wait_for

HTTP_LISTENER = """\
listener {
    host: 127.0.0.1
    port: 0
    http: yes
}
"""
CONTAINER_LISTENER = """\
listener {
    host: 127.0.0.1
    port: 0
    role: route-container
    saslMechanisms: ANONYMOUS
    idleTimeoutSeconds: 0
}
"""
#: Where ``HOP_CONSOLE_SCREENSHOT`` names no other file, the screenshot stays
#: with the test's files.
SCREENSHOT = os.environ.get("HOP_CONSOLE_SCREENSHOT")


def http_port(hop: Hop, index: int) -> int:
    """The port of the ``index``-th listener the router logged (its HTTP one)."""
    ports: list[int] = []

    def logged() -> bool:
        ports[:] = [int(m.group(2)) for m in LISTENING.finditer(hop.log_text())]
        return len(ports) > index

    wait_for(logged, what="the HTTP listener")
    return ports[index]


@pytest.fixture
def network(start_router: StartRouter) -> Iterator[tuple[Network, int, int]]:
    """R1, R2 and R3 (costs 3, 1 and 5), an edge E1 on R2, a route-container
    listener on R3; R1 serves the console. Yields the network, R1's HTTP
    port and R3's route-container port."""
    net = start_network(
        start_router, {"R1": [], "R2": ["R1"], "R3": ["R1", "R2"]},
        costs={("R2", "R1"): 3, ("R3", "R1"): 1, ("R3", "R2"): 5},
        extras={"R1": HTTP_LISTENER, "R3": CONTAINER_LISTENER},
        edges={"E1": ["R2"]})
    yield net, http_port(net["R1"], 3), http_port(net["R3"], 3)


def console_dom(page: Page, expression: str) -> str:
    return f"(() => {{ {expression} }})()"


def graph(page: Page) -> dict[str, object]:
    return dict(page.evaluate(console_dom(page, """
        const q = s => [...document.querySelectorAll(s)];
        return {
          routers: q('#network g.router').map(g => g.dataset.id).sort(),
          edges: q('#network g.edge').map(g => g.dataset.id + '@' + g.dataset.router),
          containers: q('#network g.container').map(g => g.dataset.id + '@' + g.dataset.router),
          links: q('#network line.link').map(l =>
            [l.dataset.from, l.dataset.to].sort().join('-') + ':' + l.dataset.cost).sort(),
        };""")))


def test_the_console_shows_the_network_its_rates_and_a_stuck_delivery(
        network: tuple[Network, int, int], tmp_path: Path) -> None:
    net, port, container_port = network
    broker_container = Container()
    broker_container.container_id = "broker-1"
    broker = BlockingConnection(f"amqp://127.0.0.1:{container_port}", timeout=10,
                                container=broker_container)
    stop = threading.Event()
    traffic = threading.Thread(target=_traffic, args=(net.url("R3"), net.url("R2"), stop),
                               daemon=True)
    stuck = connect(net.url("R1"))
    try:
        with chromium_page(tmp_path / "chromium") as page:
            page.open(f"http://127.0.0.1:{port}/")
            # The routes converge before R1 may hold R2's link state with R3 in
            # it (R2-R3 is on no shortest path from R1): wait for the link too.
            page.wait_for("document.querySelectorAll('#network g.router').length === 3 && "
                          "document.querySelectorAll('#network g.edge').length === 1 && "
                          "document.querySelectorAll('#network g.container').length === 1 && "
                          "document.querySelectorAll('#network line.link').length === 3",
                          what="three routers, their three links, an edge and a route container")
            assert graph(page) == {
                "routers": ["R1", "R2", "R3"],
                "edges": ["E1@R2"],
                "containers": ["broker-1@R3"],
                "links": ["R1-R2:3", "R1-R3:1", "R2-R3:5"],
            }
            # Anonymous on a listener that does not authenticate: read-only.
            assert page.evaluate("document.getElementById('who').dataset.write") == "false"
            assert page.evaluate("document.querySelectorAll('.write').length") == 0

            # An address created through management (AMQP, not the page) appears.
            mgmt = Management(net.url("R1"))
            try:
                status, description, _ = mgmt.request(
                    {"prefix": "orders", "distribution": "multicast"}, operation="CREATE",
                    type="org.apache.qpid.dispatch.router.config.address", name="orders")
                assert status == 201, description
            finally:
                mgmt.close()
            page.wait_for("document.querySelector('#config-addresses tr[data-prefix=\"orders\"]')"
                          " !== null", what="the created address")

            # Rates move while traffic runs: R3 -> R2 on 'moving'.
            traffic.start()
            rate = page.wait_for(
                "(() => { const r = document.querySelector("
                "'#addresses tr[data-address=\"moving\"]');"
                " return r && parseFloat(r.dataset.rate) > 0 ? parseFloat(r.dataset.rate) : 0 })()",
                what="a rate on the address 'moving'")
            assert rate > 0
            page.wait_for("parseFloat(document.getElementById('throughput').dataset.out) > 0",
                          what="throughput above zero")

            # A delivery a consumer holds unsettled for ten seconds (qdrouterd's
            # age of a stuck delivery) is highlighted.
            sender = stuck.create_sender("held")
            receiver = stuck.create_receiver("held", credit=1)
            send_async(sender, "held")
            received = receiver.receive(timeout=10)
            assert received.body == "held"  # received, never settled
            page.wait_for("document.querySelector('#links tr.stuck[data-address=\"held\"]') "
                          "!== null && document.querySelector('#network g.router.has-stuck')"
                          " !== null", timeout=40, what="the stuck delivery highlighted")
            assert int(page.evaluate("document.getElementById('stuck-summary').dataset.stuck")) >= 1
            shot = Path(SCREENSHOT) if SCREENSHOT else tmp_path / "console.png"
            page.screenshot(shot, 1400, 1000)
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        stop.set()
        if traffic.is_alive():
            traffic.join(20)
        stuck.close()
        broker.close()


def _traffic(producer_url: str, consumer_url: str, stop: threading.Event) -> None:
    """Messages to 'moving' from one router to a consumer on another until ``stop``."""
    consumer = connect(consumer_url)
    producer = connect(producer_url)
    receiver = consumer.create_receiver("moving", credit=100)
    sender = producer.create_sender("moving")

    sent_all = threading.Event()

    def consume() -> None:
        # Until the producer's last message is accepted: it waits for that.
        while not sent_all.is_set():
            try:
                receiver.receive(timeout=0.5)
            except Timeout:
                continue
            receiver.accept()

    taker = threading.Thread(target=consume, daemon=True)
    taker.start()
    try:
        while not stop.is_set():
            sender.send(Message(body="x"), timeout=10)
            time.sleep(0.005)
    finally:
        sent_all.set()
        taker.join(10)
        producer.close()
        consumer.close()


# -- a user policy lets change the router, and one it does not --------------------


@pytest.fixture(scope="module")
def users(tmp_path_factory: pytest.TempPathFactory) -> Users:
    return make_users(tmp_path_factory.mktemp("sasl"), ("alice", "bob"))


def authenticating_router(start_router: StartRouter, users: Users) -> tuple[Hop, int]:
    """A router whose HTTP listener logs users in by PLAIN (Basic); policy
    lets alice@hop write through management, bob@hop only read."""
    conf = f"""\
router {{
    mode: standalone
    id: S
    saslConfigDir: {users.config_dir}
    saslConfigName: {users.config_name}
}}
listener {{
    host: 127.0.0.1
    port: 0
    saslMechanisms: ANONYMOUS
}}
listener {{
    host: 127.0.0.1
    port: 0
    http: yes
    authenticatePeer: yes
    saslMechanisms: PLAIN
    allowInsecureMechanisms: yes
}}
policy {{
    enableVhostPolicy: yes
}}
vhost {{
    hostname: $default
    allowUnknownUser: yes
    groups: {{
        "admins": {{"users": "alice@hop", "management": "write",
                    "allowAdminStatusUpdate": true, "targets": "*", "sources": "*",
                    "allowDynamicSource": true}},
        "$default": {{"management": "read", "targets": "*", "sources": "*",
                      "allowDynamicSource": true}}
    }}
}}
"""
    hop = start_router(conf, listeners=2)
    return hop, hop.ports[1]


def basic(user: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def test_write_actions_are_offered_only_to_a_user_policy_lets_write(
        start_router: StartRouter, users: Users, tmp_path: Path) -> None:
    hop, port = authenticating_router(start_router, users)
    client = connect(hop.url)
    try:
        client.create_receiver("watched")
        with chromium_page(tmp_path / "bob") as page:
            page.open(f"http://127.0.0.1:{port}/", basic("bob@hop"))
            page.wait_for("document.getElementById('who').dataset.write === 'false'",
                          what="bob read-only")
            page.wait_for("document.querySelectorAll('#connections tbody tr').length >= 1")
            assert page.evaluate("document.querySelectorAll('.write').length") == 0
            refused = page.evaluate(
                "fetch('/api/v1/router.config.address', {method: 'POST', headers: "
                "{'Content-Type': 'application/json'}, body: "
                "JSON.stringify({name: 'x', prefix: 'x'})}).then(r => r.status)")
            assert refused == 403
        with chromium_page(tmp_path / "alice") as page:
            page.open(f"http://127.0.0.1:{port}/", basic("alice@hop"))
            page.wait_for("document.getElementById('who').dataset.write === 'true'",
                          what="alice may write")
            who = page.evaluate("document.getElementById('who').textContent")
            assert re.match(r"alice@hop", who)
            # Create an address with the page's form.
            page.evaluate("(() => { const f = document.getElementById('create-address');"
                          " f.elements.prefix.value = 'made-in-browser';"
                          " f.elements.distribution.value = 'closest';"
                          " f.requestSubmit(); return true })()")
            page.wait_for("document.querySelector('#config-addresses tr[data-prefix="
                          "\"made-in-browser\"]') !== null", what="the address created")
            rows = Management(hop.url)
            try:
                made = [r for r in rows.query("router.config.address", "prefix", "distribution")
                        if r["prefix"] == "made-in-browser"]
            finally:
                rows.close()
            assert made == [{"prefix": "made-in-browser", "distribution": "closest"}]
            # Close the client's connection with its button.
            page.wait_for("document.querySelector('#connections tr[data-role=\"normal\"] "
                          "button.write') !== null", what="a Close button")
            page.evaluate("document.querySelector('#connections tr[data-role=\"normal\"] "
                          "button.write').click()")
            deadline = time.monotonic() + 10
            closed = False
            while time.monotonic() < deadline and not closed:
                try:
                    client.create_receiver("after-close")
                    time.sleep(0.2)
                except Exception:
                    closed = True
            assert closed, "the connection closed from the console stays open"
    finally:
        client.close()
