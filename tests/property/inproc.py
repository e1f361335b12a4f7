"""In-process AMQP 1.0 clients wired to a real ``Engine`` over socket pairs.

Everything runs on the calling thread.  ``Harness.pump()`` writes what the
client transports have to say, gives the engine a turn (``run_once(0)``)
whenever its epoll has something ready -- as its own loop would -- reads
what the engine answered and hands every client event to the client's
``on_event`` callback, until nothing moves any more.  The engine's clock is
frozen, so no timer ever fires and a run is the same every time; a last,
forced turn then checks that the engine was not left holding work that only
a timer tick would have flushed.

Each client also keeps a :class:`WireLog` of the frames it exchanged, so a
test can count settlements on the wire rather than trust the client
library's view of them (proton folds a repeated settlement into the state
it already has).
"""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Callable
from typing import Any

from proton import Collector, Connection, Event, Session, Transport

import conf
from addressing import AddressTable
from router.adapter import Engine, Listener, listener_settings
from router.assembly import bind, build_engine
from router.core import Router

# Frames as proton's frame trace prints them, e.g.
#   0 -> @transfer(20) [handle=0x0, delivery-id=0x3, delivery-tag=b"p1-0", ...]
#   0 <- @disposition(21) [role=true, first=0x3, last=0x4, settled=true, state=@accepted(36) []]
_TRANSFER_OUT = re.compile(r'-> @transfer\(20\) \[handle=\w+, delivery-id=(\w+), '
                           r'delivery-tag=b"([^"\\]*)"')
_DISPOSITION_IN = re.compile(r"<- @disposition\(21\) \[(.*)\]")
_FIELD = re.compile(r"\b(role|first|last|settled)=(\w+)")

MAX_ROUNDS = 400


class WireLog:
    """Settlements the peer sent for the deliveries this client sent.

    Only tags made of printable characters other than quote and backslash
    are tracked (the tests choose their own tags that way).
    """

    def __init__(self) -> None:
        self.frames: list[str] = []
        self.tag_by_id: dict[int, str] = {}
        # tag -> number of ``settled=true`` dispositions received for it
        self.settlements: dict[str, int] = {}

    def trace(self, _transport: Any, line: str) -> None:
        self.frames.append(line)
        sent = _TRANSFER_OUT.search(line)
        if sent is not None:
            self.tag_by_id[int(sent.group(1), 0)] = sent.group(2)
            return
        disposition = _DISPOSITION_IN.search(line)
        if disposition is None:
            return
        fields: dict[str, str] = dict(_FIELD.findall(disposition.group(1)))
        # role=true: the peer is the receiver, so the range names our transfers.
        if fields.get("role") != "true" or fields.get("settled") != "true":
            return
        first = int(fields["first"], 0)
        last = int(fields.get("last", fields["first"]), 0)
        for delivery_id in range(first, last + 1):
            tag = self.tag_by_id.get(delivery_id)
            if tag is not None:
                self.settlements[tag] = self.settlements.get(tag, 0) + 1


