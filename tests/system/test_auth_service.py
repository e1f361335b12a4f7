"""Delegated authentication (docs/security.md#delegated-authentication): a
listener with a ``saslPlugin`` relays each client's SASL to an
authentication service (a real proton server with Cyrus SASL, started by
the test), takes the user and the permissions the service's OPEN gives,
and fails the client's authentication clearly when the service is down,
refuses TLS or never answers, while it serves every other client."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import ConnectionException, Delivery
from proton.utils import BlockingConnection, LinkDetached

from tests.system.certs import Pki, make_pki
from tests.system.clients import connect, send_async, wait_settled
from tests.system.conftest import StartRouter
from tests.system.harness import Hop
from tests.system.mgmt import Management
from tests.system.test_tools import hopstat
from tests.waiting import free_port, wait_for

PASSWORD = "s3same"
PERMISSIONS = {"admin": {"*": ["send", "recv"]}, "guest": {"foo": ["send", "recv"]}}


class Service:
    """``python -m tests.system.authservice`` running on ``port``."""

    def __init__(self, proc: subprocess.Popen[str], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def output(self) -> str:
        return self.log.read_text()


@pytest.fixture(scope="module")
def sasl_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sasldb knowing admin and guest, and the service's SASL configuration."""
    directory = tmp_path_factory.mktemp("authservice")
    db = directory / "users.sasldb"
    for user in ("admin", "guest"):
        subprocess.run(["saslpasswd2", "-c", "-p", "-f", str(db), user], input=PASSWORD,
                       text=True, check=True, timeout=30)
    (directory / "proton-server.conf").write_text(
        f"pwcheck_method: auxprop\nauxprop_plugin: sasldb\nsasldb_path: {db}\n"
        "mech_list: SCRAM-SHA-1 PLAIN\n")
    return directory


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def start_service(sasl_dir: Path, tmp_path: Path, *, port: int | None = None,
                  tls: Pki | None = None) -> Service:
    port = port or free_port()
    log = tmp_path / f"authservice-{port}.log"
    args = [sys.executable, "-m", "tests.system.authservice", "--port", str(port),
            "--sasl-dir", str(sasl_dir), "--permissions", json.dumps(PERMISSIONS)]
    if tls is not None:
        args += ["--cert", str(tls.server_cert), "--key", str(tls.server_key)]
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, text=True)
    service = Service(proc, port, log)
    wait_for(lambda: "listening on" in service.output(), 20, "the service listening")
    return service


@pytest.fixture
def services(sasl_dir: Path, tmp_path: Path) -> Iterator[list[Service]]:
    started: list[Service] = []
    yield started
    for service in started:
        service.stop()


def router(start_router: StartRouter, service_port: int, *, listener: str = "",
           plugin: str = "", extra: str = "", host: str = "127.0.0.1") -> Hop:
    """A router whose first listener delegates SASL to the service on
    ``service_port``; its second listener is for management."""
    return start_router(
        "router {\n    mode: standalone\n    id: Delegating\n}\n"
        f"authServicePlugin {{\n    name: auth\n    host: {host}\n"
        f"    port: {service_port}\n{plugin}}}\n"
        "listener {\n    host: 127.0.0.1\n    port: 0\n    saslPlugin: auth\n"
        f"    saslMechanisms: SCRAM-SHA-1 PLAIN\n{listener}}}\n"
        "listener {\n    host: 127.0.0.1\n    port: 0\n    saslMechanisms: ANONYMOUS\n}\n"
        + extra, listeners=2)


def login(hop: Hop, user: str, password: str = PASSWORD, mechs: str = "SCRAM-SHA-1",
          timeout: float = 10, **kwargs: object) -> BlockingConnection:
    return BlockingConnection(hop.url, user=user, password=password, allowed_mechs=mechs,
                              timeout=timeout, **kwargs)


def connections(hop: Hop) -> list[tuple[str, str, bool]]:
    client = Management(f"amqp://127.0.0.1:{hop.ports[1]}")
    try:
        rows = client.query("connection", "user", "sasl", "isAuthenticated")
    finally:
        client.close()
    return sorted((r["user"], r["sasl"], r["isAuthenticated"]) for r in rows
                  if r["sasl"] != "ANONYMOUS")


def test_the_service_authenticates_with_a_challenge_and_names_the_user(
        start_router: StartRouter, services: list[Service], sasl_dir: Path,
        tmp_path: Path) -> None:
    """SCRAM-SHA-1 takes a challenge and a response each way: every step is
    relayed, and the user is the one the service's OPEN names."""
    services.append(start_service(sasl_dir, tmp_path))
    hop = router(start_router, services[0].port)
    conn = login(hop, "admin")
    try:
        assert connections(hop) == [("admin", "SCRAM-SHA-1", True)]
        table = hopstat(f"amqp://127.0.0.1:{hop.ports[1]}", "-c")
        assert "admin(SCRAM-SHA-1)" in table, table
    finally:
        conn.close()
    with pytest.raises(ConnectionException, match=r"unauthorized-access.*Authentication failed"):
        login(hop, "admin", "wrong")
    with pytest.raises(ConnectionException, match="unauthorized-access"):
        login(hop, "nobody")
    hop.wait_log(r"authentication refused by the authentication service 127\.0\.0\.1:\d+")
    assert "opened admin" in services[0].output()


