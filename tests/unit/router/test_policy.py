"""Policy decisions: the global cap, vhosts, user groups, per-user and
per-host limits, remote hosts, and what a group may attach."""

from __future__ import annotations

import pytest

from router.core.policy import Denied, Grant, GroupSettings, Policy, Vhost


def test_the_global_cap_refuses_connections_beyond_it() -> None:
    policy = Policy(max_connections=2)
    assert policy.socket_accepted() is None and policy.socket_accepted() is None
    refused = policy.socket_accepted()
    assert isinstance(refused, Denied) and refused.condition == "amqp:resource-limit-exceeded"
    policy.socket_closed()
    assert policy.socket_accepted() is None
    assert (policy.connections_processed, policy.connections_denied, policy.current) == (4, 1, 2)


def test_without_vhost_policy_every_open_is_granted() -> None:
    grant = Policy().open(hostname="any", user=None, host="10.0.0.1")
    assert isinstance(grant, Grant) and grant.group is None
    assert Policy().attach(grant, sender=True, address=None) is None


def vhost(**groups: GroupSettings) -> Vhost:
    return Vhost(hostname="shop", max_connections=3, max_connections_per_user=2,
                 allow_unknown_user=True, groups=groups)


def test_a_connection_gets_the_vhost_of_its_hostname_and_the_group_of_its_user() -> None:
    admins = GroupSettings(users=frozenset({"alice"}))
    guests = GroupSettings()
    policy = Policy(enabled=True, vhosts=[vhost(admins=admins, **{"$default": guests}),
                                          Vhost(hostname="$default")])
    alice = policy.open(hostname="shop:5672", user="alice", host="127.0.0.1")
    assert isinstance(alice, Grant) and alice.group is admins
    bob = policy.open(hostname="shop", user="bob", host="127.0.0.1")
    assert isinstance(bob, Grant) and bob.group is guests, "unknown users: $default"
    elsewhere = policy.open(hostname="other", user="alice", host="127.0.0.1")
    assert isinstance(elsewhere, Denied), "the default vhost has no group for alice"
    assert "no group" in elsewhere.reason


def test_connection_limits_per_vhost_user_and_host() -> None:
    group = GroupSettings(max_connections_per_host=2, remote_hosts=("127.0.0.0/8",))
    policy = Policy(enabled=True, vhosts=[vhost(**{"$default": group})])
    assert isinstance(policy.open(hostname="shop", user="u", host="127.0.0.1"), Grant)
    second = policy.open(hostname="shop", user="v", host="127.0.0.1")
    assert isinstance(second, Grant)
    per_host = policy.open(hostname="shop", user="w", host="127.0.0.1")
    assert isinstance(per_host, Denied) and "host 127.0.0.1 has 2" in per_host.reason
    assert isinstance(policy.open(hostname="shop", user="u", host="127.0.0.2"), Grant)
    per_vhost = policy.open(hostname="shop", user="x", host="127.0.0.4")
    assert isinstance(per_vhost, Denied) and "vhost 'shop' has 3" in per_vhost.reason
    policy.closed(second)
    per_user = policy.open(hostname="shop", user="u", host="127.0.0.3")
    assert isinstance(per_user, Denied) and "user 'u' has 2" in per_user.reason
    remote = policy.open(hostname="shop", user="w", host="10.1.1.1")
    assert isinstance(remote, Denied) and "remoteHosts" in remote.reason
    assert policy.counts["shop"].connections_denied == 4


def test_what_a_group_may_attach() -> None:
    group = GroupSettings.from_conf({
        "users": "alice", "maxSenders": 1, "maxReceivers": "2", "targets": "orders, ${user}.*",
        "sources": ["news*"], "allowDynamicSource": "true"})
    policy = Policy(enabled=True, vhosts=[Vhost(hostname="$default", groups={"g": group})])
    grant = policy.open(hostname=None, user="alice", host="127.0.0.1")
    assert isinstance(grant, Grant)
    denied = policy.attach(grant, sender=True, address="payments")
    assert denied == Denied("amqp:unauthorized-access", "link disallowed by local policy",
                            "target 'payments' not allowed")
    assert policy.attach(grant, sender=True, address="alice.inbox") is None
    over = policy.attach(grant, sender=True, address="orders")
    assert isinstance(over, Denied) and over.condition == "amqp:resource-limit-exceeded"
    policy.detached(grant, sender=True)
    assert policy.attach(grant, sender=True, address="orders") is None
    policy.detached(grant, sender=True)
    anonymous = policy.attach(grant, sender=True, address=None)
    assert isinstance(anonymous, Denied) and "anonymous" in anonymous.reason
    assert policy.attach(grant, sender=False, address="news.sport") is None
    assert policy.attach(grant, sender=False, address=None, dynamic=True) is None
    third = policy.attach(grant, sender=False, address="news.x")
    assert isinstance(third, Denied) and "maxReceivers 2" in third.reason
    assert policy.links_denied == 4 and policy.total_denials == 4


@pytest.mark.parametrize(("patterns", "host", "allowed"), [
    (("*",), "192.0.2.1", True),
    (("192.0.2.1",), "192.0.2.1", True),
    (("192.0.2.1-192.0.2.9",), "192.0.2.5", True),
    (("192.0.2.1-192.0.2.9",), "192.0.2.10", False),
    (("10.0.0.0/8",), "10.9.9.9", True),
    (("::1",), "::1", True),
    (("bad-pattern",), "192.0.2.1", False),
])
def test_remote_host_patterns(patterns: tuple[str, ...], host: str, allowed: bool) -> None:
    group = GroupSettings(remote_hosts=patterns)
    policy = Policy(enabled=True, vhosts=[Vhost(hostname="$default", allow_unknown_user=True,
                                                groups={"$default": group})])
    assert isinstance(policy.open(hostname=None, user="x", host=host), Grant) is allowed


def test_bad_group_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="maxSenders: expected an integer"):
        GroupSettings.from_conf({"maxSenders": [1]})


def test_management_writes_need_an_authenticated_user_whose_group_may_write() -> None:
    assert Policy().may_manage(None, "CREATE") is None, "no vhost policy: no restriction"
    writers = GroupSettings(users=frozenset({"alice"}), management="write")
    nobody = GroupSettings(users=frozenset({"eve"}), management="none")
    policy = Policy(enabled=True, vhosts=[Vhost(hostname="$default", allow_unknown_user=True,
                                                groups={"w": writers, "n": nobody,
                                                        "$default": GroupSettings()})])
    alice = policy.open(hostname=None, user="alice", host="h", authenticated=True)
    posing = policy.open(hostname=None, user="alice", host="h", authenticated=False)
    guest = policy.open(hostname=None, user="guest", host="h", authenticated=True)
    eve = policy.open(hostname=None, user="eve", host="h", authenticated=True)
    assert isinstance(alice, Grant) and isinstance(posing, Grant)
    assert isinstance(guest, Grant) and isinstance(eve, Grant)
    assert policy.may_manage(alice, "create") is None
    assert policy.may_manage(posing, "DELETE") is not None, "not authenticated"
    assert policy.may_manage(guest, "QUERY") is None, "groups read by default"
    assert policy.may_manage(guest, "UPDATE") is not None
    assert policy.may_manage(eve, "READ") is not None, "management: none"
    assert policy.may_manage(None, "QUERY") is None and policy.may_manage(None, "CREATE")
    with pytest.raises(ValueError, match="management: expected one of none, read, write"):
        GroupSettings.from_conf({"management": "admin"})
