"""Policy decisions: the global cap, vhosts, user groups, per-user and
per-host limits, remote hosts, and what a group may attach.

Vhosts are written as conf ``vhost`` sections, with qdrouterd's names, and
turned into the policy's as the router does: the conf holds the defaults."""

from __future__ import annotations

from typing import Any

import pytest

import conf
from router.adapter.connections.settings import vhost_from_section
from router.core.policy import UNLIMITED, AddressAuthz, Denied, Grant, Policy, Vhost


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


def vhost(hostname: str = "$default", **attributes: Any) -> Vhost:
    """The policy's vhost for a ``vhost`` section with these attributes."""
    section = conf.build_section("vhost", {"hostname": hostname, **attributes})
    assert isinstance(section, conf.VhostSection)
    return vhost_from_section(section)


def shop(**groups: dict[str, object]) -> Vhost:
    return vhost("shop", maxConnections=3, maxConnectionsPerUser=2, allowUnknownUser=True,
                 groups=groups)


def test_a_connection_gets_the_vhost_of_its_hostname_and_the_group_of_its_user() -> None:
    shop_vhost = shop(admins={"users": "alice"}, **{"$default": {}})
    policy = Policy(enabled=True, vhosts=[shop_vhost, vhost()])
    alice = policy.open(hostname="shop:5672", user="alice", host="127.0.0.1")
    assert isinstance(alice, Grant) and alice.group is shop_vhost.groups["admins"]
    bob = policy.open(hostname="shop", user="bob", host="127.0.0.1")
    assert isinstance(bob, Grant) and bob.group is shop_vhost.groups["$default"], \
        "unknown users: $default"
    elsewhere = policy.open(hostname="other", user="alice", host="127.0.0.1")
    assert isinstance(elsewhere, Denied), "the default vhost has no group for alice"
    assert "no group" in elsewhere.reason


def test_connection_limits_per_vhost_user_and_host() -> None:
    group = {"maxConnectionsPerHost": 2, "remoteHosts": "127.0.0.0/8"}
    policy = Policy(enabled=True, vhosts=[shop(**{"$default": group})])
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


def test_a_group_s_connection_limit_replaces_the_vhost_s_even_when_higher() -> None:
    # qdrouterd: the group's maxConnectionsPerUser, when given, is the limit.
    policy = Policy(enabled=True, vhosts=[vhost(
        "h", maxConnectionsPerUser=1, allowUnknownUser=True,
        groups={"many": {"users": "m", "maxConnectionsPerUser": 3}, "$default": {}})])
    assert [isinstance(policy.open(hostname="h", user="m", host=f"10.0.0.{n}"), Grant)
            for n in range(4)] == [True, True, True, False]
    assert [isinstance(policy.open(hostname="h", user="d", host=f"10.0.0.{n}"), Grant)
            for n in range(2)] == [True, False], "no group limit: the vhost's"


def test_what_a_group_may_attach() -> None:
    group = {"users": "alice", "maxSenders": 1, "maxReceivers": "2",
             "targets": "orders, ${user}.*", "sources": ["news*"], "allowDynamicSource": "true"}
    policy = Policy(enabled=True, vhosts=[vhost(groups={"g": group})])
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
    group = {"remoteHosts": list(patterns)}
    policy = Policy(enabled=True, vhosts=[vhost(allowUnknownUser=True,
                                                groups={"$default": group})])
    assert isinstance(policy.open(hostname=None, user="x", host=host), Grant) is allowed


def test_no_remote_hosts_or_an_empty_list_let_every_host_in() -> None:
    for group in ({}, {"remoteHosts": ""}):
        policy = Policy(enabled=True, vhosts=[vhost(allowUnknownUser=True,
                                                    groups={"$default": group})])
        assert isinstance(policy.open(hostname=None, user="x", host="192.0.2.1"), Grant)


