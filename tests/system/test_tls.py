"""TLS on listeners and connectors: sslProfile, requireSsl, client
certificates with SASL EXTERNAL, TLS between routers, the start-up errors
of a profile that cannot be used, and certificate rotation by SIGHUP and
by management UPDATE."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from proton import ConnectionException, Delivery, SSLDomain
from proton.utils import BlockingConnection

from tests.system.brokered import LOG_INFO, broker_connector, wait_autolinks, waypoint
from tests.system.certs import KEY_PASSWORD, Pki, make_pki
from tests.system.clients import deliver_across, send_async, wait_settled
from tests.system.conftest import StartRouter
from tests.system.harness import Hop, hopd_command, router_conf
from tests.system.mgmt import PREFIX, Management
from tests.system.network import interior_conf
from tests.system.rabbitmq import free_port, running
from tests.waiting import wait_for


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def profile(pki: Pki, name: str = "tls", key: Path | None = None, extra: str = "") -> str:
    return (f"sslProfile {{\n    name: {name}\n    certFile: {pki.server_cert}\n"
            f"    privateKeyFile: {key or pki.server_key}\n    caCertFile: {pki.ca}\n"
            f"{extra}}}\n")


def tls_listener(extra: str = "") -> str:
    return ("listener {\n    host: 127.0.0.1\n    port: 0\n    sslProfile: tls\n"
            f"    saslMechanisms: ANONYMOUS\n{extra}}}\n")


def client_domain(ca: Path, cert: tuple[Path, Path] | None = None) -> SSLDomain:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(ca))
    # proton matches DNS names only, so a router reached at 127.0.0.1 is
    # checked for its CA signature here (name checks: the connector test).
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER)
    if cert is not None:
        domain.set_credentials(str(cert[0]), str(cert[1]), "")
    return domain


def amqps(hop: Hop) -> str:
    return hop.url.replace("amqp://", "amqps://")


def round_trip(conn: BlockingConnection, address: str = "tls/q") -> int:
    receiver = conn.create_receiver(address, credit=1)
    sender = conn.create_sender(address)
    delivery = send_async(sender, "encrypted")
    assert receiver.receive(timeout=10).body == "encrypted"
    receiver.accept()
    return wait_settled(conn, delivery)


def test_a_tls_listener_serves_clients_that_trust_its_ca(
        start_router: StartRouter, pki: Pki) -> None:
    hop = start_router(router_conf(profile(pki), listener=tls_listener("    requireSsl: yes\n")))
    conn = BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.ca), timeout=10)
    assert round_trip(conn) == Delivery.ACCEPTED
    conn.close()
    with pytest.raises(ConnectionException, match="certificate verify failed"):
        BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.stranger_ca), timeout=10)
    with pytest.raises(ConnectionException):
        BlockingConnection(hop.url, timeout=10)  # plain text where TLS is required
    hop.wait_log(r"Connection from 127\.0\.0\.1:\d+ failed: amqp:connection:framing-error")


def test_without_require_ssl_plain_and_tls_clients_share_the_port(
        start_router: StartRouter, pki: Pki) -> None:
    hop = start_router(router_conf(profile(pki), listener=tls_listener()))
    plain = BlockingConnection(hop.url, timeout=10)
    encrypted = BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.ca), timeout=10)
    assert round_trip(plain, "plain/q") == Delivery.ACCEPTED
    assert round_trip(encrypted, "tls/q") == Delivery.ACCEPTED
    client = Management(hop.url)
    try:
        rows = client.query("connection", "isEncrypted", "sslProto", "role")
    finally:
        client.close()
    assert sorted(bool(r["isEncrypted"]) for r in rows if r["role"] == "normal") == \
        [False, False, True], "the two plain connections (one is management's) and one TLS"
    assert {r["sslProto"] for r in rows if r["isEncrypted"]} <= {"TLSv1.2", "TLSv1.3"}
    plain.close()
    encrypted.close()


def test_mutual_tls_authenticates_the_client_by_its_certificate(
        start_router: StartRouter, pki: Pki) -> None:
    listener = ("listener {\n    host: 127.0.0.1\n    port: 0\n    sslProfile: tls\n"
                "    requireSsl: yes\n    authenticatePeer: yes\n"
                "    saslMechanisms: EXTERNAL\n}\n"
                "listener {\n    host: 127.0.0.1\n    port: 0\n    saslMechanisms: ANONYMOUS\n}\n")
    hop = start_router(router_conf(profile(pki), listener=listener), listeners=2)
    conn = BlockingConnection(
        amqps(hop), ssl_domain=client_domain(pki.ca, (pki.client_cert, pki.client_key)),
        allowed_mechs="EXTERNAL", timeout=10)
    assert round_trip(conn) == Delivery.ACCEPTED
    client = Management(f"amqp://127.0.0.1:{hop.ports[1]}")
    try:
        users = [r["user"] for r in client.query("connection", "user", "sasl", "isEncrypted")
                 if r["sasl"] == "EXTERNAL"]
    finally:
        client.close()
    assert len(users) == 1 and "CN=app-client" in users[0]
    conn.close()
    with pytest.raises(ConnectionException):
        BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.ca),
                           allowed_mechs="EXTERNAL", timeout=10)  # no certificate


def test_uid_format_makes_the_user_of_a_client_certificate(
        start_router: StartRouter, pki: Pki, tmp_path: Path) -> None:
    names = tmp_path / "names.json"
    names.write_text('{"Hop tests;app-client": "alice"}')
    # A format with a letter outside the known ones is not used, with a
    # warning, as in qdrouterd: with "ox" or "xz" the subject stands.
    profiles = (profile(pki, "uid", extra="    uidFormat: on\n")
                + profile(pki, "named", extra=f"    uidFormat: on\n"
                                              f"    uidNameMappingFile: {names}\n")
                + profile(pki, "partial", extra="    uidFormat: ox\n")
                + profile(pki, "unknown", extra="    uidFormat: xz\n"))
    mutual = ("listener {{\n    host: 127.0.0.1\n    port: 0\n    sslProfile: {}\n"
              "    requireSsl: yes\n    authenticatePeer: yes\n    saslMechanisms: EXTERNAL\n}}\n")
    plain = "listener {\n    host: 127.0.0.1\n    port: 0\n    saslMechanisms: ANONYMOUS\n}\n"
    tls_names = ("uid", "named", "partial", "unknown")
    listeners = "".join(mutual.format(name) for name in tls_names) + plain
    hop = start_router(router_conf(profiles, listener=listeners), listeners=5)
    conns = [BlockingConnection(f"amqps://127.0.0.1:{port}",
                                ssl_domain=client_domain(pki.ca, (pki.client_cert, pki.client_key)),
                                allowed_mechs="EXTERNAL", timeout=10)
             for port in hop.ports[:4]]
    client = Management(f"amqp://127.0.0.1:{hop.ports[4]}")
    try:
        users = sorted(r["user"] for r in client.query("connection", "user", "sasl")
                       if r["sasl"] == "EXTERNAL")
    finally:
        client.close()
    assert users == ["Hop tests;app-client", "O=Hop tests,CN=app-client",
                     "O=Hop tests,CN=app-client", "alice"], (
        "organization;common name, the subject where a letter is unknown, and a mapped name")
    hop.wait_log(r"Connection Opened: .* user=alice ")
    hop.wait_log(r"uidFormat 'ox': unknown letters 'x', so the format is not used")
    for conn in conns:
        conn.close()


def test_a_bad_uid_name_mapping_file_stops_a_start_told_to_stop(pki: Pki,
                                                                tmp_path: Path) -> None:
    names = tmp_path / "names.json"
    names.write_text('["not", "a map"]')
    conf_path = tmp_path / "hop.conf"
    conf_path.write_text(router_conf(profile(pki, extra=f"    uidFormat: n\n"
                                                        f"    uidNameMappingFile: {names}\n")))
    done = subprocess.run(hopd_command("-c", str(conf_path), "--tls-errors", "stop"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"sslProfile 'tls': uidNameMappingFile {names}: expected a JSON map" in done.stderr


def test_routers_connect_over_tls_checking_the_name(start_router: StartRouter,
                                                    pki: Pki) -> None:
    tls = profile(pki)
    a = start_router(interior_conf("A", {}, extra=tls).replace(
        "role: inter-router\n", "role: inter-router\n    sslProfile: tls\n"
        "    requireSsl: yes\n", 1), name="A", listeners=2)
    b_conf = interior_conf("B", {a.ports[1]: 1}, extra=tls).replace(
        f"host: 127.0.0.1\n    port: {a.ports[1]}\n    role: inter-router\n",
        f"host: localhost\n    port: {a.ports[1]}\n    role: inter-router\n"
        "    sslProfile: tls\n")
    assert "host: localhost" in b_conf
    b = start_router(b_conf, name="B", listeners=2)
    b.wait_log(r"Connection Opened: dir=out host=localhost:\d+ encrypted=yes", timeout=20)
    assert deliver_across(a.url, b.url, "over/tls", "between routers") == Delivery.ACCEPTED


@pytest.mark.parametrize(("problem", "says"), [
    ("missing", "sslProfile 'tls': cannot read certFile {missing}: No such file or directory"),
    ("wrong-password", "sslProfile 'tls': certFile {cert} and privateKeyFile {key} do not "
                       "load"),
    ("no-password", "sslProfile 'tls': certFile {cert} and privateKeyFile {key} do not load"),
    ("password-env", "sslProfile 'tls': password: environment variable HOP_NO_SUCH_VAR is "
                     "not set"),
])
def test_an_unusable_profile_stops_a_start_told_to_stop_naming_the_file(
        tmp_path: Path, pki: Pki, problem: str, says: str) -> None:
    missing = tmp_path / "nowhere.pem"
    encrypted = pki.server_key_encrypted
    texts = {
        "missing": profile(pki).replace(str(pki.server_cert), str(missing)),
        "wrong-password": profile(pki, key=encrypted, extra="    password: pass:wrong\n"),
        "no-password": profile(pki, key=encrypted),
        "password-env": profile(pki, key=encrypted, extra="    password: env:HOP_NO_SUCH_VAR\n"),
    }
    port = free_port()
    conf_path = tmp_path / "hop.conf"
    conf_path.write_text(router_conf(texts[problem], listener=tls_listener().replace(
        "port: 0", f"port: {port}")))
    done = subprocess.run(hopd_command("-c", str(conf_path), "--tls-errors", "stop"),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    expected = says.format(missing=missing, cert=pki.server_cert, key=encrypted)
    assert expected in done.stdout + done.stderr
    assert "Listening on" not in done.stdout + done.stderr


def test_a_profile_that_does_not_load_is_logged_and_what_names_it_refuses(
        tmp_path: Path, pki: Pki) -> None:
    """By default, as qdrouterd, a profile OpenSSL refuses is logged and
    the router starts: the listener naming it listens and closes every
    connection. ``--tls-errors stop`` stops the start instead."""
    good, bad = free_port(), free_port()
    listeners = (tls_listener().replace("port: 0", f"port: {good}")
                 + tls_listener().replace("port: 0", f"port: {bad}").replace(
                     "sslProfile: tls", "sslProfile: old"))
    conf_path = tmp_path / "hop.conf"
    peer = free_port()
    connector = (f"connector {{\n    host: 127.0.0.1\n    port: {peer}\n"
                 f"    sslProfile: noca\n}}\n")
    conf_path.write_text(router_conf(
        profile(pki) + profile(pki, "old", extra="    protocols: SSLv23\n")
        + profile(pki, "noca").replace(str(pki.ca), str(tmp_path / "no-ca.pem")) + connector,
        listener=listeners))
    stopped = subprocess.run(hopd_command("-c", str(conf_path), "--tls-errors", "stop"),
                             capture_output=True, text=True, timeout=30)
    assert stopped.returncode == 1
    assert "sslProfile 'old': OpenSSL refuses protocols 'SSLv23'" in stopped.stderr
    assert "Listening on" not in stopped.stdout + stopped.stderr
    log_path = tmp_path / "hop.log"
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(hopd_command("-c", str(conf_path)),
                                stdout=log_file, stderr=subprocess.STDOUT)
    hop = Hop(proc, conf_path, log_path, [good])
    try:
        # A connector whose profile did not load fails every attempt, as
        # qdrouterd's does (its own tests read these lines).
        hop.wait_log(rf"SERVER \(error\) SSL CA configuration failed for connection to "
                     rf"127\.0\.0\.1:{peer}: sslProfile 'noca': cannot read caCertFile")
        hop.wait_log(rf"Connection to 127\.0\.0\.1:{peer} failed: its sslProfile did not load")
        hop.wait_log(rf"Listening on 127\.0\.0\.1:{good}\b", timeout=20)
        hop.wait_log(r"sslProfile 'old': OpenSSL refuses protocols 'SSLv23'; listeners naming "
                     r"it close every connection, connectors naming it fail every attempt")
        hop.wait_log(rf"listener 127\.0\.0\.1:{bad} closes every connection: sslProfile "
                     r"'old': OpenSSL refuses protocols 'SSLv23'")
        hop.wait_log(rf"Listening on 127\.0\.0\.1:{bad}\b")
        conn = BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.ca), timeout=10)
        assert round_trip(conn) == Delivery.ACCEPTED
        conn.close()
        with pytest.raises(ConnectionException):
            BlockingConnection(f"amqps://127.0.0.1:{bad}", ssl_domain=client_domain(pki.ca),
                               timeout=5)
        hop.wait_log(rf"Connection from 127\.0\.0\.1 to 127\.0\.0\.1:{bad} closed: its "
                     r"sslProfile 'old'")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0


def test_the_right_password_loads_the_key(start_router: StartRouter, pki: Pki,
                                          tmp_path: Path) -> None:
    secret = tmp_path / "key-password"
    secret.write_text(KEY_PASSWORD + "\n")
    hop = start_router(router_conf(
        profile(pki, key=pki.server_key_encrypted, extra=f"    password: file:{secret}\n"),
        listener=tls_listener("    requireSsl: yes\n")))
    conn = BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.ca), timeout=10)
    assert round_trip(conn) == Delivery.ACCEPTED
    conn.close()


def rotating_profile(pki: Pki, directory: Path) -> tuple[Pki, Path, Path, str]:
    """A profile "tls" whose files are copies of ``pki``'s server certificate
    and key, to be overwritten; and a renewal signed by another CA."""
    (directory / "renewed").mkdir()
    renewed = make_pki(directory / "renewed")
    cert, key = directory / "current.pem", directory / "current-key.pem"
    cert.write_bytes(pki.server_cert.read_bytes())
    key.write_bytes(pki.server_key.read_bytes())
    tls = (f"sslProfile {{\n    name: tls\n    certFile: {cert}\n    privateKeyFile: {key}\n"
           "}\n")
    return renewed, cert, key, tls


def test_sighup_rotates_the_certificates_for_new_connections(
        start_router: StartRouter, pki: Pki, tmp_path: Path) -> None:
    renewed, cert, key, tls = rotating_profile(pki, tmp_path)
    hop = start_router(router_conf(tls, listener=tls_listener("    requireSsl: yes\n")))
    before = BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.ca), timeout=10)
    # A renewal signed by another CA; a broken file first: the old ones stay.
    key.write_text("not a key\n")
    hop.proc.send_signal(signal.SIGHUP)
    hop.wait_log(r"TLS profiles not reloaded, the previous ones stay in use: sslProfile "
                 r"'tls': certFile .* do not load")
    BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.ca), timeout=10).close()
    cert.write_bytes(renewed.server_cert.read_bytes())
    key.write_bytes(renewed.server_key.read_bytes())
    hop.proc.send_signal(signal.SIGHUP)
    hop.wait_log(r"TLS profiles reloaded \(1\)")
    after = assert_rotated(hop, pki, renewed, before)
    before.close()
    after.close()


def assert_rotated(hop: Hop, pki: Pki, renewed: Pki,
                   before: BlockingConnection) -> BlockingConnection:
    """New clients get the renewed certificate (the old CA no longer vouches
    for it) while ``before``, opened earlier, still carries messages; returns
    a connection made after the rotation."""
    after = BlockingConnection(amqps(hop), ssl_domain=client_domain(renewed.ca), timeout=10)
    assert round_trip(after, "renewed/q") == Delivery.ACCEPTED
    with pytest.raises(ConnectionException, match="SSL Failure"):
        BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.ca), timeout=10)
    assert round_trip(before, "before/q") == Delivery.ACCEPTED, "open connections stay up"
    return after


def update_profile(hop: Hop, attributes: dict[str, str]) -> tuple[int, str, Any]:
    client = Management(hop.url)
    try:
        return client.request(attributes, operation="UPDATE", type=PREFIX + "sslProfile",
                              name="tls")
    finally:
        client.close()


def test_a_management_update_rotates_the_certificates_for_new_connections(
        start_router: StartRouter, pki: Pki, tmp_path: Path) -> None:
    (tmp_path / "renewed").mkdir()
    renewed = make_pki(tmp_path / "renewed")  # signed by another CA
    hop = start_router(router_conf(profile(pki), listener=tls_listener()))
    before = BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.ca), timeout=10)
    with pytest.raises(ConnectionException, match="SSL Failure"):
        BlockingConnection(amqps(hop), ssl_domain=client_domain(renewed.ca), timeout=10)

    status, description, row = update_profile(hop, {
        "certFile": str(renewed.server_cert), "privateKeyFile": str(renewed.server_key),
        "caCertFile": str(renewed.ca)})
    assert (status, description) == (200, "OK")
    assert (row["certFile"], row["caCertFile"]) == (str(renewed.server_cert), str(renewed.ca))
    hop.wait_log(r"sslProfile 'tls' reloaded: connections made from now on use its files")
    after = assert_rotated(hop, pki, renewed, before)
    # SIGHUP reads the files the profile names now, not those of the conf file.
    hop.proc.send_signal(signal.SIGHUP)
    hop.wait_log(r"TLS profiles reloaded \(1\)")
    BlockingConnection(amqps(hop), ssl_domain=client_domain(renewed.ca), timeout=10).close()
    before.close()
    after.close()


def test_an_update_with_no_attributes_reads_the_files_again_in_place(
        start_router: StartRouter, pki: Pki, tmp_path: Path) -> None:
    renewed, cert, key, tls = rotating_profile(pki, tmp_path)
    hop = start_router(router_conf(tls, listener=tls_listener()))
    cert.write_bytes(renewed.server_cert.read_bytes())
    key.write_bytes(renewed.server_key.read_bytes())
    with pytest.raises(ConnectionException, match="SSL Failure"):  # not read yet
        BlockingConnection(amqps(hop), ssl_domain=client_domain(renewed.ca), timeout=10)
    assert update_profile(hop, {})[:2] == (200, "OK")
    BlockingConnection(amqps(hop), ssl_domain=client_domain(renewed.ca), timeout=10).close()


@pytest.mark.parametrize(("problem", "says"), [
    ("missing", "sslProfile 'tls': cannot read certFile {missing}: No such file or directory"),
    ("wrong-password", "sslProfile 'tls': certFile {cert} and privateKeyFile {encrypted} do "
                       "not load"),
    ("not-its-key", "sslProfile 'tls': certFile {cert} and privateKeyFile {other} do not "
                    "load"),
    ("bad-value", "invalid value for 'protocols' in section 'sslProfile'"),
    ("ssl-version", "sslProfile 'tls': OpenSSL refuses protocols 'SSLv3'"),
])
def test_an_update_that_does_not_load_is_refused_and_the_old_files_stay(
        start_router: StartRouter, pki: Pki, tmp_path: Path, problem: str, says: str) -> None:
    missing = tmp_path / "nowhere.pem"
    changes = {
        "missing": {"certFile": str(missing)},
        "wrong-password": {"privateKeyFile": str(pki.server_key_encrypted),
                           "password": "pass:wrong"},
        "not-its-key": {"privateKeyFile": str(pki.client_key)},
        "bad-value": {"protocols": "TLSv9"},
        "ssl-version": {"protocols": "SSLv3"},
    }
    hop = start_router(router_conf(profile(pki), listener=tls_listener()))
    status, description, _ = update_profile(hop, changes[problem])
    assert status == 400
    assert says.format(missing=missing, cert=pki.server_cert, encrypted=pki.server_key_encrypted,
                       other=pki.client_key) in description
    client = Management(hop.url)
    try:
        [row] = client.query("sslProfile", "certFile", "privateKeyFile", "protocols")
    finally:
        client.close()
    assert row == {"certFile": str(pki.server_cert), "privateKeyFile": str(pki.server_key),
                   "protocols": None}
    conn = BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.ca), timeout=10)
    assert round_trip(conn) == Delivery.ACCEPTED
    conn.close()


def test_a_created_profile_serves_a_listener_created_after_it(
        start_router: StartRouter, pki: Pki, tmp_path: Path) -> None:
    hop = start_router()
    client = Management(hop.url)
    try:
        status, description, _ = client.request(
            {"certFile": str(tmp_path / "nowhere.pem")}, operation="CREATE",
            type=PREFIX + "sslProfile", name="broken")
        assert status == 400
        assert f"sslProfile 'broken': cannot read certFile {tmp_path / 'nowhere.pem'}" \
            in description
        status, _, row = client.request(
            {"certFile": str(pki.server_cert), "privateKeyFile": str(pki.server_key)},
            operation="CREATE", type=PREFIX + "sslProfile", name="made")
        assert status == 201, row
        assert client.query("sslProfile", "name") == [{"name": "made"}]
        status, _, row = client.request(
            {"host": "127.0.0.1", "port": "0", "sslProfile": "made", "requireSsl": True,
             "saslMechanisms": "ANONYMOUS"}, operation="CREATE", type=PREFIX + "listener",
            name="secure")
        assert status == 201, row
        conn = BlockingConnection(f"amqps://127.0.0.1:{row['port']}",
                                  ssl_domain=client_domain(pki.ca), timeout=10)
        assert round_trip(conn) == Delivery.ACCEPTED
        conn.close()

        status, description, _ = client.request(operation="DELETE",
                                                 type=PREFIX + "sslProfile", name="made")
        assert (status, description) == (
            400, "sslProfile 'made' is used by listener 'secure'; delete it first")
        assert client.request(operation="DELETE", type=PREFIX + "listener",
                              name="secure")[0] == 204
        assert client.request(operation="DELETE", type=PREFIX + "sslProfile",
                              name="made")[0] == 204
        assert client.query("sslProfile", "name") == []
    finally:
        client.close()


def test_a_connector_connects_again_with_its_updated_profile(
        start_router: StartRouter, pki: Pki, tmp_path: Path) -> None:
    (tmp_path / "renewed").mkdir()
    renewed = make_pki(tmp_path / "renewed")
    plain = "listener {\n    host: 127.0.0.1\n    port: 0\n}\n"
    a = start_router(router_conf(profile(pki), router_id="A",
                                 listener=tls_listener("    requireSsl: yes\n") + plain),
                     name="A", listeners=2)
    trusting = f"sslProfile {{\n    name: tls\n    caCertFile: {pki.ca}\n}}\n"
    connector = (f"connector {{\n    name: to-a\n    host: localhost\n    port: {a.ports[0]}\n"
                 "    sslProfile: tls\n}\n")
    b = start_router(router_conf(trusting + connector, router_id="B"), name="B")
    a_mgmt = Management(f"amqp://127.0.0.1:{a.ports[1]}")
    b_mgmt = Management(b.url)
    try:
        def from_b() -> list[str]:
            return [c["identity"] for c in a_mgmt.query("connection", "identity", "container",
                                                         "isEncrypted")
                    if c["container"] == "B" and c["isEncrypted"]]

        wait_for(lambda: len(from_b()) == 1, what="B's connection over TLS")
        [first] = from_b()
        assert a_mgmt.request({"certFile": str(renewed.server_cert),
                               "privateKeyFile": str(renewed.server_key)}, operation="UPDATE",
                              type=PREFIX + "sslProfile", name="tls")[0] == 200
        assert b_mgmt.request({"caCertFile": str(renewed.ca)}, operation="UPDATE",
                              type=PREFIX + "sslProfile", name="tls")[0] == 200
        assert from_b() == [first], "the open connection stays up"
        assert a_mgmt.request({"adminStatus": "deleted"}, operation="UPDATE",
                              type=PREFIX + "connection", identity=first)[0] == 200
        # Trusting only the old CA, B could not verify A's new certificate.
        wait_for(lambda: from_b() not in ([], [first]), timeout=15,
                 what="B to connect again, trusting the new CA")
    finally:
        a_mgmt.close()
        b_mgmt.close()


def test_a_connector_that_cannot_verify_the_peer_logs_why_and_the_peer(
        start_router: StartRouter, pki: Pki, tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    other = make_pki(tmp_path / "other")
    a = start_router(router_conf(profile(pki), router_id="A",
                                 listener=tls_listener("    requireSsl: yes\n")), name="A")
    trusting_another_ca = f"sslProfile {{\n    name: tls\n    caCertFile: {other.ca}\n}}\n"
    connector = (f"connector {{\n    name: to-a\n    host: localhost\n    port: {a.ports[0]}\n"
                 "    sslProfile: tls\n}\n")
    b = start_router(router_conf(trusting_another_ca + connector, router_id="B"), name="B")
    b.wait_log(rf"\[C\d+\] Connection to localhost:{a.ports[0]} failed: "
               r"amqp:connection:framing-error: SSL Failure: ")


def test_a_route_container_connection_over_tls(start_router: StartRouter, pki: Pki) -> None:
    """A waypoint queue on a RabbitMQ reached over TLS, its certificate checked."""
    with running("tlsrabbit", tls=(pki.server_cert, pki.server_key, pki.ca)) as broker:
        assert broker.tls_port is not None
        connector = broker_connector(broker.tls_port, "secure", host="localhost").replace(
            "role: route-container\n", "role: route-container\n    sslProfile: tls\n")
        hop = start_router(router_conf(profile(pki) + connector + waypoint("stored", "secure")
                                       + LOG_INFO))
        wait_autolinks(hop, "stored", timeout=60)
        hop.wait_log(r"Connection Opened: dir=out host=localhost:\d+ encrypted=yes")
        conn = BlockingConnection(hop.url, timeout=10)
        assert round_trip(conn, "stored") == Delivery.ACCEPTED
        conn.close()
