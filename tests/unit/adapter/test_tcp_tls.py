"""router.adapter.tcp.tls: a TLS connection relayed to a plaintext socket
pair in a loop of its own: bytes both ways, ends of stream passed on as
close_notify and back, and a side that does not read holding the other
back at ``HELD_BYTES`` instead of the relay buffering for it."""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from collections.abc import Callable

import pytest

from router.adapter.loop.eventloop import EventLoop
from router.adapter.tcp.tls import HELD_BYTES, TlsRelay
from tests.system.certs import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _server_context(pki: Pki) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    return context


class _Relayed:
    """A TLS client (a thread of the test's) to a relay in the test's loop;
    ``plain`` is the relay's plaintext end, which the test plays."""

    def __init__(self, pki: Pki) -> None:
        self.loop = EventLoop(time.monotonic)
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen(1)
            self.raw = socket.create_connection(server.getsockname())
            inner, _ = server.accept()
        inner.setblocking(False)
        self.failed: list[str] = []
        self.handshakes = 0

        def handshaken() -> None:
            self.handshakes += 1

        self.relay = TlsRelay(self.loop, inner, _server_context(pki), server_side=True,
                              on_failed=self.failed.append, on_handshake=handshaken)
        self.plain = self.relay.plain
        client = ssl.create_default_context(cafile=str(pki.ca))
        self.tls: ssl.SSLSocket | None = None
        self._client = client

    def connect(self) -> None:
        done = threading.Event()

        def handshake() -> None:
            self.tls = self._client.wrap_socket(self.raw, server_hostname="localhost")
            done.set()

        thread = threading.Thread(target=handshake)
        thread.start()
        self.run_until(done.is_set)
        thread.join(5)
        # TLS 1.3: the server's side is done once the client's Finished is in.
        self.run_until(lambda: self.handshakes == 1)

    def run_until(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "timed out"
            self.loop.run_once(0.01)

    def read_plain(self, n: int) -> bytes:
        got = bytearray()

        def enough() -> bool:
            try:
                while len(got) < n:
                    chunk = self.plain.recv(1 << 16)
                    if not chunk:
                        return True
                    got.extend(chunk)
            except BlockingIOError:
                pass
            return len(got) >= n

        self.run_until(enough)
        return bytes(got)


def test_bytes_cross_both_ways_and_each_end_of_stream_is_passed_on(pki: Pki) -> None:
    relayed = _Relayed(pki)
    relayed.connect()
    assert relayed.handshakes == 1
    tls = relayed.tls
    assert tls is not None
    payload = os.urandom(300_000)
    sender = threading.Thread(target=tls.sendall, args=(payload,))
    sender.start()
    assert relayed.read_plain(len(payload)) == payload
    sender.join(5)
    # The plaintext side's answer, then its end: the client reads both,
    # the end as the relay's close_notify.
    relayed.plain.sendall(b"answer")
    relayed.plain.shutdown(socket.SHUT_WR)
    got = bytearray()
    done = threading.Event()

    def read() -> None:
        while chunk := tls.recv(1 << 16):
            got.extend(chunk)
        done.set()

    reader = threading.Thread(target=read)
    reader.start()
    relayed.run_until(done.is_set)
    assert bytes(got) == b"answer"
    # The client's close_notify ends the plaintext stream.
    closer = threading.Thread(target=lambda: tls.unwrap())
    closer.start()
    assert relayed.read_plain(1) == b""
    relayed.run_until(lambda: relayed.relay.over)
    closer.join(5)
    assert relayed.failed == []


def test_a_plaintext_side_that_does_not_read_holds_the_tls_peer_back(pki: Pki) -> None:
    relayed = _Relayed(pki)
    relayed.connect()
    tls = relayed.tls
    assert tls is not None
    tls.settimeout(0.05)
    sent = 0
    chunk = os.urandom(1 << 16)

    def pump() -> None:
        nonlocal sent
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                sent += tls.send(chunk)
            except (TimeoutError, ssl.SSLWantWriteError):
                return

    # Nobody reads ``plain``: the relay fills the socket pair, then holds
    # at most HELD_BYTES, then stops reading the TLS side.
    def round_of_writing() -> None:
        writer = threading.Thread(target=pump)
        writer.start()
        while writer.is_alive():
            relayed.loop.run_once(0.01)
        writer.join()

    for _ in range(100):
        round_of_writing()
        if len(relayed.relay.to_plain) >= HELD_BYTES:
            break
    round_of_writing()  # held: the relay reads no more of the TLS side
    held = len(relayed.relay.to_plain)
    assert HELD_BYTES <= held < HELD_BYTES + (1 << 17)
    assert sent < 64 << 20  # the client was held back, not buffered for
    # Reading the plaintext side lets everything through, whole.
    got = relayed.read_plain(sent)
    assert len(got) == sent
    assert got == (chunk * (sent // len(chunk) + 1))[:sent]


def test_a_client_that_is_not_tls_fails_the_handshake(pki: Pki) -> None:
    relayed = _Relayed(pki)
    relayed.raw.sendall(b"GET / HTTP/1.0\r\n\r\n")
    relayed.run_until(lambda: relayed.relay.over)
    assert relayed.failed and "handshake failed" in relayed.failed[0]
    assert relayed.handshakes == 0
    relayed.raw.close()