def test_a_group_that_sets_management_is_held_to_it() -> None:
    assert Policy().may_manage(None, "CREATE") is None, "no vhost policy: no restriction"
    writers = {"users": "alice", "management": "write"}
    readers = {"users": "rita", "management": "read"}
    nobody = {"users": "eve", "management": "none"}
    policy = Policy(enabled=True, vhosts=[vhost(allowUnknownUser=True,
                                                groups={"w": writers, "r": readers,
                                                        "n": nobody, "$default": {}})])
    alice = policy.open(hostname=None, user="alice", host="h", authenticated=True)
    posing = policy.open(hostname=None, user="alice", host="h", authenticated=False)
    rita = policy.open(hostname=None, user="rita", host="h", authenticated=True)
    eve = policy.open(hostname=None, user="eve", host="h", authenticated=True)
    assert isinstance(alice, Grant) and isinstance(posing, Grant)
    assert isinstance(rita, Grant) and isinstance(eve, Grant)
    assert policy.may_manage(alice, "create") is None
    assert policy.may_manage(posing, "DELETE") is not None, "not authenticated"
    assert policy.may_manage(rita, "QUERY") is None
    assert policy.may_manage(rita, "UPDATE") is not None, "management: read"
    assert policy.may_manage(eve, "READ") is not None, "management: none"
    assert policy.may_manage(None, "QUERY") is None and policy.may_manage(None, "CREATE")


def test_a_group_that_says_nothing_of_management_may_do_what_qdrouterd_allows() -> None:
    policy = Policy(enabled=True, vhosts=[vhost(
        allowUnknownUser=True, groups={"$default": {},
                                       "k": {"users": "k", "allowAdminStatusUpdate": False}})])
    guest = policy.open(hostname=None, user="guest", host="h")
    keeper = policy.open(hostname=None, user="k", host="h")
    assert isinstance(guest, Grant) and isinstance(keeper, Grant)
    for operation in ("QUERY", "CREATE", "UPDATE", "DELETE"):
        assert policy.may_manage(guest, operation, "org.apache.qpid.dispatch.vhost") is None
    assert policy.may_manage(guest, "UPDATE", "org.apache.qpid.dispatch.connection") is None
    refused = policy.may_manage(keeper, "UPDATE", "org.apache.qpid.dispatch.connection")
    assert refused is not None and "allowAdminStatusUpdate" in refused.reason


def one_group_policy(**settings: object) -> tuple[Policy, Grant]:
    policy = Policy(enabled=True, vhosts=[vhost(allowUnknownUser=True,
                                                groups={"$default": settings})])
    grant = policy.open(hostname=None, user="alice", host="127.0.0.1")
    assert isinstance(grant, Grant)
    return policy, grant


def test_max_sessions_zero_means_no_limit_and_refusals_are_counted() -> None:
    _, unlimited = one_group_policy(maxSessions=0, maxSenders="0", maxReceivers=0)
    assert unlimited.group is not None
    assert (unlimited.group.max_sessions, unlimited.group.max_senders,
            unlimited.group.max_receivers) == (UNLIMITED, UNLIMITED, UNLIMITED)
    policy, grant = one_group_policy(maxSessions=2)
    assert grant.group is not None and grant.group.max_sessions == 2
    policy.session_refused(grant)
    assert policy.sessions_denied == 1 and policy.total_denials == 1
    assert policy.counts["$default"].sessions_denied == 1


def test_waypoint_and_fallback_capabilities_need_the_group_s_leave() -> None:
    policy, grant = one_group_policy(allowWaypointLinks=False, allowFallbackLinks="no")
    waypoint = policy.attach(grant, sender=True, address="q", capabilities=("qd.waypoint.2",))
    assert waypoint is not None and waypoint.reason == "waypoint capability not permitted"
    fallback = policy.attach(grant, sender=False, address="q",
                             capabilities=("other", "qd.fallback"))
    assert fallback is not None and fallback.condition == "amqp:unauthorized-access", \
        "every capability is looked at, not only the first"
    assert policy.attach(grant, sender=True, address="q", capabilities=("other",)) is None
    allowed, granted = one_group_policy()
    assert allowed.attach(granted, sender=True, address="q",
                          capabilities=("qd.waypoint",)) is None


def test_user_id_is_checked_unless_the_group_allows_proxying() -> None:
    _, grant = one_group_policy()
    assert grant.user_id == b"alice"
    _, proxy = one_group_policy(allowUserIdProxy=True)
    assert proxy.user_id is None
    assert Policy().open(hostname=None, user="alice", host="h").user_id is None  # type: ignore[union-attr]


