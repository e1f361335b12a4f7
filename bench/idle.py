"""Opening many idle AMQP connections cheaply, for the memory scenario.

Each connection is a proton client transport driven by hand over a plain
socket until the router's OPEN arrives; then it just stays open.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import time
from collections.abc import Iterator

from proton import Connection, Endpoint, Transport


class _Idle:
    def __init__(self, port: int, n: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.transport = Transport()
        self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.connection = Connection()
        self.connection.container = f"idle-{n}"
        self.transport.bind(self.connection)
        self.connection.open()

    def flush(self) -> None:
        while self.transport.pending() > 0:
            data = self.transport.peek(self.transport.pending())
            self.sock.sendall(data)
            self.transport.pop(len(data))

    def read(self) -> None:
        data = self.sock.recv(65536)
        if data:
            self.transport.push(data)
        else:
            self.transport.close_tail()

    @property
    def open(self) -> bool:
        return bool(self.connection.state & Endpoint.REMOTE_ACTIVE)


@contextlib.contextmanager
def open_idle_connections(port: int, count: int, timeout: float = 60.0) -> Iterator[None]:
    """Open ``count`` AMQP connections to ``port`` and hold them while inside."""
    conns = []
    try:
        for i in range(count):
            conn = _Idle(port, i)
            conn.flush()
            conns.append(conn)
        deadline = time.monotonic() + timeout
        selector = selectors.DefaultSelector()
        for conn in conns:
            selector.register(conn.sock, selectors.EVENT_READ, conn)
        waiting = len(conns)
        while waiting:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{waiting} connections not opened")
            for key, _ in selector.select(1.0):
                conn = key.data
                conn.read()
                conn.flush()
                if conn.open:
                    selector.unregister(conn.sock)
                    waiting -= 1
        selector.close()
        yield
    finally:
        for conn in conns:
            conn.sock.close()
