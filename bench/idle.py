"""Opening many idle AMQP connections cheaply, for the memory scenarios, and
probing a router for readiness.

Each connection is a proton client transport driven by hand over a plain
socket until the router's OPEN arrives; then only the socket is kept (the
proton objects are dropped, so the bench's own memory stays small), and the
connection just stays open.  With a ``consumer`` address each connection
also attaches a receiving link from it and grants ``credit``, in the same
write as its OPEN, and then reads nothing more: a stalled consumer, whose
deliveries the router must hold unsettled.  Connections are opened a window at a time so
that the router's listen backlog never overflows (an overflowing backlog
drops SYNs, and the client then waits a second or more to retry).
"""

from __future__ import annotations

import contextlib
import select
import selectors
import socket
import time
from collections.abc import Iterator
from typing import Any

from proton import Connection, Endpoint, Message, Transport

# Connections in the middle of their handshake at once: below both programs'
# listen backlogs (hopd's 128; qdrouterd's proactor default is smaller).
WINDOW = 32


class _Client:
    """A proton client connection over a blocking-free socket, pumped by hand."""

    def __init__(self, port: int, n: int, consumer: str | None = None, credit: int = 0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.transport = Transport()
        self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.connection = Connection()
        self.connection.container = f"idle-{n}"
        self.transport.bind(self.connection)
        self.connection.open()
        if consumer is not None:
            session = self.connection.session()
            session.open()
            link = session.receiver(f"stalled-{n}")
            link.source.address = consumer
            link.target.address = consumer
            link.open()
            link.flow(credit)

    def flush(self) -> None:
        while self.transport.pending() > 0:
            data = self.transport.peek(self.transport.pending())
            self.sock.sendall(data)
            self.transport.pop(len(data))

    def read(self) -> None:
        # No more than the transport takes at once.
        data = self.sock.recv(max(1, min(65536, self.transport.capacity())))
        if data:
            self.transport.push(data)
        else:
            self.transport.close_tail()
            raise RuntimeError("the router closed a connection")

    @property
    def open(self) -> bool:
        return bool(self.connection.state & Endpoint.REMOTE_ACTIVE)


@contextlib.contextmanager
def open_idle_connections(port: int, count: int, timeout: float = 120.0,
                          consumer: str | None = None, credit: int = 0) -> Iterator[None]:
    """Open ``count`` AMQP connections to ``port`` and hold them while inside
    (each with a stalled consumer of ``consumer`` granting ``credit``, when given)."""
    socks: list[socket.socket] = []
    selector = selectors.DefaultSelector()
    pending = held = 0
    try:
        deadline = time.monotonic() + timeout
        while held < count:
            while pending < WINDOW and len(socks) < count:
                conn = _Client(port, len(socks), consumer, credit)
                socks.append(conn.sock)
                conn.flush()
                selector.register(conn.sock, selectors.EVENT_READ, conn)
                pending += 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count - held} of {count} connections not opened")
            for key, _ in selector.select(1.0):
                conn = key.data
                conn.read()
                conn.flush()
                if conn.open:  # from now on only the socket is kept
                    selector.unregister(conn.sock)
                    pending -= 1
                    held += 1
        selector.close()
        yield
    finally:
        selector.close()
        for sock in socks:
            sock.close()


# A router lends a producer's link this many unsettled deliveries at most.
LINK_WINDOW = 250