def test_frame_size_and_session_window_come_from_the_group() -> None:
    _, grant = one_group_policy(maxFrameSize=4096, maxSessionWindow="40960")
    assert grant.group is not None
    assert (grant.group.max_frame_size, grant.group.max_session_window) == (4096, 40960)
    for settings in ({"maxFrameSize": 0, "maxSessionWindow": 0}, {}):
        _, grant = one_group_policy(**settings)
        assert grant.group is not None
        assert (grant.group.max_frame_size, grant.group.max_session_window) == (None, None), \
            "the listener's"


def test_a_connector_gets_the_connector_group_of_its_policy_vhost() -> None:
    broker = vhost("broker", groups={"$connector": {"targets": "out.*"}})
    policy = Policy(enabled=True, vhosts=[broker])
    grant = policy.connector("broker", "10.0.0.1")
    assert isinstance(grant, Grant) and grant.group is broker.groups["$connector"]
    assert policy.attach(grant, sender=True, address="in.x") is not None
    assert isinstance(policy.connector("nowhere", "10.0.0.1"), Denied)
    policy.closed(grant)
    assert policy.counts["broker"].connections == 0


def test_vhosts_replaced_and_removed_at_run_time() -> None:
    policy = Policy(enabled=True, vhosts=[vhost("shop", aliases="store", allowUnknownUser=True,
                                                groups={"$default": {}})])
    old = policy.open(hostname="store", user="u", host="h")
    assert isinstance(old, Grant) and old.vhost is not None and old.vhost.hostname == "shop"
    policy.set_vhost(vhost("shop", maxConnections=1, allowUnknownUser=True,
                           groups={"$default": {}}))
    assert isinstance(policy.open(hostname="store", user="u", host="h"), Denied), \
        "the alias went with the old settings"
    assert isinstance(policy.open(hostname="shop", user="u", host="h"), Denied), \
        "the new limit counts the connection admitted before"
    policy.closed(old)
    assert isinstance(policy.open(hostname="shop", user="u", host="h"), Grant)
    policy.remove_vhost("shop")
    assert "shop" not in policy.counts
    assert isinstance(policy.open(hostname="shop", user="u", host="h"), Denied)


def test_closing_connections_through_management_needs_allow_admin_status_update() -> None:
    keepers = {"users": "alice", "management": "write", "allowAdminStatusUpdate": False}
    policy = Policy(enabled=True, vhosts=[vhost(groups={"k": keepers})])
    alice = policy.open(hostname=None, user="alice", host="h", authenticated=True)
    assert isinstance(alice, Grant)
    refused = policy.may_manage(alice, "UPDATE", "org.apache.qpid.dispatch.connection")
    assert refused is not None and "allowAdminStatusUpdate" in refused.reason
    assert policy.may_manage(alice, "UPDATE", "org.apache.qpid.dispatch.vhost") is None
    assert policy.may_manage(alice, "READ", "org.apache.qpid.dispatch.connection") is None


def test_connection_link_routes_follow_allow_dynamic_link_routes_not_management_rights() -> None:
    kind = "org.apache.qpid.dispatch.router.connection.linkRoute"
    policy, edge = one_group_policy(allowDynamicLinkRoutes=True, management="read")
    assert policy.may_manage(edge, "CREATE", kind) is None, "anonymous, but allowed"
    assert policy.may_manage(edge, "CREATE", "org.apache.qpid.dispatch.router.config.address") \
        is not None, "other writes still need management rights"
    policy, edge = one_group_policy(allowDynamicLinkRoutes=False)
    refused = policy.may_manage(edge, "CREATE", kind)
    assert refused is not None and "allowDynamicLinkRoutes" in refused.reason


def _grant_vhost(policy: Policy, hostname: str | None) -> str | None:
    grant = policy.open(hostname=hostname, user="u", host="127.0.0.1")
    return grant.vhost.hostname if isinstance(grant, Grant) and grant.vhost else None


