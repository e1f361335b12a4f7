"""Random and truncated bytes in the TLS and SASL handshakes: each bad
connection is closed, the router does not crash, and a client already
connected is served throughout."""

from __future__ import annotations

import random
import socket
import ssl
from pathlib import Path

import pytest
from proton import Delivery

from tests.system.certs import make_pki
from tests.system.clients import connect, send_async, wait_settled
from tests.system.conftest import StartRouter
from tests.system.harness import Hop, router_conf

AMQP_SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_TLS_HEADER = b"AMQP\x02\x01\x00\x00"


def client_hello() -> bytes:
    """The first flight of a real TLS client."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def garbage(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    hello = client_hello()
    samples = [rng.randbytes(rng.randint(1, 2048)) for _ in range(12)]
    samples += [hello[:n] for n in (1, 5, 6, 40, len(hello) // 2, len(hello) - 1)]
    flipped = bytearray(hello)
    for _ in range(8):
        flipped[rng.randrange(len(flipped))] ^= 0xFF
    samples.append(bytes(flipped))
    samples += [AMQP_TLS_HEADER + hello[:len(hello) // 3], AMQP_TLS_HEADER + b"\x16\x03\x01"]
    samples += [AMQP_SASL_HEADER + rng.randbytes(64),
                AMQP_SASL_HEADER + b"\x00\x00\x00\x30\x02\x01\x00\x00\x00\x53\x41\xc0",
                AMQP_SASL_HEADER[:5], b"AMQP\x03\x01\x00\x00\x00\x00\x00\x08\x02\x01\x00\x00"]
    return samples


def throw(hop: Hop, port: int, data: bytes) -> None:
    """Send ``data`` and half-close; wait until the router closes its side."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(4096):
                pass
        except OSError:
            pass  # reset by the router: fine


def test_garbage_in_tls_and_sasl_handshakes_disturbs_nobody(start_router: StartRouter,
                                                            tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    listeners = (
        "listener {\n    host: 127.0.0.1\n    port: 0\n    saslMechanisms: ANONYMOUS\n}\n"
        "listener {\n    host: 127.0.0.1\n    port: 0\n    sslProfile: tls\n"
        "    requireSsl: yes\n    saslMechanisms: ANONYMOUS EXTERNAL\n}\n"
        "listener {\n    host: 127.0.0.1\n    port: 0\n    sslProfile: tls\n"
        "    saslMechanisms: ANONYMOUS\n    authenticatePeer: no\n}\n")
    profile = (f"sslProfile {{\n    name: tls\n    certFile: {pki.server_cert}\n"
               f"    privateKeyFile: {pki.server_key}\n    caCertFile: {pki.ca}\n}}\n")
    hop = start_router(router_conf(profile, listener=listeners), listeners=3)
    conn = connect(hop.url)
    receiver = conn.create_receiver("steady", credit=10)
    sender = conn.create_sender("steady")
    thrown = 0
    for seed, port in enumerate(hop.ports):
        for data in garbage(seed):
            throw(hop, port, data)
            thrown += 1
        delivery = send_async(sender, f"after {port}")
        assert receiver.receive(timeout=10).body == f"after {port}"
        receiver.accept()
        assert wait_settled(conn, delivery) == Delivery.ACCEPTED
    assert hop.proc.poll() is None, "the router is still running"
    assert thrown >= 3 * 20
    assert "Traceback" not in hop.log_text()
    conn.close()
