"""Policy: the global connection cap, and vhost rules on connections and
attaches, with the conditions qdrouterd gives and the denial counters."""

from __future__ import annotations

import pytest
from proton import ConnectionException, Delivery
from proton.utils import BlockingConnection, LinkDetached

from tests.system.clients import connect, send_async
from tests.system.conftest import StartRouter
from tests.system.harness import router_conf
from tests.system.mgmt import Management

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
    hop = start_router(router_conf(VHOST_POLICY))
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
    with pytest.raises(LinkDetached, match="amqp:link:message-size-exceeded"):
        producer.wait(lambda: False, timeout=10)
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
