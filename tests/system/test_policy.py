"""Policy: the global connection cap, and vhost rules on connections and
attaches, with the conditions qdrouterd gives and the denial counters."""

from __future__ import annotations

import pytest
from proton import ConnectionException
from proton.utils import BlockingConnection, LinkDetached

from tests.system.clients import connect
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