class Client:
    """One proton client connection (with one session) on a socket pair."""

    def __init__(self, engine: Engine, listener: Listener, name: str) -> None:
        self.name = name
        mine, theirs = socket.socketpair()
        mine.setblocking(False)
        theirs.setblocking(False)
        engine.listeners.adopt(theirs, listener, "test")
        self.sock: socket.socket | None = mine
        self.wire = WireLog()
        self.transport = Transport()  # client mode, no SASL layer
        self.transport.trace(Transport.TRACE_FRM)
        self.transport.tracer = self.wire.trace
        self.connection = Connection()
        self.connection.container = name
        self.collector = Collector()
        self.connection.collect(self.collector)
        self.transport.bind(self.connection)
        self.connection.open()
        self.session: Session = self.connection.session()
        self.session.open()
        self.on_event: Callable[[Event], None] | None = None
        self.eof = False

    @property
    def alive(self) -> bool:
        return self.sock is not None

    def write(self) -> bool:
        """Send what the transport has pending; True if any byte moved."""
        sock = self.sock
        if sock is None:
            return False
        moved = False
        while True:
            pending = self.transport.pending()
            if pending <= 0:
                return moved
            try:
                sent = sock.send(self.transport.peek(pending))
            except BlockingIOError:
                return moved
            except OSError:
                self.transport.close_head()
                return True
            self.transport.pop(sent)
            moved = True

    def read(self) -> bool:
        """Feed what arrived to the transport; True if any byte moved."""
        sock = self.sock
        if sock is None or self.eof:
            return False
        moved = False
        while self.transport.capacity() > 0:
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                return moved
            except OSError:
                data = b""
            if not data:
                self.eof = True
                self.transport.close_tail()
                return True
            self.transport.push(data)
            moved = True
        return moved

    def dispatch(self) -> bool:
        """Hand every pending event to ``on_event``; True if there was one."""
        seen = False
        while True:
            event = self.collector.peek()
            if event is None:
                return seen
            seen = True
            if self.on_event is not None and self.sock is not None:
                self.on_event(event)
            self.collector.pop()

    def drop(self) -> None:
        """Vanish without an AMQP close: just close the socket."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self.on_event = None

    def close(self) -> None:
        self.drop()
        with contextlib.suppress(Exception):
            self.transport.unbind()


class Harness:
    """A router (``Router`` + ``Engine``) and the clients connected to it.

    Args:
        addresses: the configured addresses.
        link_capacity: the listener's linkCapacity.
        management: serve the management agent (its addresses are records too).
    """

    def __init__(self, *, addresses: AddressTable, link_capacity: int = 250,
                 management: bool = False) -> None:
        self.router = Router(router_id="Hop.test", addresses=addresses,
                             token=lambda: "0123456789abcde")
        settings = listener_settings(conf.ListenerSection(
            host="127.0.0.1", port="0", idle_timeout_seconds=0, link_capacity=link_capacity))
        self.engine = build_engine(core=self.router, router_id="Hop.test", clock=lambda: 1000.0,
                                   management=management, raise_internal_errors=True)
        [self.listener] = bind(self.engine, [settings])
        self.clients: list[Client] = []

    def connect(self, name: str) -> Client:
        client = Client(self.engine, self.listener, name)
        self.clients.append(client)
        return client

    def pump(self) -> None:
        """Run clients and engine until nothing moves, then check the engine
        really had nothing left to do.

        The engine gets a turn only when its epoll has something ready, as in
        ``Engine.run()`` (whose other wake-up, the timer tick, never comes with
        the clock frozen).  Once neither side moves, one more turn is forced:
        if that turn still produces output or events, the engine had gone to
        sleep on unfinished work that, running for real, would wait for the
        next tick (up to a second) -- an ``AssertionError``.
        """
        for _ in range(MAX_ROUNDS):
            if not self._round(forced=False):
                break
        else:
            raise AssertionError(f"no quiescence after {MAX_ROUNDS} rounds")
        seen = {client: len(client.wire.frames) for client in self.clients}
        if self._round(forced=True):
            late = [f"{client.name} {line.removeprefix('FRAME:').strip()}"
                    for client in self.clients for line in client.wire.frames[seen[client]:]
                    if " <- " in line]
            raise AssertionError(
                "the engine went idle (nothing to read or write) with work pending that "
                "only its next timer tick would have delivered: " + "; ".join(late))

    def _round(self, *, forced: bool) -> bool:
        """One round; True if a client moved or (unforced) the engine ran."""
        moved = False
        for client in self.clients:
            moved |= client.write()
        ran = forced or bool(self.engine.loop.epoll.poll(0))
        if ran:
            self.engine.run_once(0)
        for client in self.clients:
            moved |= client.read()
            moved |= client.dispatch()
        return moved or (ran and not forced)

    def close(self) -> None:
        """Close every client, the engine's connections and all its descriptors."""
        for client in self.clients:
            client.close()
        engine = self.engine
        engine.shutdown()
        engine.close()


__all__ = ["Client", "Harness", "WireLog"]
