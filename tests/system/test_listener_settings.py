"""Listener protocol settings reach the wire (docs/operations.md#protocol-settings)."""

from __future__ import annotations

import socket
import time

from proton import Delivery, Message

from tests.system.clients import connect, wait_credit, wait_settled
from tests.system.harness import Hop, router_conf


def test_frame_size_sessions_and_idle_timeout_are_advertised(start_router: object) -> None:
    listener = """listener {
    host: 127.0.0.1
    port: 0
    maxFrameSize: 2048
    maxSessions: 10
    idleTimeoutSeconds: 4
}
"""
    hop: Hop = start_router(router_conf(listener=listener))  # type: ignore[operator]
    conn = connect(hop.url)
    transport = conn.conn.transport
    assert transport.remote_max_frame_size == 2048
    assert transport.remote_channel_max == 9
    # proton (under qdrouterd as under Hop) advertises half the local idle
    # timeout, so that the peer's heartbeats arrive well within it.
    assert transport.remote_idle_timeout == 2.0
    assert conn.conn.remote_container == "HopTest"
    conn.close()


def test_defaults_match_qdrouterd(hop: Hop) -> None:
    conn = connect(hop.url)
    transport = conn.conn.transport
    assert transport.remote_max_frame_size == 16384
    assert transport.remote_channel_max == 32767
    assert transport.remote_idle_timeout == 8.0
    for capabilities in (conn.conn.remote_offered_capabilities,
                         conn.conn.remote_desired_capabilities):
        assert [str(c) for c in capabilities] == ["ANONYMOUS-RELAY", "qd.streaming-links"]
    conn.close()


def test_small_session_window_still_carries_large_messages(start_router: object) -> None:
    listener = """listener {
    host: 127.0.0.1
    port: 0
    maxFrameSize: 1024
    maxSessionFrames: 4
}
"""
    hop: Hop = start_router(router_conf(listener=listener))  # type: ignore[operator]
    conn = connect(hop.url)
    receiver = conn.create_receiver("window.q", credit=5)
    sender = conn.create_sender("window.q")
    wait_credit(conn, sender, 250)
    body = b"w" * 100_000
    delivery = sender.link.send(Message(body=body))
    assert receiver.receive(timeout=20).body == body
    receiver.accept()
    assert wait_settled(conn, delivery, timeout=20) == Delivery.ACCEPTED
    conn.close()


def test_silent_socket_closed_after_initial_handshake_timeout(start_router: object) -> None:
    listener = """listener {
    host: 127.0.0.1
    port: 0
    initialHandshakeTimeoutSeconds: 1
}
"""
    hop: Hop = start_router(router_conf(listener=listener))  # type: ignore[operator]
    with socket.create_connection(("127.0.0.1", hop.ports[0]), timeout=10) as sock:
        started = time.monotonic()
        data = b""
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        waited = time.monotonic() - started
    assert 0.9 <= waited < 8, f"closed after {waited:.1f} s"
    assert data == b"", "nothing was said: no protocol header arrived to answer"
    hop.wait_log(r"\[C1\] Timeout waiting for initial handshake")
