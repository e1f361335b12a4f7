"""The HTTP server on its own (router.adapter.http.server): a socket the
listeners hand over, served from the loop, with stand-ins for the parts it
is given (the WebSocket upgrades, the exposition ``/metrics`` answers with)
and no console.

Sockets handed over are taken in the same wake-up; ``/metrics`` and
``/healthz`` answer (503 while the router stops); a WebSocket upgrade goes
to the upgrades part with what the client sent after its request, or is
refused with the reason policy gives; a connection idle for a minute is
closed (docs/operations.md#metrics-and-health-checks,
docs/operations.md#amqp-over-websockets)."""

from __future__ import annotations

import base64
import socket
from collections import deque
from collections.abc import Iterator

import pytest

import conf
from router.adapter.connections.listeners import HttpHandoff
from router.adapter.connections.settings import listener_settings
from router.adapter.connections.state import Listener
from router.adapter.connections.websockets import Channel
from router.adapter.http.server import HttpServer
from router.adapter.loop.eventloop import EventLoop


class FakeUpgrades:
    """Stands in for ``router.adapter.connections.listeners.Upgrades``."""

    def __init__(self, refusal: str | None = None) -> None:
        self.refusal = refusal
        self.adopted: list[tuple[Listener, Channel, bytes]] = []

    def admit(self, sock: socket.socket) -> str | None:
        return self.refusal

    def adopt(self, sock: socket.socket, listener: Listener, channel: Channel,
              trailing: bytes) -> None:
        self.adopted.append((listener, channel, trailing))
        sock.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Served:
    """An HTTP server on a loop, and a client socket it serves."""

    def __init__(self, upgrades: FakeUpgrades | None = None) -> None:
        self.clock = Clock()
        self.loop = EventLoop(self.clock)
        self.handoff: HttpHandoff = deque()
        self.upgrades = upgrades or FakeUpgrades()
        self.server = HttpServer(self.loop, lambda done: done(b"hop_up 1\n"),
                                 "text/plain; version=0.0.4", self.handoff,
                                 self.upgrades)  # type: ignore[arg-type]
        self.listening = socket.socket()
        self.listening.bind(("127.0.0.1", 0))
        section = conf.ListenerSection(host="127.0.0.1", port="0", http=True)
        self.listener = Listener(listener_settings(section), self.listening)
        theirs, self.client = socket.socketpair()
        theirs.setblocking(False)
        self.handoff.append((theirs, self.listener))

    def take(self) -> None:
        """The wake-up after the listeners handed the socket over."""
        assert self.server.next_deadline() == 0.0, "due at once while it holds sockets"
        self.server.tick(self.clock.now)
        assert not self.handoff and len(self.server.conns) == 1

    def ask(self, request: bytes) -> bytes:
        """Send ``request``; what comes back once the loop handled it."""
        self.client.sendall(request)
        answer = b""
        self.client.settimeout(2.0)
        for _ in range(20):
            self.loop.run_once(0.05)
            try:
                self.client.settimeout(0.05)
                chunk = self.client.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                break
            answer += chunk
            if b"\r\n\r\n" in answer:
                head, _, rest = answer.partition(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), 0)
                if len(rest) >= length:
                    break
        return answer

    def close(self) -> None:
        self.server.close()
        self.client.close()
        self.listening.close()
        self.loop.close()


@pytest.fixture
def served() -> Iterator[Served]:
    s = Served()
    yield s
    s.close()


def test_a_handed_over_socket_is_taken_and_served(served: Served) -> None:
    served.take()
    answer = served.ask(b"GET /metrics HTTP/1.1\r\nHost: r\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200")
    assert b"content-type: text/plain; version=0.0.4" in answer.lower()
    assert answer.endswith(b"hop_up 1\n")


def test_healthz_answers_ok_until_the_router_stops(served: Served) -> None:
    served.take()
    assert served.ask(b"GET /healthz HTTP/1.1\r\nHost: r\r\n\r\n").startswith(b"HTTP/1.1 200")
    served.loop.stop()
    answer = served.ask(b"GET /healthz HTTP/1.1\r\nHost: r\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 503") and answer.endswith(b"shutting down\n")


def test_an_unknown_path_is_not_found(served: Served) -> None:
    served.take()
    assert served.ask(b"GET /nothing HTTP/1.1\r\nHost: r\r\n\r\n").startswith(b"HTTP/1.1 404")


def _upgrade(extra: bytes = b"") -> bytes:
    key = base64.b64encode(b"0123456789abcdef")
    return (b"GET / HTTP/1.1\r\nHost: r\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Protocol: amqp\r\n\r\n" + extra)


def test_a_websocket_upgrade_goes_to_the_upgrades_with_what_followed_it() -> None:
    served = Served()
    try:
        served.take()
        served.client.sendall(_upgrade(b"AMQP"))
        for _ in range(10):
            served.loop.run_once(0.05)
            if served.upgrades.adopted:
                break
        [(listener, channel, trailing)] = served.upgrades.adopted
        assert listener is served.listener and trailing == b"AMQP"
        assert bytes(channel.out).startswith(b"HTTP/1.1 101"), "the answer the channel sends"
        assert not served.server.conns, "no longer the HTTP server's"
    finally:
        served.close()


def test_a_websocket_upgrade_policy_refuses_is_answered_503_with_the_reason() -> None:
    served = Served(FakeUpgrades(refusal="connection refused by policy: too many"))
    try:
        served.take()
        answer = served.ask(_upgrade())
        assert answer.startswith(b"HTTP/1.1 503")
        assert b"too many" in answer and not served.upgrades.adopted
    finally:
        served.close()


def test_a_connection_idle_for_a_minute_is_closed(served: Served) -> None:
    served.take()
    assert served.ask(b"GET /healthz HTTP/1.1\r\nHost: r\r\n\r\n").startswith(b"HTTP/1.1 200")
    served.clock.now += 61
    served.server.tick(served.clock.now)
    assert not served.server.conns
    served.client.settimeout(1.0)
    assert served.client.recv(100) == b"", "the router closed its end"
