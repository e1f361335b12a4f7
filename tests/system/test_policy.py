"""Policy: the global connection cap, and vhost rules on connections and
attaches, with the conditions qdrouterd gives and the denial counters."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from proton import ConnectionException, Data, Delivery, symbol
from proton.handlers import MessagingHandler
from proton.reactor import Container, LinkOption
from proton.utils import BlockingConnection, LinkDetached

from tests.system.clients import connect, send_async, wait_settled
from tests.system.conftest import StartRouter
from tests.system.frames import BEGIN, CLOSE, FrameClient
from tests.system.harness import hopd_command, router_conf
from tests.system.mgmt import Management
from tests.system.peers import SinkPeer
from tests.system.rabbitmq import free_port

VHOST_POLICY = """\
policy {
    enableVhostPolicy: yes
}
vhost {
    hostname: $default
    allowUnknownUser: yes
    maxConnectionsPerUser: 3
    groups: {
        "$default": {
            "maxSenders": 1,
            "allowDynamicSource": true,
            "targets": "orders, ${user}.*, $management",
            "sources": "news*, ${user}.*"
        }
    }
}
"""


def vhost_stats(url: str, hostname: str = "$default") -> dict[str, object]:
    client = Management(url)
    try:
        rows = client.query("vhostStats")
    finally:
        client.close()
    [row] = [r for r in rows if r["hostname"] == hostname]
    return row


def policy_counts(url: str) -> dict[str, int]:
    client = Management(url)
    try:
        [row] = client.query("policy", "connectionsProcessed", "connectionsDenied",
                             "connectionsCurrent", "linksDenied", "totalDenials")
    finally:
        client.close()
    return {k: int(v) for k, v in row.items()}


def test_the_global_cap_closes_connections_beyond_it(start_router: StartRouter) -> None:
    hop = start_router(router_conf("policy {\n    maxConnections: 2\n}\n"))
    first, second = connect(hop.url), connect(hop.url)
    with pytest.raises(ConnectionException):
        BlockingConnection(hop.url, timeout=10)
    hop.wait_log(r"POLICY \(info\) DENY Connection '127\.0\.0\.1' based on global connection "
                 r"count\. nConnections= 2")
    second.close()
    counts = policy_counts(hop.url)  # the management client is the second connection now
    assert counts["connectionsDenied"] == 1 and counts["connectionsCurrent"] == 2
    assert counts["connectionsProcessed"] >= 4
    first.close()


def test_vhost_rules_limit_what_a_user_may_attach(start_router: StartRouter) -> None:
    hop = start_router(router_conf(VHOST_POLICY + "log {\n    module: POLICY\n"
                                                  "    enable: debug+\n}\n"))
    conn = connect(hop.url)
    conn.create_sender("orders")
    with pytest.raises(LinkDetached) as over:
        conn.create_sender("anonymous.inbox")
    assert "Condition('amqp:resource-limit-exceeded', 'link disallowed by local policy')" \
        in str(over.value)
    other = connect(hop.url)
    with pytest.raises(LinkDetached) as target:
        other.create_sender("payments")
    assert "amqp:unauthorized-access" in str(target.value.condition)
    other.create_sender("anonymous.inbox")  # ${user}: the anonymous user's own prefix
    other.create_receiver("news.sport")
    with pytest.raises(LinkDetached) as source:
        other.create_receiver("secrets")
    assert "amqp:unauthorized-access" in str(source.value.condition)
    hop.wait_log(r"POLICY \(info\) \[C\d+\] DENY link on connection '127\.0\.0\.1:\d+': "
                 r"target 'payments' not allowed")
    counts = policy_counts(hop.url)
    assert counts["linksDenied"] == 3 and counts["totalDenials"] == 3
    conn.close()
    hop.wait_log(r"POLICY \(debug\) \[C\d+\] Connection '127\.0\.0\.1:\d+' closed with "
                 r"resources n_senders=1, n_receivers=0; its vhost's sessions_denied=0, "
                 r"senders_denied=2, receivers_denied=1, max_message_size_denied=0, "
                 r"nConnections= \d+")
    other.close()


def test_vhost_connection_limits_per_user(start_router: StartRouter) -> None:
    hop = start_router(router_conf(VHOST_POLICY))
    first, second, third = connect(hop.url), connect(hop.url), connect(hop.url)
    with pytest.raises(ConnectionException, match="connection disallowed by local policy"):
        BlockingConnection(hop.url, timeout=10)
    hop.wait_log(r"DENY Connection '127\.0\.0\.1:\d+' user 'anonymous': user 'anonymous' "
                 r"has 3 connections")
    third.close()
    counts = policy_counts(hop.url)
    assert counts["connectionsDenied"] == 1
    first.close()
    second.close()


@pytest.mark.parametrize("size", [5000, 40000], ids=["one-frame", "multi-frame"])
def test_a_message_above_max_message_size_is_rejected_and_its_connection_closed(
        start_router: StartRouter, size: int) -> None:
    hop = start_router(router_conf("policy {\n    maxMessageSize: 2000\n}\n"))
    consumer = connect(hop.url)
    receiver = consumer.create_receiver("sized", credit=10)
    producer = connect(hop.url)
    sender = producer.create_sender("sized")
    assert sender.link.remote_max_message_size == 2000, "announced in the router's attach"
    small = send_async(sender, "x" * 100)
    big = send_async(sender, "y" * size)
    with pytest.raises(LinkDetached) as detached:
        producer.wait(lambda: False, timeout=10)
    assert "message-size-exceeded" not in str(detached.value), \
        "the link closes without an error of its own, as qdrouterd closes it"
    assert sender.link.remote_condition is None
    with pytest.raises(ConnectionException,
                       match=r"Condition\('amqp:connection:forced', 'Message size exceeded'\)"):
        producer.wait(lambda: False, timeout=10)
    assert big.remote_state == Delivery.REJECTED and big.settled
    assert big.remote.condition.name == "amqp:link:message-size-exceeded"
    assert small.remote_state == Delivery.ACCEPTED or not small.settled
    assert receiver.receive(timeout=10).body == "x" * 100, "the small one went through"
    receiver.accept()
    hop.wait_log(r"POLICY \(info\) \[C\d+\]\[L\d+\] DENY message larger than 2000 bytes")
    assert policy_counts(hop.url)["totalDenials"] == 1
    consumer.close()


def test_a_link_routed_message_above_max_message_size_is_rejected_and_never_reaches_the_peer(
        start_router: StartRouter) -> None:
    port = free_port()
    routes = "".join(f"linkRoute {{\n    prefix: lr\n    direction: {d}\n"
                     f"    connection: containers\n}}\n" for d in ("in", "out"))
    hop = start_router(router_conf(
        "policy {\n    maxMessageSize: 2000\n}\n"
        f"listener {{\n    name: containers\n    host: 127.0.0.1\n    port: {port}\n"
        "    role: route-container\n    saslMechanisms: ANONYMOUS\n}\n" + routes))
    peer = SinkPeer(f"127.0.0.1:{port}", "sink")
    peer.start()
    try:
        hop.wait_log(r"Link Route Activated")
        producer = connect(hop.url)
        sender = producer.create_sender("lr.q")
        small = send_async(sender, "x" * 100)
        assert wait_settled(producer, small) == Delivery.ACCEPTED, "the peer took the small one"
        big = send_async(sender, "y" * 5000)
        with pytest.raises(LinkDetached):
            producer.wait(lambda: False, timeout=10)
        with pytest.raises(ConnectionException,
                           match=r"Condition\('amqp:connection:forced', 'Message size exceeded'\)"):
            producer.wait(lambda: False, timeout=10)
        assert big.remote_state == Delivery.REJECTED and big.settled
        assert big.remote.condition.name == "amqp:link:message-size-exceeded"
        hop.wait_log(r"POLICY \(info\) \[C\d+\]\[L\d+\] DENY message larger than 2000 bytes")
        assert peer.bodies == ["x" * 100], "the large one never reached the peer"
        assert policy_counts(hop.url)["totalDenials"] == 1
    finally:
        peer.stop()


SESSION_POLICY = """\
policy {
    enableVhostPolicy: yes
}
vhost {
    hostname: $default
    allowUnknownUser: yes
    groups: {
        "$default": {
            "maxSessions": 2,
            "maxFrameSize": 4096,
            "maxSessionWindow": 40960,
            "allowDynamicSource": true
        }
    }
}
"""


def test_max_sessions_and_frame_size_go_into_the_open_and_bind_the_client(
        start_router: StartRouter) -> None:
    hop = start_router(router_conf(SESSION_POLICY))
    client = FrameClient("127.0.0.1", hop.ports[0])
    try:
        opened = client.handshake()
        assert opened[2] == 4096, "the group's maxFrameSize in the router's OPEN"
        assert opened[3] == 1, "channel-max: maxSessions - 1"
        for channel in (0, 1):
            client.begin(channel)
        assert sorted(client.wait_for(BEGIN)[1][0] for _ in range(2)) == [0, 1]
        client.begin(2)  # one session too many: the connection is closed
        _, fields = client.wait_for(CLOSE)
        error = fields[0].value
        assert (str(error[0]), error[1]) == (
            "amqp:connection:framing-error", "remote channel 2 is above negotiated channel_max 1.")
    finally:
        client.close()
    hop.wait_log(r"POLICY \(info\) \[C\d+\] DENY session on connection '127\.0\.0\.1:\d+': "
                 r"beyond maxSessions 2")
    assert vhost_stats(hop.url)["sessionDenied"] == 1
    # A proton client within the limit is served, in a window of maxSessionWindow bytes.
    conn = connect(hop.url)
    assert conn.conn.transport.remote_channel_max == 1
    receiver = conn.create_receiver("sessions.q", credit=5)
    sender = conn.create_sender("sessions.q")
    body = "w" * 100_000
    send_async(sender, body)
    assert receiver.receive(timeout=10).body == body
    conn.close()


def test_a_message_with_another_user_s_user_id_is_rejected(start_router: StartRouter) -> None:
    conf = VHOST_POLICY.replace('"maxSenders": 1,', '"maxSenders": 3,')
    hop = start_router(router_conf(conf))
    conn = connect(hop.url)
    receiver = conn.create_receiver("anonymous.orders", credit=10)
    sender = conn.create_sender("anonymous.orders")
    own = send_async(sender, "mine", user_id=b"anonymous")
    none = send_async(sender, "no user-id")
    proxied = send_async(sender, "posing", user_id=b"mallory")
    assert wait_settled(conn, proxied) == Delivery.REJECTED
    assert proxied.remote.condition.name == "amqp:unauthorized-access"
    assert proxied.remote.condition.description == "user_id proxy violation"
    for expected in ("mine", "no user-id"):
        assert receiver.receive(timeout=10).body == expected
        receiver.accept()
    assert wait_settled(conn, own) == Delivery.ACCEPTED
    assert wait_settled(conn, none) == Delivery.ACCEPTED
    conn.close()
    proxy = start_router(router_conf(conf.replace('"maxSenders": 3,',
                                                  '"maxSenders": 3, "allowUserIdProxy": true,')),
                         name="proxy")
    conn = connect(proxy.url)
    receiver = conn.create_receiver("anonymous.orders", credit=10)
    allowed = send_async(conn.create_sender("anonymous.orders"), "on behalf", user_id=b"mallory")
    assert receiver.receive(timeout=10).body == "on behalf"
    receiver.accept()
    assert wait_settled(conn, allowed) == Delivery.ACCEPTED
    conn.close()


class TargetCapability(LinkOption):  # type: ignore[misc]
    """A sender's target claims a capability."""

    def __init__(self, capability: str) -> None:
        self.capability = capability

    def apply(self, link: Any) -> None:
        link.target.capabilities.put_array(False, Data.SYMBOL)
        link.target.capabilities.enter()
        link.target.capabilities.put_symbol(symbol(self.capability))
        link.target.capabilities.exit()