def test_a_client_may_not_skip_the_service(start_router: StartRouter,
                                           services: list[Service], sasl_dir: Path,
                                           tmp_path: Path) -> None:
    services.append(start_service(sasl_dir, tmp_path))
    hop = router(start_router, services[0].port)
    with pytest.raises(ConnectionException):
        BlockingConnection(hop.url, sasl_enabled=False, timeout=10)
    with pytest.raises(ConnectionException):
        BlockingConnection(hop.url, allowed_mechs="ANONYMOUS", timeout=10)


def test_plain_goes_to_the_service_in_clear_only_where_the_listener_allows_it(
        start_router: StartRouter, services: list[Service], sasl_dir: Path,
        tmp_path: Path) -> None:
    services.append(start_service(sasl_dir, tmp_path))
    strict = router(start_router, services[0].port)
    with pytest.raises(ConnectionException):
        login(strict, "admin", mechs="PLAIN", allow_insecure_mechs=True)
    relaxed = router(start_router, services[0].port,
                     listener="    allowInsecureMechanisms: yes\n")
    conn = login(relaxed, "admin", mechs="PLAIN", allow_insecure_mechs=True)
    try:
        assert connections(relaxed) == [("admin", "PLAIN", True)]
    finally:
        conn.close()


def test_the_services_permissions_rule_what_the_user_attaches_and_sends(
        start_router: StartRouter, services: list[Service], sasl_dir: Path,
        tmp_path: Path) -> None:
    """guest may use foo only; admin anything; both may receive from a
    dynamic address and send on an anonymous link, each message's target
    checked (qdrouterd's test_unauthorized_anonymous_sender_target)."""
    services.append(start_service(sasl_dir, tmp_path))
    hop = router(start_router, services[0].port)
    guest = login(hop, "guest")
    try:
        receiver = guest.create_receiver("foo", credit=5)
        sender = guest.create_sender("foo")
        sent = send_async(sender, "allowed")
        assert receiver.receive(timeout=10).body == "allowed"
        receiver.accept()
        assert wait_settled(guest, sent) == Delivery.ACCEPTED
        with pytest.raises(LinkDetached, match="unauthorized-access"):
            guest.create_sender("bar")
        with pytest.raises(LinkDetached, match="unauthorized-access"):
            guest.create_receiver("bar")
        dynamic = guest.create_receiver(None, dynamic=True)
        anonymous = guest.create_sender(None)
        refused = send_async(anonymous, "to my own temporary address",
                             address=dynamic.remote_source.address)
        assert wait_settled(guest, refused) == Delivery.REJECTED
        ok = send_async(anonymous, "to foo", address="foo")
        assert receiver.receive(timeout=10).body == "to foo"
        receiver.accept()
        assert wait_settled(guest, ok) == Delivery.ACCEPTED
    finally:
        guest.close()
    admin = login(hop, "admin")
    try:
        dynamic = admin.create_receiver(None, dynamic=True)
        anonymous = admin.create_sender(None)
        delivery = send_async(anonymous, "hello", address=dynamic.remote_source.address)
        assert dynamic.receive(timeout=10).body == "hello"
        dynamic.accept()
        assert wait_settled(admin, delivery) == Delivery.ACCEPTED
        admin.create_sender("whatever").close()
    finally:
        admin.close()


def test_tls_to_the_service_through_an_ssl_profile(
        start_router: StartRouter, services: list[Service], sasl_dir: Path, tmp_path: Path,
        pki: Pki) -> None:
    services.append(start_service(sasl_dir, tmp_path, tls=pki))
    profile = f"sslProfile {{\n    name: to-auth\n    caCertFile: {pki.ca}\n}}\n"
    # The service's certificate names localhost: its name is checked.
    hop = router(start_router, services[0].port, plugin="    sslProfile: to-auth\n",
                 extra=profile, host="localhost")
    conn = login(hop, "guest")
    conn.close()
    stranger = (f"sslProfile {{\n    name: to-auth\n    caCertFile: {pki.stranger_ca}\n}}\n")
    distrustful = router(start_router, services[0].port, plugin="    sslProfile: to-auth\n",
                         extra=stranger, host="localhost")
    with pytest.raises(ConnectionException, match="unauthorized-access"):
        login(distrustful, "guest")
    distrustful.wait_log(r"delegated authentication \(authServicePlugin auth, "
                         r"localhost:\d+\) failed: .*certificate verify failed")


def test_a_service_that_is_down_fails_authentication_and_the_router_goes_on(
        start_router: StartRouter, services: list[Service], sasl_dir: Path,
        tmp_path: Path) -> None:
    port = free_port()
    hop = router(start_router, port)
    with pytest.raises(ConnectionException, match="unauthorized-access"):
        login(hop, "admin")
    hop.wait_log(r"delegated authentication \(authServicePlugin auth, 127\.0\.0\.1:\d+\) "
                 r"failed: cannot connect to 127\.0\.0\.1:\d+: Connection refused")
    anonymous = connect(f"amqp://127.0.0.1:{hop.ports[1]}")
    anonymous.close()
    services.append(start_service(sasl_dir, tmp_path, port=port))
    login(hop, "admin").close()


def test_a_service_that_never_answers_fails_authentication_in_time(
        start_router: StartRouter) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        hop = router(start_router, silent.getsockname()[1])
        started = time.monotonic()
        with pytest.raises(ConnectionException, match="unauthorized-access"):
            login(hop, "admin", timeout=40)
        assert time.monotonic() - started < 30
        hop.wait_log(r"failed: no answer within 15 s")
    finally:
        silent.close()
