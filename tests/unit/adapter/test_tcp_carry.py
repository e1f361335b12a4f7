"""router.adapter.tcp.carry: bytes both ways between two real loopback
sockets, half-close and reset passed on, and a slow side holding the other
back instead of the router buffering for it."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from collections.abc import Callable, Iterator

import pytest

from router.adapter.loop.eventloop import EventLoop
from router.adapter.tcp.carry import Carried


def _pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of one loopback TCP connection."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        near = socket.create_connection(server.getsockname())
        far, _ = server.accept()
    return near, far


class _Joined:
    """A client and a service joined by a ``Carried`` in a loop of their own:
    ``client`` and ``service`` are the outer ends the test plays."""

    def __init__(self) -> None:
        self.loop = EventLoop(time.monotonic)
        self.client, inner_client = _pair()
        inner_service, self.service = _pair()
        for sock in (inner_client, inner_service):
            sock.setblocking(False)
        self.moved = [0, 0]
        self.ended: list[str] = []

        def moved(up: int, down: int) -> None:
            self.moved[0] += up
            self.moved[1] += down

        self.carried = Carried(self.loop, inner_client, inner_service, moved,
                               self.ended.append)
        self.carried.start()

    def run_until(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "timed out"
            self.loop.run_once(0.01)

    def read(self, sock: socket.socket, n: int) -> bytes:
        """Read ``n`` bytes from an outer end, running the loop meanwhile."""
        sock.setblocking(False)
        got = bytearray()

        def more() -> bool:
            try:
                chunk = sock.recv(1 << 20)
            except BlockingIOError:
                return False
            if not chunk:
                raise AssertionError(f"end of stream after {len(got)} of {n} bytes")
            got.extend(chunk)
            return len(got) >= n

        self.run_until(more)
        return bytes(got)

    def close(self) -> None:
        self.carried.abort()
        self.client.close()
        self.service.close()
        self.loop.close()


@pytest.fixture
def joined() -> Iterator[_Joined]:
    j = _Joined()
    yield j
    j.close()


def test_bytes_go_both_ways_unchanged(joined: _Joined) -> None:
    request = os.urandom(300_000)
    joined.client.sendall(request)
    assert joined.read(joined.service, len(request)) == request
    answer = os.urandom(5_000_000)
    joined.service.setblocking(False)
    sent = 0
    got = bytearray()
    joined.client.setblocking(False)

    def progress() -> bool:
        nonlocal sent
        if sent < len(answer):
            with contextlib.suppress(BlockingIOError):
                sent += joined.service.send(answer[sent:sent + 65536])
        with contextlib.suppress(BlockingIOError):
            got.extend(joined.client.recv(1 << 20))
        return len(got) == len(answer)

    joined.run_until(progress)
    assert bytes(got) == answer
    assert joined.moved == [len(request), len(answer)]
    assert not joined.ended


def test_a_half_close_is_passed_on_and_the_other_way_goes_on(joined: _Joined) -> None:
    joined.client.sendall(b"request")
    joined.client.shutdown(socket.SHUT_WR)
    assert joined.read(joined.service, 7) == b"request"

    def service_sees_end() -> bool:
        try:
            return joined.service.recv(10) == b""
        except BlockingIOError:
            return False

    joined.run_until(service_sees_end)
    # The service still answers after the client's end, then ends its own.
    joined.service.sendall(b"answer")
    assert joined.read(joined.client, 6) == b"answer"
    joined.service.shutdown(socket.SHUT_WR)
    joined.run_until(lambda: joined.ended == ["closed"])
    joined.client.setblocking(True)
    assert joined.client.recv(10) == b""


def test_a_reset_is_passed_on_as_a_reset(joined: _Joined) -> None:
    joined.client.sendall(b"x")
    assert joined.read(joined.service, 1) == b"x"
    joined.service.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    joined.service.close()
    joined.run_until(lambda: bool(joined.ended))
    assert joined.ended == ["service reset"]
    joined.client.setblocking(True)
    joined.client.settimeout(5)
    with pytest.raises(ConnectionResetError):
        joined.client.recv(10)


def test_a_service_that_does_not_read_holds_the_client_back(joined: _Joined) -> None:
    """What the router holds for a stalled side is its pipe, not what the
    client offers: the client's sends block once the kernel's buffers and
    the pipe are full."""
    joined.client.setblocking(False)
    chunk = b"\0" * 65536
    offered = 0
    idle = 0
    while idle < 50:
        try:
            offered += joined.client.send(chunk)
            idle = 0
        except BlockingIOError:
            idle += 1
        joined.loop.run_once(0.001)
    held = joined.carried.up.buffered
    assert 0 < held <= joined.carried.up.capacity
    # Kernel buffers on both legs and the pipe, and nothing more: far less
    # than what an unbounded router would have taken (the client would
    # still be sending).
    assert offered < 64 << 20
    # The service reads: everything arrives, in order.
    got = joined.read(joined.service, offered)
    assert got == b"\0" * offered