def test_waypoint_links_refused_where_the_group_does_not_allow_them(
        start_router: StartRouter) -> None:
    conf = VHOST_POLICY.replace('"maxSenders": 1,', '"allowWaypointLinks": false,')
    hop = start_router(router_conf(conf))
    conn = connect(hop.url)
    with pytest.raises(LinkDetached) as refused:
        conn.create_sender("orders", options=TargetCapability("qd.waypoint.1"))
    assert "Condition('amqp:unauthorized-access', 'link disallowed by local policy')" \
        in str(refused.value)
    conn.create_sender("orders", name="plain")  # without the capability
    conn.close()


POLICY_FILE = """\
# vhosts read from policyDir
[
    ["vhost", {
        "hostname": "shop",
        "aliases": "store",
        "allowUnknownUser": true,
        "groups": {"$default": {"maxReceivers": 1, "allowDynamicSource": true}}
    }]
]
"""


def test_vhosts_from_policy_dir_and_a_listener_s_policy_vhost(
        start_router: StartRouter, tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "shop.json").write_text(POLICY_FILE)
    listener = ("listener {\n    host: 127.0.0.1\n    port: 0\n    saslMechanisms: ANONYMOUS\n"
                "    authenticatePeer: no\n    policyVhost: store\n}\n")
    hop = start_router(router_conf(f"policy {{\n    enableVhostPolicy: yes\n"
                                   f"    policyDir: {policies}\n}}\n", listener=listener))
    conn = connect(hop.url)  # no vhost named by OPEN: the listener's, by its alias
    conn.create_receiver("a", credit=1)
    with pytest.raises(LinkDetached, match="amqp:resource-limit-exceeded"):
        conn.create_receiver("b", credit=1)
    assert vhost_stats(hop.url, "shop")["receiverDenied"] == 1
    conn.close()


