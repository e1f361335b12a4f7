"""SASL on listeners and connectors: PLAIN checked against a Cyrus sasldb,
refused in clear text unless the listener allows it, and connectors that
log in with a user name and password."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import ConnectionException, Delivery, SSLDomain
from proton.utils import BlockingConnection

from tests.system.certs import Pki, make_pki
from tests.system.clients import deliver_across
from tests.system.conftest import StartRouter
from tests.system.harness import Hop
from tests.system.mgmt import Management
from tests.system.network import interior_conf
from tests.system.sasl_users import PASSWORD, Users, make_users


@pytest.fixture(scope="module")
def users(tmp_path_factory: pytest.TempPathFactory) -> Users:
    """A Cyrus SASL configuration whose sasldb knows alice@hop (and router@hop)."""
    return make_users(tmp_path_factory.mktemp("sasl"))


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def router_with(users: Users, listeners: str, pki: Pki | None = None) -> str:
    tls = "" if pki is None else (
        f"sslProfile {{\n    name: tls\n    certFile: {pki.server_cert}\n"
        f"    privateKeyFile: {pki.server_key}\n}}\n")
    return (f"router {{\n    mode: standalone\n    id: S\n    saslConfigDir: {users.config_dir}\n"
            f"    saslConfigName: {users.config_name}\n}}\n{tls}{listeners}"
            "listener {\n    host: 127.0.0.1\n    port: 0\n    saslMechanisms: ANONYMOUS\n}\n")


def plain_listener(extra: str = "") -> str:
    return ("listener {\n    host: 127.0.0.1\n    port: 0\n    saslMechanisms: PLAIN\n"
            f"    authenticatePeer: yes\n{extra}}}\n")


def login(url: str, user: str, password: str, **kwargs: object) -> BlockingConnection:
    return BlockingConnection(url, user=user, password=password, allowed_mechs="PLAIN",
                              timeout=10, **kwargs)


def users_of(hop: Hop, management_port: int) -> list[tuple[str, str, bool]]:
    client = Management(f"amqp://127.0.0.1:{management_port}")
    try:
        rows = client.query("connection", "user", "sasl", "isAuthenticated")
    finally:
        client.close()
    return sorted((r["user"], r["sasl"], r["isAuthenticated"]) for r in rows
                  if r["sasl"] == "PLAIN")


def test_plain_is_checked_against_the_user_database(start_router: StartRouter,
                                                    users: Users) -> None:
    hop = start_router(router_with(users, plain_listener(
        "    allowInsecureMechanisms: yes\n")), listeners=2)
    conn = login(hop.url, "alice@hop", PASSWORD, allow_insecure_mechs=True)
    assert users_of(hop, hop.ports[1]) == [("alice@hop", "PLAIN", True)]
    conn.close()
    for user, password in (("alice@hop", "wrong"), ("mallory@hop", PASSWORD)):
        with pytest.raises(ConnectionException, match=r"unauthorized-access|Authentication"):
            login(hop.url, user, password, allow_insecure_mechs=True)
    with pytest.raises(ConnectionException):
        BlockingConnection(hop.url, allowed_mechs="ANONYMOUS", timeout=10)


def test_plain_in_clear_text_is_refused_unless_the_listener_allows_it(
        start_router: StartRouter, users: Users, pki: Pki) -> None:
    listener = plain_listener("    sslProfile: tls\n")
    hop = start_router(router_with(users, listener, pki), listeners=2)
    with pytest.raises(ConnectionException):
        login(hop.url, "alice@hop", PASSWORD, allow_insecure_mechs=True)
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_peer_authentication(SSLDomain.ANONYMOUS_PEER)
    conn = login(hop.url.replace("amqp:", "amqps:"), "alice@hop", PASSWORD,
                 ssl_domain=domain)
    assert users_of(hop, hop.ports[1]) == [("alice@hop", "PLAIN", True)]
    conn.close()


def test_a_connector_logs_in_with_its_user_and_password(start_router: StartRouter,
                                                         users: Users,
                                                         tmp_path: Path) -> None:
    sasl = (f"    saslConfigDir: {users.config_dir}\n"
            f"    saslConfigName: {users.config_name}\n")
    a = start_router(interior_conf("A", {}).replace(
        "    id: A\n", "    id: A\n" + sasl, 1).replace(
        "role: inter-router\n", "role: inter-router\n    saslMechanisms: PLAIN\n"
        "    authenticatePeer: yes\n    allowInsecureMechanisms: yes\n", 1),
        name="A", listeners=2)
    secret = tmp_path / "router-password"
    secret.write_text(PASSWORD + "\n")
    b = start_router(interior_conf("B", {a.ports[1]: 1}).replace(
        "role: inter-router\n    cost: 1\n",
        "role: inter-router\n    cost: 1\n    saslUsername: router@hop\n"
        f"    saslPassword: file:{secret}\n"), name="B", listeners=2)
    assert deliver_across(a.url, b.url, "logged/in", "hello") == Delivery.ACCEPTED
    a.wait_log(r"Connection Opened: dir=in .* auth=yes user=router@hop .*role=inter-router")


def policy_router(start_router: StartRouter, users: Users, everyone: str,
                  admins: str = "", guests: str = "") -> Hop:
    """A router with vhost policy whose admins group (alice@hop) may write
    through management; ``everyone`` is the settings both groups have,
    ``admins`` and ``guests`` those of the admins and of ``$default``."""
    policy = ("policy {\n    enableVhostPolicy: yes\n}\n"
              "vhost {\n    hostname: $default\n    allowUnknownUser: yes\n    groups: {\n"
              f'        "admins": {{"users": "alice@hop", "management": "write", {admins}'
              f'{everyone}}},\n'
              f'        "$default": {{{guests}{everyone}}}\n    }}\n}}\n')
    listeners = plain_listener("    allowInsecureMechanisms: yes\n").replace(
        "    saslMechanisms: PLAIN\n    authenticatePeer: yes\n",
        "    saslMechanisms: PLAIN ANONYMOUS\n    authenticatePeer: no\n")
    return start_router(router_with(users, listeners).replace(
        "    saslConfigName: hop-test\n}\n", "    saslConfigName: hop-test\n}\n" + policy, 1),
        listeners=2)


def test_only_authenticated_users_allowed_by_policy_change_the_router(
        start_router: StartRouter, users: Users) -> None:
    hop = policy_router(start_router, users,
                        '"targets": "$management, work*", "allowDynamicSource": true',
                        guests='"management": "read", ')
    create = {"operation": "CREATE", "type": "org.apache.qpid.dispatch.router.config.address",
              "name": "made"}
    anonymous = Management(hop.url)
    try:
        assert anonymous.query("router", "id") == [{"id": "S"}], "reading is allowed"
        status, description, _ = anonymous.request({"prefix": "made"}, **create)
        assert (status, description) == (403, "management CREATE not allowed for this "
                                              "user's group")
    finally:
        anonymous.close()
    alice = Management(hop.url, conn=login(hop.url, "alice@hop", PASSWORD,
                                           allow_insecure_mechs=True))
    try:
        status, _, body = alice.request({"prefix": "made"}, **create)
        assert status == 201 and body["prefix"] == "made"
    finally:
        alice.close()


def test_a_group_without_a_management_setting_may_write_as_in_qdrouterd(
        start_router: StartRouter, users: Users) -> None:
    hop = policy_router(start_router, users,
                        '"targets": "$management", "allowDynamicSource": true')
    anonymous = Management(hop.url)
    try:
        status, description, body = anonymous.request(
            {"prefix": "made"}, operation="CREATE",
            type="org.apache.qpid.dispatch.router.config.address", name="made")
        assert (status, body["prefix"]) == (201, "made"), description
    finally:
        anonymous.close()


def test_vhosts_created_updated_and_deleted_through_management(
        start_router: StartRouter, users: Users) -> None:
    hop = policy_router(start_router, users,
                        '"allowDynamicSource": true, "allowAnonymousSender": true',
                        admins='"allowAdminStatusUpdate": false, ')
    vhost = "org.apache.qpid.dispatch.vhost"
    alice = Management(hop.url, conn=login(hop.url, "alice@hop", PASSWORD,
                                           allow_insecure_mechs=True))

    def shop_client() -> BlockingConnection:
        return BlockingConnection(hop.url, timeout=10, virtual_host="shop")

    def stats() -> dict[str, object]:
        [row] = [r for r in alice.query("vhostStats") if r["hostname"] == "shop"]
        return row

    try:
        status, description, body = alice.request(
            {"hostname": "shop", "maxConnections": 1, "allowUnknownUser": True,
             "groups": {"$default": {"maxSenders": 1}}},
            operation="CREATE", type=vhost, name="shop")
        assert status == 201, description
        assert body["maxConnections"] == 1
        first = shop_client()
        with pytest.raises(ConnectionException, match="connection disallowed by local policy"):
            shop_client()
        row = stats()
        assert (row["connectionsApproved"], row["connectionsDenied"],
                row["connectionsCurrent"], row["perUserState"]) == (1, 1, 1, {"anonymous": 1})
        status, description, body = alice.request(
            {"maxConnections": 2}, operation="UPDATE", type=vhost, name="shop")
        assert (status, body["maxConnections"]) == (200, 2), description
        second = shop_client()
        assert stats()["connectionsCurrent"] == 2, "the counts carried on through the UPDATE"
        status, description, _ = alice.request(operation="DELETE", type=vhost, name="shop")
        assert status == 204, description
        assert [r["hostname"] for r in alice.query("vhost", "hostname")] == ["$default"]
        assert "shop" not in [r["hostname"] for r in alice.query("vhostStats")]
        third = shop_client()  # the default vhost now
        third.create_sender("anywhere")
        identity = alice.query("connection", "identity")[0]["identity"]
        status, description, _ = alice.request(
            {"adminStatus": "deleted"}, operation="UPDATE",
            type="org.apache.qpid.dispatch.connection", identity=identity)
        assert status == 403 and "allowAdminStatusUpdate" in description
        for conn in (first, second, third):
            conn.close()
    finally:
        alice.close()
