"""TLS on HTTP listeners (docs/operations.md#https-and-websockets-over-tls):
HTTPS for the files and endpoints, plain HTTP beside it unless requireSsl,
client certificates with authenticatePeer, and AMQP over WebSockets over
TLS (wss)."""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
from pathlib import Path

import pytest

from tests.system.certs import Pki, make_pki
from tests.system.conftest import StartRouter
from tests.system.harness import Hop, router_conf
from tests.system.mgmt import Management
from tests.system.wsclient import WsClient, round_trip


def _conf(pki: Pki, root: Path, listener: str) -> str:
    profile = (f"sslProfile {{\n    name: web\n    certFile: {pki.server_cert}\n"
               f"    privateKeyFile: {pki.server_key}\n    caCertFile: {pki.ca}\n}}\n")
    return router_conf(profile + "listener {\n    host: 127.0.0.1\n    port: 0\n"
                       f"    http: yes\n    httpRootDir: {root}\n    sslProfile: web\n"
                       f"{listener}}}\n")


def _start(start_router: StartRouter, tmp_path: Path, listener: str = "") -> tuple[Hop, Pki]:
    pki = make_pki(tmp_path)
    root = tmp_path / "site"
    root.mkdir()
    (root / "hello.txt").write_text("HTTP test\n")
    return start_router(_conf(pki, root, listener), listeners=2), pki


def _client_context(pki: Pki, cert: bool = False) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.check_hostname = False  # reached by address; the CA signature is checked
    if cert:
        context.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return context


def _get(port: int, context: ssl.SSLContext | None, path: str = "/hello.txt") -> tuple[int, bytes]:
    client: http.client.HTTPConnection
    if context is None:
        client = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    else:
        client = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    try:
        client.request("GET", path)
        response = client.getresponse()
        return response.status, response.read()
    finally:
        client.close()


def test_https_and_plain_http_on_one_port(start_router: StartRouter, tmp_path: Path) -> None:
    hop, pki = _start(start_router, tmp_path)
    port = hop.ports[1]
    assert _get(port, _client_context(pki)) == (200, b"HTTP test\n")
    assert _get(port, None) == (200, b"HTTP test\n"), "no requireSsl: plain HTTP too"
    assert _get(port, _client_context(pki), "/healthz")[0] == 200


def test_require_ssl_refuses_plain_http(start_router: StartRouter, tmp_path: Path) -> None:
    hop, pki = _start(start_router, tmp_path, "    requireSsl: yes\n")
    port = hop.ports[1]
    assert _get(port, _client_context(pki)) == (200, b"HTTP test\n")
    with pytest.raises((http.client.HTTPException, OSError)):
        _get(port, None)
    assert _get(port, _client_context(pki)) == (200, b"HTTP test\n"), "still serving"


def test_authenticate_peer_needs_a_client_certificate(start_router: StartRouter,
                                                      tmp_path: Path) -> None:
    hop, pki = _start(start_router, tmp_path, "    requireSsl: yes\n    authenticatePeer: yes\n")
    port = hop.ports[1]
    with pytest.raises((ssl.SSLError, OSError)):
        _get(port, _client_context(pki))
    assert _get(port, _client_context(pki, cert=True)) == (200, b"HTTP test\n")


def test_a_client_certificate_logs_in_to_the_console(start_router: StartRouter,
                                                    tmp_path: Path) -> None:
    """The certificate's subject is the console's user; with no vhost policy
    an authenticated user may change the router (docs/operations.md#who-may-do-what)."""
    hop, pki = _start(start_router, tmp_path, "    requireSsl: yes\n    authenticatePeer: yes\n")
    status, body = _get(hop.ports[1], _client_context(pki, cert=True), "/api/v1/whoami")
    assert status == 200
    me = json.loads(body)
    assert (me["user"], me["write"], me["authenticated"]) == (
        "O=Hop tests,CN=app-client", True, True), "the subject as AMQP connections show it"


def test_garbage_after_a_tls_record_header_closes_only_that_connection(
        start_router: StartRouter, tmp_path: Path) -> None:
    hop, pki = _start(start_router, tmp_path)
    port = hop.ports[1]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"\x16\x03\x01\x00\x05garbage and more garbage")
        # The router answers with at most a TLS alert, then closes.
        received = b""
        try:
            while chunk := sock.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
        assert not received.startswith(b"HTTP")
    assert _get(port, _client_context(pki)) == (200, b"HTTP test\n")
    assert "TLS failed" in hop.log_text()


def test_amqp_over_websockets_over_tls(start_router: StartRouter, tmp_path: Path) -> None:
    hop, pki = _start(start_router, tmp_path, "    requireSsl: yes\n")
    ws = WsClient(hop.ports[1], tls=_client_context(pki))
    assert ws.accepted is not None
    ws.open()
    try:
        round_trip(ws, hop.url, "wss.in", "over tls")
        management = Management(hop.url)
        try:
            row, = [r for r in management.query("connection") if r["container"] == "ws-client"]
        finally:
            management.close()
        assert row["isEncrypted"] is True and row["ssl"] is True
        assert row["sslProto"] in ("TLSv1.2", "TLSv1.3") and row["sslCipher"]
    finally:
        ws.close()


def test_a_broken_tls_record_on_wss_ends_only_that_connection(
        start_router: StartRouter, tmp_path: Path) -> None:
    hop, pki = _start(start_router, tmp_path, "    requireSsl: yes\n")
    ws = WsClient(hop.ports[1], tls=_client_context(pki))
    ws.open()
    # An application-data record that does not decrypt, written under the
    # TLS layer, while the AMQP connection inside is open.
    raw = socket.socket(fileno=os.dup(ws.sock.fileno()))
    raw.sendall(b"\x17\x03\x03\x00\x20" + bytes(range(32)))
    raw.close()
    hop.wait_log(r"WebSocket TLS failed")
    ws.close()
    again = WsClient(hop.ports[1], tls=_client_context(pki))
    try:
        again.open()
        round_trip(again, hop.url, "wss.after", "still serving")
    finally:
        again.close()