def test_with_name_patterns_a_vhost_name_matches_hostnames_as_an_address_pattern() -> None:
    policy = Policy(enabled=True, name_patterns=True, vhosts=[
        vhost("#.0.0", allowUnknownUser=True, groups={"$default": {}}),
        vhost("*.example.com", aliases="#.example.org", allowUnknownUser=True,
              groups={"$default": {}}),
        vhost("www.example.com", allowUnknownUser=True, groups={"$default": {}})])
    assert _grant_vhost(policy, "10.1.0.0") == "#.0.0"
    assert _grant_vhost(policy, "0.0") == "#.0.0", "'#' matches no token too"
    assert _grant_vhost(policy, "www.example.com") == "www.example.com", "a literal name wins"
    assert _grant_vhost(policy, "mail.example.com:5672") == "*.example.com"
    assert _grant_vhost(policy, "a.b.example.org") == "*.example.com", "an alias is a pattern"
    assert _grant_vhost(policy, "a.b.example.com") is None, "'*' is one token"
    exact = Policy(enabled=True, vhosts=[vhost("#.0.0", allowUnknownUser=True,
                                               groups={"$default": {}})])
    assert _grant_vhost(exact, "10.1.0.0") is None, "without name patterns names are literal"


def test_a_vhost_name_whose_pattern_is_taken_is_refused_and_nothing_changes() -> None:
    policy = Policy(enabled=True, name_patterns=True, vhosts=[
        vhost("#.0.0", allowUnknownUser=True, groups={"$default": {}})])
    with pytest.raises(ValueError, match="pattern conflicts"):
        policy.set_vhost(vhost("#.#.0.0", allowUnknownUser=True, groups={"$default": {}}))
    with pytest.raises(ValueError, match="pattern conflicts"):
        policy.set_vhost(vhost("other", aliases="#.0.0.", allowUnknownUser=True))
    with pytest.raises(ValueError, match="conflicts with itself"):
        policy.set_vhost(vhost("a.#", aliases="a.#.#"))
    assert sorted(policy.vhosts) == ["#.0.0"]
    assert _grant_vhost(policy, "10.1.0.0") == "#.0.0"
    policy.set_vhost(vhost("#.0.0", maxConnections=9, allowUnknownUser=True,
                           groups={"$default": {}}))
    assert policy.vhosts["#.0.0"].max_connections == 9, "a vhost replaces itself"
    policy.remove_vhost("#.0.0")
    assert _grant_vhost(policy, "10.1.0.0") is None
    policy.set_vhost(vhost("#.#.0.0", allowUnknownUser=True, groups={"$default": {}}))
    assert _grant_vhost(policy, "10.1.0.0") == "#.#.0.0"


@pytest.mark.parametrize(("patterns", "address", "allowed"), [
    ("#", "anything/at.all", True),
    ("public, private, $management", "$management", True),
    ("public, private", "public.more", False),
    ("public.#", "public/more/still", True),
    ("a.*.c", "a.b.c", True),
    ("a.*.c", "a.b.b.c", False),
    ("${user}.#", "alice.inbox", True),
    ("${user}.#", "alice", True),
    ("${user}.#", "alicex.inbox", False),
    ("${user}.#", "bob.inbox", False),
    ("queue.${user}", "queue.alice", True),
    ("queue.${user}", "queue.xalice", False),
    ("queue.${user}", "queue.bob", False),
    ("", "anything", False),
])
def test_source_and_target_patterns_are_address_patterns_with_the_user(
        patterns: str, address: str, allowed: bool) -> None:
    policy = Policy(enabled=True, vhosts=[vhost(
        allowUnknownUser=True, groups={"g": {"users": "alice", "sourcePattern": patterns,
                                             "targetPattern": patterns}})])
    grant = policy.open(hostname=None, user="alice", host="h")
    assert isinstance(grant, Grant)
    sending = policy.attach(grant, sender=True, address=address)
    receiving = policy.attach(grant, sender=False, address=address)
    assert (sending is None, receiving is None) == (allowed, allowed)


def test_a_console_user_gets_its_group_without_being_counted_as_a_connection() -> None:
    writers = {"users": "alice", "management": "write", "remoteHosts": "127.0.0.1"}
    policy = Policy(enabled=True, vhosts=[vhost(allowUnknownUser=False,
                                                groups={"w": writers})])
    alice = policy.visitor(user="alice", host="127.0.0.1")
    assert alice is not None and alice.group is policy.vhosts["$default"].groups["w"]
    assert alice.authenticated and policy.may_manage(alice, "CREATE") is None
    assert policy.counts["$default"].connections == 0, "an HTTP request is no connection"
    assert policy.visitor(user="alice", host="10.1.1.1") is None, "not from remoteHosts"
    assert policy.visitor(user="mallory", host="127.0.0.1") is None, "in no group"
    free = Policy().visitor(user="anyone", host="h")
    assert free is not None and Policy().may_manage(free, "DELETE") is None