@contextlib.contextmanager
def send_unsettled(port: int, address: str, count: int, size: int = 100,
                   timeout: float = 120.0) -> Iterator[int]:
    """Send ``count`` unsettled messages of ``size`` bytes to ``address`` as
    credit comes, on as many links as the routers' credit window asks for (a
    router holds a link's credit back while its deliveries are unsettled),
    keep the connection open while inside (the router holds what its
    consumers did not settle), and yield how many were sent."""
    conn = _Client(port, 0)
    try:
        session = conn.connection.session()
        session.open()
        links = []
        for k in range(-(-count // LINK_WINDOW)):
            link = session.sender(f"stalled-producer-{k}")
            link.source.address = address
            link.target.address = address
            link.open()
            links.append(link)
        body = Message(body=b"x" * size).encode()
        conn.flush()
        sent = 0
        deadline = time.monotonic() + timeout
        while sent < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"credit for {sent} of {count} messages only")
            for link in links:
                while link.credit > 0 and sent < count:
                    link.delivery(str(sent).encode())
                    link.send(body)
                    link.advance()
                    sent += 1
            conn.flush()
            if select.select([conn.sock], [], [], 0.2)[0]:
                conn.read()
        conn.flush()
        yield sent
    finally:
        conn.sock.close()


class Receivers:
    """Receiving links attached by ``attach_receivers``: ``close`` detaches
    them all (their connections stay open) and waits for the router's
    answers."""

    def __init__(self, clients: list[tuple[_Client, list[Any]]], timeout: float) -> None:
        self.clients = clients
        self.timeout = timeout

    def close(self) -> None:
        for conn, links in self.clients:
            for link in links:
                link.close()
            conn.flush()
        _pump_until(self.clients, lambda link: bool(link.state & Endpoint.REMOTE_CLOSED),
                    self.timeout, "detached")


def _pump_until(clients: list[tuple[_Client, list[Any]]], done: Any, timeout: float,
                what: str) -> None:
    deadline = time.monotonic() + timeout
    waiting = {conn.sock: (conn, links) for conn, links in clients}
    while waiting:
        if time.monotonic() > deadline:
            left = sum(1 for _, links in waiting.values() for link in links if not done(link))
            raise RuntimeError(f"{left} links not {what} in {timeout:.0f} s")
        for sock in select.select(list(waiting), [], [], 1.0)[0]:
            conn, links = waiting[sock]
            conn.read()
            conn.flush()
            if all(done(link) for link in links):
                del waiting[sock]


@contextlib.contextmanager
def attach_receivers(port: int, count: int, per_connection: int, prefix: str,
                     timeout: float = 600.0) -> Iterator[Receivers]:
    """Attach ``count`` receiving links, each from its own address
    ``prefix/N``, ``per_connection`` of them on each connection (one session
    each), granting no credit; yield once the router has answered every
    attach, and hold the connections open while inside."""
    clients: list[tuple[_Client, list[Any]]] = []
    try:
        for c in range(-(-count // per_connection)):
            conn = _Client(port, c)
            session = conn.connection.session()
            session.open()
            links = []
            for n in range(c * per_connection, min(count, (c + 1) * per_connection)):
                link = session.receiver(f"{prefix}-{n}")
                link.source.address = f"{prefix}/{n}"
                link.target.address = f"{prefix}/{n}"
                link.open()
                links.append(link)
            conn.flush()
            clients.append((conn, links))
        _pump_until(clients, lambda link: bool(link.state & Endpoint.REMOTE_ACTIVE),
                    timeout, "attached")
        yield Receivers(clients, timeout)
    finally:
        for conn, _ in clients:
            conn.sock.close()


def wait_ready(port: int, timeout: float = 60.0) -> None:
    """Return once the router on ``port`` answers a receiving link's attach:
    it has opened the connection and its routing core has taken the link, so
    it has worked through whatever it queued at start-up."""
    deadline = time.monotonic() + timeout
    conn = _Client(port, 0)
    try:
        session = conn.connection.session()
        session.open()
        link = session.receiver("bench-ready")
        link.source.address = "bench.ready"
        link.target.address = "bench.ready"
        link.open()
        conn.flush()
        conn.sock.settimeout(1.0)
        while not link.state & Endpoint.REMOTE_ACTIVE:
            if time.monotonic() > deadline:
                raise RuntimeError("the router did not answer an attach")
            with contextlib.suppress(TimeoutError):
                conn.read()
            conn.flush()
    finally:
        conn.sock.close()
