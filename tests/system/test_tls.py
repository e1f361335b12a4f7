"""TLS on listeners and connectors: sslProfile, requireSsl, client
certificates with SASL EXTERNAL, TLS between routers, and the start-up
errors of a profile that cannot be used."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from proton import ConnectionException, Delivery, SSLDomain
from proton.utils import BlockingConnection

from tests.system.brokered import LOG_INFO, broker_connector, wait_autolinks, waypoint
from tests.system.certs import KEY_PASSWORD, Pki, make_pki
from tests.system.clients import deliver_across, send_async, wait_settled
from tests.system.conftest import StartRouter
from tests.system.harness import Hop, hopd_command, router_conf
from tests.system.mgmt import Management
from tests.system.network import interior_conf
from tests.system.rabbitmq import free_port, running


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
def test_an_unusable_profile_stops_the_start_naming_the_file(
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
    done = subprocess.run(hopd_command("-c", str(conf_path)), capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 2
    expected = says.format(missing=missing, cert=pki.server_cert, key=encrypted)
    assert expected in done.stdout + done.stderr
    assert "Listening on" not in done.stdout + done.stderr


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


def test_sighup_rotates_the_certificates_for_new_connections(
        start_router: StartRouter, pki: Pki, tmp_path: Path) -> None:
    (tmp_path / "renewed").mkdir()
    renewed = make_pki(tmp_path / "renewed")
    cert, key = tmp_path / "current.pem", tmp_path / "current-key.pem"
    cert.write_bytes(pki.server_cert.read_bytes())
    key.write_bytes(pki.server_key.read_bytes())
    tls = (f"sslProfile {{\n    name: tls\n    certFile: {cert}\n    privateKeyFile: {key}\n"
           "}\n")
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
    after = BlockingConnection(amqps(hop), ssl_domain=client_domain(renewed.ca), timeout=10)
    assert round_trip(after, "renewed/q") == Delivery.ACCEPTED
    # The old CA does not vouch for the new certificate.
    with pytest.raises(ConnectionException, match="SSL Failure"):
        BlockingConnection(amqps(hop), ssl_domain=client_domain(pki.ca), timeout=10)
    assert round_trip(before, "before/q") == Delivery.ACCEPTED, "open connections stay up"
    before.close()
    after.close()


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