# --- an authentication service's permissions, anonymous senders' targets ----------


def test_an_authentication_services_permissions_rule_attaches_without_vhost_policy() -> None:
    policy = Policy()
    authz = AddressAuthz(sources=("foo", "news.*"), targets=("foo",))
    grant = policy.open(hostname=None, user="guest", host="127.0.0.1", authz=authz)
    assert isinstance(grant, Grant) and grant.restricted and grant.group is None
    assert policy.attach(grant, sender=True, address="foo") is None
    assert policy.attach(grant, sender=False, address="news.eu") is None
    refused = policy.attach(grant, sender=True, address="bar")
    assert isinstance(refused, Denied)
    assert (refused.condition, refused.reason) == (
        "amqp:unauthorized-access", "target 'bar' not allowed by the authentication service")
    assert isinstance(policy.attach(grant, sender=False, address="news"), Denied)
    assert policy.attach(grant, sender=True, address=None) is None, "anonymous senders"
    assert policy.attach(grant, sender=False, address=None, dynamic=True) is None
    assert policy.links_denied == 2
    assert policy.restricts_targets(grant)
    assert policy.message_target_allowed(grant, "foo")
    assert not policy.message_target_allowed(grant, "bar")
    everything = policy.open(hostname=None, user="admin", host="127.0.0.1",
                             authz=AddressAuthz(sources=("*",), targets=("*",)))
    assert isinstance(everything, Grant)
    assert policy.attach(everything, sender=True, address="anything") is None


def test_permissions_rule_addresses_over_the_group_and_its_limits_hold() -> None:
    """As in qdrouterd: the service's permissions replace the group's
    sources and targets and allow what they allow; the group's limits stay."""
    policy = Policy(enabled=True, vhosts=[vhost(groups={"$default": {
        "users": "guest", "targets": "a*", "sources": "a*", "maxSenders": 2}})])
    grant = policy.open(hostname=None, user="guest", host="127.0.0.1",
                        authz=AddressAuthz(targets=("ab", "b"), sources=("b",)))
    assert isinstance(grant, Grant) and grant.group is not None
    assert policy.attach(grant, sender=True, address="ab") is None
    assert isinstance(policy.attach(grant, sender=True, address="ac"), Denied), "authz"
    assert policy.attach(grant, sender=True, address="b") is None, "the service allows it"
    refused = policy.attach(grant, sender=True, address="ab")
    assert isinstance(refused, Denied) and "maxSenders 2" in refused.reason
    assert isinstance(policy.attach(grant, sender=False, address="a1"), Denied)
    assert policy.attach(grant, sender=False, address=None, dynamic=True) is None, \
        "the group allows no dynamic source; the service does"
    assert [policy.message_target_allowed(grant, a) for a in ("ab", "ac", "b")] == [
        True, False, True]


def test_only_a_policy_that_restricts_targets_checks_each_message() -> None:
    open_group = Policy(enabled=True, vhosts=[vhost(groups={"$default": {
        "users": "u", "allowAnonymousSender": True}})])
    grant = open_group.open(hostname=None, user="u", host="127.0.0.1")
    assert isinstance(grant, Grant) and not open_group.restricts_targets(grant)
    narrow = Policy(enabled=True, vhosts=[vhost(groups={"$default": {
        "users": "u", "targets": "orders", "allowAnonymousSender": True}})])
    narrow_grant = narrow.open(hostname=None, user="u", host="127.0.0.1")
    assert isinstance(narrow_grant, Grant) and narrow.restricts_targets(narrow_grant)
    assert narrow.message_target_allowed(narrow_grant, "orders")
    assert not narrow.message_target_allowed(narrow_grant, "payments")
    ungoverned = Policy().open(hostname=None, user=None, host="127.0.0.1")
    assert isinstance(ungoverned, Grant) and not Policy.restricts_targets(ungoverned)
