"""TLS on either side of a carried TCP connection (docs/tcp.md#tls): a
``tcpListener`` with an ``sslProfile`` takes TLS clients, a
``tcpConnector`` with one speaks TLS to its service; real TLS clients and
services (Python's ``ssl``) on loopback, certificates made by the test."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest

from tests.system.certs import Pki, make_pki
from tests.system.conftest import StartRouter
from tests.system.harness import Hop, hopd_command, router_conf
from tests.system.mgmt import Management
from tests.system.network import start_network
from tests.system.tcpservices import TCP_LISTENING, EchoServer, exchange, read_line

LINE = {"A": [], "B": ["A"], "C": ["B"]}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _profiles(pki: Pki) -> str:
    """``server``: the router's certificate (and CAs to check clients with);
    ``trusting``: the CA a service's certificate is checked against;
    ``stranger``: a CA that signed nothing here."""
    return (f"sslProfile {{\n    name: server\n    certFile: {pki.server_cert}\n"
            f"    privateKeyFile: {pki.server_key}\n    caCertFile: {pki.ca}\n}}\n"
            f"sslProfile {{\n    name: trusting\n    caCertFile: {pki.ca}\n}}\n"
            f"sslProfile {{\n    name: stranger\n    caCertFile: {pki.stranger_ca}\n}}\n")


def _listener(address: str, extra: str = "") -> str:
    return f"tcpListener {{\n    host: 127.0.0.1\n    port: 0\n    address: {address}\n{extra}}}\n"


def _connector(address: str, port: int, extra: str = "") -> str:
    return (f"tcpConnector {{\n    host: 127.0.0.1\n    port: {port}\n    address: {address}\n"
            f"{extra}}}\n")


def _ports(hop: Hop) -> dict[str, int]:
    """Each TCP listener's port by address, once all have logged."""
    text = hop.log_text()
    return {m.group(2): int(m.group(1)) for m in TCP_LISTENING.finditer(text)}


class TlsEchoServer(EchoServer):
    """``EchoServer`` over TLS (the test CA's server certificate); at the
    client's close_notify it sends its own."""

    def __init__(self, name: str, pki: Pki, *, client_ca: Path | None = None) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.server_cert, pki.server_key)
        if client_ca is not None:
            context.load_verify_locations(client_ca)
            context.verify_mode = ssl.CERT_REQUIRED
        self.context = context
        self.handshakes_failed = 0
        super().__init__(name)

    def _echo(self, conn: socket.socket) -> None:
        try:
            tls = self.context.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError):
            self.handshakes_failed += 1
            conn.close()
            return
        with tls, contextlib.suppress(OSError):
            tls.sendall(self.name.encode() + b"\n")
            while data := tls.recv(1 << 16):
                tls.sendall(data)
            with contextlib.suppress(ssl.SSLError, OSError):
                tls.unwrap()


def _tls_client(port: int, pki: Pki, *, cert: bool = False) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if cert:
        context.load_cert_chain(pki.client_cert, pki.client_key)
    raw = socket.create_connection(("127.0.0.1", port), timeout=20)
    return context.wrap_socket(raw, server_hostname="localhost")


def _tls_round_trip(port: int, pki: Pki, payload: bytes, *, cert: bool = False) -> bytes:
    """Over TLS: the service's name, then ``payload`` there and back."""
    with _tls_client(port, pki, cert=cert) as sock:
        name = read_line(sock).strip()
        got = bytearray()

        def read() -> None:
            while len(got) < len(payload):
                chunk = sock.recv(1 << 16)
                if not chunk:
                    return
                got.extend(chunk)

        reader = threading.Thread(target=read)
        reader.start()
        sock.sendall(payload)
        reader.join(30)
        assert bytes(got) == payload
        return name


def test_a_tls_client_reaches_a_plain_service_through_a_tls_listener(
        start_router: StartRouter, echo: list[EchoServer], pki: Pki) -> None:
    echo.append(EchoServer("plain"))
    hop = start_router(router_conf(_profiles(pki) + _listener("svc", "    sslProfile: server\n")
                                   + _connector("svc", echo[0].port)))
    hop.wait_log(TCP_LISTENING.pattern)
    port = _ports(hop)["svc"]
    payload = os.urandom(1 << 20)
    assert _tls_round_trip(port, pki, payload) == b"plain"
    # The listener takes TLS only: a plain client's bytes are not a handshake.
    with socket.create_connection(("127.0.0.1", port), timeout=20) as plain:
        plain.sendall(b"GET / HTTP/1.0\r\n\r\n")
        got = bytearray()
        with contextlib.suppress(ConnectionResetError):
            while chunk := plain.recv(100):
                got.extend(chunk)
        assert b"plain" not in got  # at most a TLS alert, then the end
    hop.wait_log(r"TCP TLS: TLS handshake failed")
    assert echo[0].accepted == 1  # the plain client never reached the service
    assert _tls_round_trip(port, pki, b"still serving") == b"plain"
    mgmt = Management(hop.url)
    try:
        assert [(r["address"], r["sslProfile"]) for r in mgmt.query("tcpListener")] == [
            ("svc", "server")]
        assert [r["sslProfile"] for r in mgmt.query("tcpConnector")] == [None]
        status, description, _ = mgmt.request(
            {"port": "0", "address": "other", "sslProfile": "none-such"},
            operation="CREATE", type="tcpListener", name="t2")
        assert (status, description) == (400, "sslProfile 'none-such' is not loaded: there is "
                                               "no such profile, or it could not be loaded "
                                               "(logged)")
    finally:
        mgmt.conn.close()