def test_a_bad_policy_file_stops_the_start_naming_file_line_and_column(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "bad.json").write_text(
        '[\n  ["vhost", {"hostname": "x", "maxConnections": "many"}]\n]\n')
    conf_path = tmp_path / "hop.conf"
    conf_path.write_text(router_conf(f"policy {{\n    policyDir: {policies}\n}}\n"))
    done = subprocess.run(hopd_command("-c", str(conf_path)), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1
    assert f"{policies / 'bad.json'}:2:" in done.stderr + done.stdout
    assert "maxConnections" in done.stderr + done.stdout


class ReverseService(MessagingHandler):  # type: ignore[misc]
    """A service the router connects out to, which then attaches links back."""

    def __init__(self, port: int, targets: list[str]) -> None:
        super().__init__()
        self.port = port
        self.targets = targets
        self.opened: set[str] = set()
        self.errors: dict[str, str] = {}
        self.acceptor: Any = None

    def on_start(self, event: Any) -> None:
        self.acceptor = event.container.listen(f"127.0.0.1:{self.port}")
        event.container.schedule(30, self)

    def on_timer_task(self, event: Any) -> None:
        event.container.stop()

    def on_connection_opened(self, event: Any) -> None:
        for target in self.targets:
            event.container.create_sender(event.connection, target)
        event.container.schedule(3, self)  # the answers come well within

    def on_link_opened(self, event: Any) -> None:
        self.opened.add(event.link.target.address)

    def on_link_error(self, event: Any) -> None:
        self.errors[event.link.target.address] = str(event.link.remote_condition.name)


def test_a_connector_s_policy_vhost_rules_what_the_peer_attaches(
        start_router: StartRouter) -> None:
    port = free_port()
    service = ReverseService(port, ["out.results", "secrets"])
    thread = threading.Thread(target=Container(service).run, daemon=True)
    thread.start()
    conf = f"""\
policy {{
    enableVhostPolicy: yes
}}
vhost {{
    hostname: services
    groups: {{
        "$connector": {{"targets": "out.*"}}
    }}
}}
connector {{
    name: service
    host: 127.0.0.1
    port: {port}
    role: normal
    policyVhost: services
}}
"""
    hop = start_router(router_conf(conf))
    thread.join(40)
    assert service.errors == {"secrets": "amqp:unauthorized-access"}
    assert "out.results" in service.opened
    hop.wait_log(r"POLICY \(info\) \[C\d+\] DENY link on connection '127\.0\.0\.1:\d+': "
                 r"target 'secrets' not allowed")


def test_per_host_limit_and_remote_hosts(start_router: StartRouter) -> None:
    conf = """\
policy {
    enableVhostPolicy: yes
}
vhost {
    hostname: onehost
    allowUnknownUser: yes
    maxConnectionsPerHost: 1
    groups: {"$default": {}}
}
vhost {
    hostname: faraway
    allowUnknownUser: yes
    groups: {"$default": {"remoteHosts": "10.0.0.0/8, 192.0.2.1-192.0.2.9"}}
}
"""
    hop = start_router(router_conf(conf))
    first = BlockingConnection(hop.url, timeout=10, virtual_host="onehost")
    with pytest.raises(ConnectionException, match="connection disallowed by local policy"):
        BlockingConnection(hop.url, timeout=10, virtual_host="onehost")
    hop.wait_log(r"DENY Connection '127\.0\.0\.1:\d+' user 'anonymous': host 127\.0\.0\.1 "
                 r"has 1 connections")
    with pytest.raises(ConnectionException,
                       match=r"Condition\('amqp:resource-limit-exceeded', "
                             r"'connection disallowed by local policy'\)"):
        BlockingConnection(hop.url, timeout=10, virtual_host="faraway")
    hop.wait_log(r"host 127\.0\.0\.1 not in remoteHosts of group '\$default'")
    first.close()
    again = BlockingConnection(hop.url, timeout=10, virtual_host="onehost")
    again.close()


def test_vhost_names_as_patterns_take_matching_hostnames(start_router: StartRouter) -> None:
    hop = start_router(router_conf(
        "policy {\n    enableVhostPolicy: yes\n    enableVhostNamePatterns: yes\n}\n"
        "vhost {\n    hostname: #.example\n    allowUnknownUser: yes\n"
        '    groups: {"$default": {"maxSenders": 1, "targets": "*"}}\n}\n'
        "vhost {\n    hostname: $default\n    allowUnknownUser: yes\n"
        '    groups: {"$default": {"targets": "$management", "sources": "$management",'
        ' "allowDynamicSource": true}}\n}\n'))
    shop = BlockingConnection(hop.url, timeout=10, virtual_host="shop.example")
    shop.create_sender("orders")
    with pytest.raises(LinkDetached, match="amqp:resource-limit-exceeded"):
        shop.create_sender("more")  # the pattern's group: one sender
    row = vhost_stats(hop.url, "#.example")
    assert (row["connectionsCurrent"], row["id"]) == (1, "#.example"), "id: as qdrouterd"
    client = Management(hop.url)
    try:
        status, description, _ = client.request(
            {"hostname": "#.#.example", "allowUnknownUser": True},
            operation="CREATE", type="org.apache.qpid.dispatch.vhost", name="#.#.example")
        assert status == 400 and "pattern conflicts with vhost '#.example'" in description
        assert sorted(r["hostname"] for r in client.query("vhost", "hostname")) == [
            "#.example", "$default"]
        # qdrouterd's names and forms: "vhost/<hostname>" for one the conf
        # made, and the deprecated "id" for the hostname.
        status, description, _ = client.request(
            {"maxConnections": 5}, operation="UPDATE", type="org.apache.qpid.dispatch.vhost",
            name="vhost/$default")
        assert status == 200, description
        status, description, body = client.request(
            {"id": "shop", "allowUnknownUser": True}, operation="CREATE",
            type="org.apache.qpid.dispatch.vhost", name="shop")
        assert (status, body.get("hostname"), body.get("name")) == (201, "shop", "shop"), \
            description
    finally:
        client.close()
    shop.close()


def test_an_anonymous_sender_s_message_to_a_target_the_group_refuses_is_rejected(
        start_router: StartRouter) -> None:
    """The group's targets hold for every message of an anonymous sender, as
    for a sender's attach (qdrouterd: "policy violation on target")."""
    hop = start_router(router_conf(VHOST_POLICY.replace(
        '"maxSenders": 1,', '"maxSenders": 2, "allowAnonymousSender": true,')))
    conn = connect(hop.url)
    try:
        receiver = conn.create_receiver("anonymous.inbox", credit=5)
        anonymous = conn.create_sender(None)
        allowed = send_async(anonymous, "to my inbox", address="anonymous.inbox")
        refused = send_async(anonymous, "to payments", address="payments")
        assert wait_settled(conn, refused) == Delivery.REJECTED
        condition = refused.remote.condition
        assert condition is not None
        assert (condition.name, condition.description) == (
            "amqp:unauthorized-access", "policy violation on target")
        assert receiver.receive(timeout=10).body == "to my inbox"
        receiver.accept()
        assert wait_settled(conn, allowed) == Delivery.ACCEPTED
    finally:
        conn.close()
