"""Embedded peer routers: routers that run inside applications and form a
network with the other members of their peer group."""

from __future__ import annotations

import secrets
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from proton import Delivery

import router as hop
from router.embedded import PeerError
from tests.system.clients import connect, deliver_across, receive_all, send_async, wait_all
from tests.system.mgmt import Management
from tests.system.rabbitmq import free_port
from tests.waiting import wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "peers" / "upper.py"


def group_url(group: str, name: str, port: int) -> str:
    return f"peer://{group}/{name}?port={port}&announceInterval=150&expiry=1200"


def test_two_processes_with_embedded_peers_exchange_request_and_reply() -> None:
    """The example, run as its documentation says, in two processes."""
    base = [sys.executable, str(EXAMPLE), "--group", f"upper-{secrets.token_hex(4)}",
            "--port", str(free_port())]
    service = subprocess.Popen([*base, "--name", "svc", "serve", "--count", "2"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for text in ("hello, peers", "and again"):
            asked = subprocess.run([*base, "ask", text], capture_output=True, text=True,
                                   timeout=90)
            assert asked.returncode == 0, asked.stdout + asked.stderr
            assert asked.stdout == text.upper() + "\n"
        out, _ = service.communicate(timeout=30)
        assert service.returncode == 0, out
        assert out.startswith("svc: serving examples/upper in group upper-")
    finally:
        if service.poll() is None:
            service.kill()
            service.wait()


def test_an_embedded_peer_serves_its_application_and_stops_cleanly() -> None:
    group = f"solo-{secrets.token_hex(4)}"
    with hop.peer(group_url(group, "solo", free_port())) as p:
        assert p.running and p.router_id == "solo" and p.group == group
        assert p.peers() == set()
        client = Management(p.url)
        try:
            [row] = client.query("discovery", "group", "peers")
            [node] = client.query("router", "id", "mode")
        finally:
            client.close()
        assert row == {"group": group, "peers": []}
        assert node == {"id": "solo", "mode": "interior"}
        conn = connect(p.url)
        receiver = conn.create_receiver("local/work", credit=3)
        sender = conn.create_sender("local/work")
        deliveries = [send_async(sender, n) for n in range(3)]
        assert [m.body for m in receive_all(receiver, 3)] == [0, 1, 2]
        wait_all([conn], lambda: all(d.settled for d in deliveries))
        conn.close()
        url = p.url
    assert not p.running
    host, port = url.removeprefix("amqp://").split(":")
    with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=2):
        pass
    p.stop()  # stopping again does nothing
    with pytest.raises(PeerError, match="already started"):
        p.start()


def test_two_embedded_peers_in_one_process_route_between_them() -> None:
    group, port = f"pair-{secrets.token_hex(4)}", free_port()
    with hop.peer(group_url(group, "left", port)) as left, \
            hop.peer(group_url(group, "right", port)) as right:
        wait_for(lambda: left.peers() == {"right"} and right.peers() == {"left"}, 30,
                 "the two embedded routers to route to each other")
        assert deliver_across(left.url, right.url, "across", "from left") == Delivery.ACCEPTED


def test_an_embedded_peer_that_cannot_start_says_why() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        busy = taken.getsockname()[1]
        peer = hop.peer(f"peer://g/n?clientPort={busy}&port={free_port()}")
        with pytest.raises(PeerError, match="required listener failed"):
            peer.start()
        assert not peer.running
    finally:
        taken.close()
    with pytest.raises(PeerError, match="unknown option"):
        hop.peer("peer://g/n?listen=yes")