def test_a_plain_client_reaches_a_tls_service_through_a_tls_connector(
        start_router: StartRouter, echo: list[EchoServer], pki: Pki) -> None:
    service = TlsEchoServer("secure", pki)
    echo.append(service)
    hop = start_router(router_conf(_profiles(pki) + _listener("svc") + _connector(
        "svc", service.port, "    sslProfile: trusting\n")))
    hop.wait_log(TCP_LISTENING.pattern)
    port = _ports(hop)["svc"]
    payload = os.urandom(3 << 20)
    # The client's end of stream is the service's close_notify, and its
    # close_notify the client's end of stream.
    assert exchange(port, payload) == (b"secure", payload)
    assert exchange(port, b"") == (b"secure", b"")


def test_a_service_whose_certificate_is_not_trusted_is_passed_over(
        start_router: StartRouter, echo: list[EchoServer], pki: Pki) -> None:
    service = TlsEchoServer("untrusted", pki)
    echo.append(service)
    hop = start_router(router_conf(_profiles(pki) + _listener("svc") + _connector(
        "svc", service.port, "    sslProfile: stranger\n")))
    hop.wait_log(TCP_LISTENING.pattern)
    port = _ports(hop)["svc"]
    # Its only connector's handshake fails: the client is reset, unheard.
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(b"secret")
        got = b""
        with contextlib.suppress(ConnectionResetError):
            got = sock.recv(100)
        assert got == b""
    hop.wait_log(r"TCP connector \S+ cannot reach 127\.0\.0\.1:\d+: TLS handshake failed: "
                 r"CERTIFICATE_VERIFY_FAILED")


def test_a_connector_whose_tls_handshake_fails_is_passed_over_for_another(
        start_router: StartRouter, echo: list[EchoServer], pki: Pki) -> None:
    untrusted = TlsEchoServer("untrusted", pki)
    good = TlsEchoServer("good", pki)
    echo.extend([untrusted, good])
    hop = start_router(router_conf(
        _profiles(pki) + _listener("svc")
        + _connector("svc", untrusted.port, "    sslProfile: stranger\n")
        + _connector("svc", good.port, "    sslProfile: trusting\n")))
    hop.wait_log(TCP_LISTENING.pattern)
    port = _ports(hop)["svc"]
    for _ in range(4):
        assert exchange(port, b"hello") == (b"good", b"hello")
    assert untrusted.handshakes_failed >= 1


def test_across_the_network_a_connector_whose_tls_fails_is_passed_over(
        start_router: StartRouter, echo: list[EchoServer], pki: Pki) -> None:
    untrusted = TlsEchoServer("untrusted", pki)
    good = TlsEchoServer("good", pki)
    echo.extend([untrusted, good])
    net = start_network(start_router, LINE, extras={
        "A": _listener("svc"),
        "B": _profiles(pki) + _connector("svc", untrusted.port, "    sslProfile: stranger\n"),
        "C": _profiles(pki) + _connector("svc", good.port, "    sslProfile: trusting\n"),
    })
    net["A"].wait_log(TCP_LISTENING.pattern)
    port = _ports(net["A"])["svc"]
    for _ in range(3):
        assert exchange(port, b"over the line") == (b"good", b"over the line")
    net["B"].wait_log(r"TCP connector \S+ cannot reach 127\.0\.0\.1:\d+: TLS handshake failed")


def test_a_listener_with_authenticate_peer_takes_only_clients_with_certificates(
        start_router: StartRouter, echo: list[EchoServer], pki: Pki) -> None:
    echo.append(EchoServer("plain"))
    hop = start_router(router_conf(_profiles(pki) + _listener(
        "svc", "    sslProfile: server\n    authenticatePeer: yes\n")
        + _connector("svc", echo[0].port)))
    hop.wait_log(TCP_LISTENING.pattern)
    port = _ports(hop)["svc"]
    assert _tls_round_trip(port, pki, b"with a certificate", cert=True) == b"plain"
    refused = (ssl.SSLError, ConnectionResetError, BrokenPipeError)
    with pytest.raises(refused), _tls_client(port, pki) as sock:
        # TLS 1.3: the server's refusal arrives with the first read.
        sock.sendall(b"without")
        assert sock.recv(100) == b""
        raise ConnectionResetError("closed without an answer")
    assert echo[0].accepted == 1


def test_tls_at_both_ends_of_a_line_of_three(
        start_router: StartRouter, echo: list[EchoServer], pki: Pki) -> None:
    service = TlsEchoServer("far", pki)
    echo.append(service)
    net = start_network(start_router, LINE, extras={
        "A": _profiles(pki) + _listener("svc", "    sslProfile: server\n"),
        "C": _profiles(pki) + _connector("svc", service.port, "    sslProfile: trusting\n"),
    })
    net["A"].wait_log(TCP_LISTENING.pattern)
    port = _ports(net["A"])["svc"]
    payload = os.urandom(2 << 20)
    assert _tls_round_trip(port, pki, payload) == b"far"
    assert _tls_round_trip(port, pki, b"again") == b"far"
    net["A"].wait_log(r"streamed to address svc across the network")
    assert service.accepted == 2


def test_a_bridge_whose_profile_cannot_load_stops_the_start(tmp_path: Path) -> None:
    missing = tmp_path / "gone.pem"
    conf_path = tmp_path / "broken.conf"
    conf_path.write_text(router_conf(
        f"sslProfile {{\n    name: broken\n    certFile: {missing}\n}}\n"
        + _listener("svc", "    sslProfile: broken\n")))
    result = subprocess.run(hopd_command("-c", str(conf_path)), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert "a TCP bridge's TLS cannot be used: sslProfile 'broken'" in (
        result.stdout + result.stderr)
