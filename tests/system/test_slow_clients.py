"""Clients that open a connection and never finish the handshake
(docs/compatibility.md#slow-clients): silent, stopped after the AMQP
header, in the middle of SASL or of a TLS handshake, or sending half an
HTTP request. Each is closed once the listener's
``initialHandshakeTimeoutSeconds`` has passed, and everyone else is served
meanwhile."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from proton import Delivery

from bench.faults import AMQP_HEADER, SASL_HEADER, SASL_INIT_PART
from tests.system.certs import make_pki
from tests.system.clients import deliver_across
from tests.system.conftest import StartRouter
from tests.system.harness import Hop

LIMIT_S = 2


def _conf(tmp_path: Path) -> str:
    pki = make_pki(tmp_path)
    return f"""\
router {{
    mode: standalone
    id: S
}}
sslProfile {{
    name: tls
    certFile: {pki.server_cert}
    privateKeyFile: {pki.server_key}
}}
listener {{
    host: 127.0.0.1
    port: 0
    saslMechanisms: ANONYMOUS PLAIN
    initialHandshakeTimeoutSeconds: {LIMIT_S}
}}
listener {{
    host: 127.0.0.1
    port: 0
    sslProfile: tls
    requireSsl: yes
    initialHandshakeTimeoutSeconds: {LIMIT_S}
}}
listener {{
    host: 127.0.0.1
    port: 0
    http: yes
    initialHandshakeTimeoutSeconds: {LIMIT_S}
}}
listener {{
    host: 127.0.0.1
    port: 0
}}
"""


def _held_until_closed(sock: socket.socket) -> tuple[float, bytes]:
    """Seconds until the router closes ``sock``, and what it said."""
    started = time.monotonic()
    said = b""
    try:
        while chunk := sock.recv(4096):
            said += chunk
    except ConnectionResetError:
        pass
    return time.monotonic() - started, said


def _open(port: int, first: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    if first:
        sock.sendall(first)
    return sock


# A TLS ClientHello's first bytes; half an HTTP request; half a body (the
# AMQP header, SASL header and half a SASL init come from bench.faults).
TLS_HELLO_PART = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"
HTTP_PART = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
HTTP_BODY_PART = (b"POST /api/v1/router.config.address HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"na")


def test_each_unfinished_handshake_is_closed_in_bounded_time(start_router: StartRouter,
                                                             tmp_path: Path) -> None:
    hop: Hop = start_router(_conf(tmp_path), listeners=4)
    amqp, tls, http, other = hop.ports
    slow = {
        "silent AMQP": _open(amqp, b""),
        "AMQP header only": _open(amqp, AMQP_HEADER),
        "SASL header only": _open(amqp, SASL_HEADER),
        "half a SASL init": _open(amqp, SASL_INIT_PART),
        "silent TLS": _open(tls, b""),
        "half a TLS hello": _open(tls, TLS_HELLO_PART),
        "silent HTTP": _open(http, b""),
        "half an HTTP request": _open(http, HTTP_PART),
        "half an HTTP body": _open(http, HTTP_BODY_PART),
    }
    # Everyone else is served while they hang.
    url = f"amqp://127.0.0.1:{other}"
    assert deliver_across(url, url, "fine", "served") == Delivery.ACCEPTED
    results = {}
    for name, sock in slow.items():
        with sock:
            results[name] = _held_until_closed(sock)
    for name, (waited, _) in results.items():
        assert waited < LIMIT_S + 8, f"{name}: still open after {waited:.1f} s"
    assert results["half an HTTP request"][1].startswith(b"HTTP/1.1 408 ")
    assert results["half an HTTP body"][1].startswith(b"HTTP/1.1 408 ")
    assert hop.log_text().count("Timeout waiting for initial handshake") >= 6
    assert deliver_across(url, url, "fine", "still served") == Delivery.ACCEPTED
