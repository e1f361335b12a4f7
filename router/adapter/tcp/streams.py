"""TCP connections carried across the router network as streamed messages
(docs/tcp.md#across-the-network), in qdrouterd 1.18's format.

Owns, per carried connection, the AMQP side of the bridge: a client of
this router's own (a proton engine over one end of a socket pair, the
router serving the other end as an ordinary connection), the links it
attaches and the two streams, one each way.  A listener's client whose
address has no connector on this router becomes a stream to the address
(``ClientStream``); each ``tcpConnector`` consumes its address
(``ConnectorConsumer``) and opens a connection to its service for each
stream it takes (``ServiceStream``).  The router routes these streams like
any message, so the network's addresses, balancing and failover apply.

The format's rules that touch no socket are ``router.core.tcpstream``'s;
which bridge a connection counts against is ``router.core.tcp``'s.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import select
import socket
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from proton import (
    Collector,
    Connection,
    Delivery,
    Disposition,
    Endpoint,
    Event,
    Link,
    Transport,
)

from router.adapter.connections.dialing import dial, family_of, is_address, resolve
from router.adapter.loop.eventloop import READ, WRITE, EventLoop
from router.adapter.tcp.carry import reset
from router.core.tcp import REFUSED_HOLDOFF_S, TcpBridge, TcpConnection, TcpServices
from router.core.tcpstream import (
    ReadWindow,
    StreamFormatError,
    StreamReader,
    connection_id,
    data_head,
    stream_head,
)

__all__ = ["Attach", "ClientStream", "ConnectorConsumer", "Streams"]

log = logging.getLogger(__name__)

#: Hands the router one end of a socket pair to serve as an AMQP connection.
Attach = Callable[[socket.socket], None]
#: Bytes read from a TCP socket at a time.
READ_BYTES: Final = 65536
_HEAD: Final = len(data_head(0))
#: Buffers passed to one ``sendmsg``.
_GATHER: Final = 32
#: The side writing a stream out reports its progress (``received``) each
#: time this many more bytes are written: far below the read window, so the
#: far side never waits for a report.
REPORT_BYTES: Final = 262144
#: A client stops reading its TCP socket while this much AMQP output waits
#: for the router to take it.
BACKLOG_BYTES: Final = 1 << 20
#: Credit each connector's consumer keeps on its address.
CONSUMER_CREDIT: Final = 32
#: A stream released before it reached a service is offered again (to
#: another connector, or once a router on the way has learnt the address),
#: ``RETRY_S`` times the attempts so far after its release, at most
#: ``RETRY_MAX_S``, for ``RETRY_FOR_S`` in all.
RETRY_S: Final = 0.1
RETRY_MAX_S: Final = 1.0
RETRY_FOR_S: Final = 10.0
#: A connection whose both directions are over keeps its AMQP connection
#: until the far side settles the stream it sent (every byte written out
#: there), for at most this long.
LINGER_S: Final = 10.0
#: A reset service's stream back that had not started is started and
#: aborted this long after (see ``ServiceStream.reset``).
ABORT_AFTER_S: Final = 0.05
#: Idle links each connector keeps on its address, each with credit 1.
IDLE_LINKS: Final = 4
_TERMINAL: Final = frozenset((Disposition.ACCEPTED, Disposition.REJECTED,
                              Disposition.RELEASED, Disposition.MODIFIED))
_HUP: Final = select.EPOLLHUP | select.EPOLLERR
_HELD_MASK: Final = select.EPOLLRDHUP
_RESET_ERRORS: Final = (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


#: ``relay(bridge, sock, ready, failed)``: see ``Streams.relay``.
Relay = Callable[[TcpBridge, socket.socket, Callable[[socket.socket], None],
                  Callable[[str], None]], None]


def _plain(_bridge: TcpBridge, sock: socket.socket, ready: Callable[[socket.socket], None],
           _failed: Callable[[str], None]) -> None:
    ready(sock)


class AmqpClient:
    """A proton engine client of this router, over one end of a socket pair.

    ``handler`` is called with each endpoint event; ``pump`` runs them and
    writes what the engine has to send.  ``close`` ends the connection once
    its last frames are out.
    """

    def __init__(self, loop: EventLoop, attach: Attach, container: str,
                 handler: Callable[[Event], None]) -> None:
        mine, theirs = socket.socketpair()
        mine.setblocking(False)
        theirs.setblocking(False)
        self.loop = loop
        self.sock = mine
        self.fd = mine.fileno()
        self.handler = handler
        self.connection = Connection()
        self.connection.container = container
        self.transport = Transport()
        self.transport.max_frame_size = 65536
        self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.transport.bind(self.connection)
        self.collector = Collector()
        self.connection.collect(self.collector)
        self.connection.open()
        self.session = self.connection.session()
        self.session.open()
        self.closing = False
        self.done = False
        self._pumping = False
        self._again = False
        self._mask = READ
        #: Called when a handler raised (set by the owner).
        self.on_failure: Callable[[], None] = self.close
        loop.add(self.fd, READ, self._ready)
        attach(theirs)

    @property
    def backlog(self) -> int:
        return max(0, int(self.transport.pending()))

    def _ready(self, _fd: int, mask: int) -> None:
        if self.done:
            return
        if mask & (READ | _HUP):
            transport = self.transport
            while True:
                capacity = transport.capacity()
                if capacity <= 0:
                    break
                try:
                    data = self.sock.recv(min(capacity, 262144))
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    data = b""
                if not data:
                    transport.close_tail()
                    break
                transport.push(data)
        self.pump()

    def pump(self) -> None:
        """Run the events waiting and write the engine's output."""
        if self._pumping:
            self._again = True
            return
        self._pumping = True
        try:
            while True:
                self._again = False
                collector = self.collector
                while (event := collector.peek()) is not None:
                    try:
                        self.handler(event)
                    except Exception:
                        # One connection's fault: it ends, the router serves on.
                        log.exception("TCP bridge: event %s failed", event.type)
                        self.failed()
                    finally:
                        _free_if_over(event)
                        collector.pop()
                self._flush()
                if not self._again:
                    break
        finally:
            self._pumping = False

    def _flush(self) -> None:
        if self.done:
            return
        transport = self.transport
        want_write = False
        while True:
            pending = transport.pending()
            if pending < 0:
                if self.closing or transport.closed:
                    self._finish()
                    return
                break
            if pending == 0:
                break
            try:
                sent = self.sock.send(transport.peek(min(pending, 262144)))
            except (BlockingIOError, InterruptedError):
                want_write = True
                break
            except OSError:
                transport.close_head()
                transport.close_tail()
                self._finish()
                return
            transport.pop(sent)
        if transport.capacity() < 0 and transport.pending() <= 0:
            self._finish()
            return
        mask = READ | WRITE if want_write else READ
        if mask != self._mask:
            self._mask = mask
            self.loop.modify(self.fd, mask)

    def failed(self) -> None:
        """A handler failed: what this connection carries is reset."""
        self.on_failure()

    def close(self) -> None:
        """End the connection: its last frames go out, then the socket closes."""
        if self.closing or self.done:
            return
        self.closing = True
        self.connection.close()
        self.pump()

    def abort(self) -> None:
        """Drop the connection at once (the router is ending)."""
        self._finish()

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        with contextlib.suppress(OSError, ValueError, KeyError):
            self.loop.remove(self.fd)
        self.sock.close()


_CLOSED_BOTH: Final = Endpoint.LOCAL_CLOSED | Endpoint.REMOTE_CLOSED
_LINK_CLOSES: Final = (Event.LINK_LOCAL_CLOSE, Event.LINK_REMOTE_CLOSE)


def _free_if_over(event: Event) -> None:
    """A link of a bridge's own connection that both sides closed is freed:
    proton keeps every link of a connection until it is freed, and a
    connector's connection lives as long as the connector and takes a link
    a stream (docs/reliability.md#what-grows).  The wrapper the handler may
    still hold keeps a reference, so the memory goes once it goes too."""
    if event.type in _LINK_CLOSES:
        link = event.link
        if link is not None and link.state & _CLOSED_BOTH == _CLOSED_BOTH:
            link.free()


def _received(delivery: Delivery, written: int) -> None:
    """Report ``written`` bytes of ``delivery``'s stream written out
    (AMQP 1.0 section 3.4.1)."""
    local = delivery.local
    local.section_number = 0
    local.section_offset = written
    delivery.update(Disposition.RECEIVED)


class _Carrier:
    """One TCP socket and the two streams that carry it: what is read from
    the socket goes out in ``out`` (a delivery of ``sender``), what
    ``incoming`` brings is written to the socket."""

    kind = ""
    #: Whether a hang-up before this side's stream started is kept until it
    #: starts (what the peer sent waits in the socket) rather than a reset.
    keeps_hangup = False

    def __init__(self, streams: Streams, conn: TcpConnection) -> None:
        self.streams = streams
        self.loop = streams.loop
        self.conn = conn
        self.tcp: socket.socket | None = None
        self._mask = 0
        self.own: AmqpClient | None = None
        self.sender: Link | None = None
        self.out: Delivery | None = None
        self.window = ReadWindow()
        self.read_eof = False
        self.advanced = False
        #: The stream being written out, the client its link is on.
        self.incoming: Delivery | None = None
        self.in_link: Link | None = None
        self.in_client: AmqpClient | None = None
        self.reader = StreamReader()
        #: What is still to be written to the socket, and its length.
        self.wq: deque[memoryview] = deque()
        self.wlen = 0
        self.written = 0
        self.reported = 0
        self.in_complete = False
        self.in_done = False
        self.over = False
        self.rdhup = False
        self.hup = False
        self._registered = False
        self.lingering = False
        self.out_settled = False

    # -- the TCP socket ------------------------------------------------------------------

    def _watch(self) -> None:
        tcp = self.tcp
        if tcp is None or self.over:
            return
        mask = 0
        if self.out is not None and not self.read_eof and self._may_read():
            mask |= READ
        if self.wlen:
            mask |= WRITE
        if self.out is None and not self.read_eof and not self.rdhup:
            mask |= _HELD_MASK
        fd = tcp.fileno()
        if self.hup and not mask & (READ | WRITE):
            # A hang-up is reported whatever the mask: not watched while
            # there is nothing to do (the window is full, say).
            if self._registered:
                self.loop.remove(fd)
                self._registered = False
            return
        if not self._registered:
            self.loop.add(fd, mask, self._tcp_ready)
            self._registered = True
            self._mask = mask
        elif mask != self._mask:
            self._mask = mask
            self.loop.modify(fd, mask)

    def _unwatch(self) -> None:
        if self._registered and self.tcp is not None:
            self._registered = False
            with contextlib.suppress(OSError, ValueError, KeyError):
                self.loop.remove(self.tcp.fileno())

    def _may_read(self) -> bool:
        own = self.own
        room = self.window.room
        return (room is None or room > 0) and (own is None or own.backlog < BACKLOG_BYTES)

    def _tcp_ready(self, _fd: int, mask: int) -> None:
        if self.over:
            return
        try:
            self._socket_ready(mask)
        finally:
            # What the socket's bytes made (transfers, an end of stream,
            # dispositions) goes out now, also when the connection just ended.
            for client in {self.own, self.in_client}:
                if client is not None:
                    client.pump()

    def _socket_ready(self, mask: int) -> None:
        if mask & WRITE:
            self._write()
        if not self.over and mask & READ and self.out is not None and not self.read_eof:
            self._read()
        if self.over:
            return
        if mask & select.EPOLLERR or (mask & _HUP and self.out is None
                                      and not self.keeps_hangup):
            if self.out is None:
                self._abandoned()
            else:
                self.reset("the connection was reset")
            return
        if mask & _HUP:
            # Both ways shut (its end read or to come, this side's written):
            # what it sent is still read, as the window allows.
            self.hup = True
        if self.out is None and mask & select.EPOLLRDHUP:
            # It ended its stream before a stream carried it: it may still
            # want an answer, so it is watched for a hang-up alone.
            self.rdhup = True
        self._watch()

    def _abandoned(self) -> None:
        """The peer hung up before any stream carried it."""
        self.reset("closed before it was carried")

    def _read(self) -> None:
        tcp, sender, out = self.tcp, self.sender, self.out
        assert tcp is not None and sender is not None and out is not None
        # Read behind room for the data section's head, so that head and
        # bytes go to proton, which copies them, in one call from one buffer.
        view = self.streams.view
        body = view[_HEAD:]
        got = 0
        while not self.read_eof and self._may_read():
            room = self.window.room
            size = READ_BYTES if room is None else min(room, READ_BYTES)
            try:
                n = tcp.recv_into(body, size)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self.reset(f"reading failed: {exc.strerror or exc}")
                return
            if n == 0:
                self.read_eof = True
                break
            view[:_HEAD] = data_head(n)
            sender.stream(view[:_HEAD + n])
            self.window.took(n)
            self.took(body[:n])
            got += n
            if n < size:
                break
        if got:
            self.moved(got)
        if self.read_eof:
            self._end_out()

    def took(self, chunk: memoryview) -> None:
        """``chunk`` (the shared read buffer's: copy to keep) was read from
        the socket into the stream."""

    def moved(self, count: int) -> None:
        """``count`` bytes were read from the socket."""

    def _end_out(self) -> None:
        if self.out is not None and not self.advanced and self.sender is not None:
            self.sender.advance()
            self.advanced = True
        self._check_done()

    def _write(self) -> None:
        tcp = self.tcp
        if tcp is None:
            return
        total = 0
        queue = self.wq
        while queue:
            parts = list(itertools.islice(queue, _GATHER))
            try:
                n = tcp.sendmsg(parts)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self.reset(f"writing failed: {exc.strerror or exc}")
                return
            total += n
            self.wlen -= n
            whole = n == sum(len(part) for part in parts)
            while n:
                first = queue[0]
                if len(first) <= n:
                    n -= len(first)
                    queue.popleft()
                else:
                    queue[0] = first[n:]
                    n = 0
            if not whole:
                break
        if total:
            self.written += total
            self.wrote(total)
        self._report()

    def wrote(self, count: int) -> None:
        """``count`` bytes were written to the socket."""

    def _report(self) -> None:
        incoming = self.incoming
        if incoming is None or self.in_done or self.over:
            return
        if self.written - self.reported >= REPORT_BYTES:
            self.reported = self.written
            _received(incoming, self.written)
        if self.in_complete and not self.wlen and self.tcp is not None:
            with contextlib.suppress(OSError):
                self.tcp.shutdown(socket.SHUT_WR)
            incoming.update(Disposition.ACCEPTED)
            incoming.settle()
            self.in_done = True
            self._check_done()

    # -- the streams ---------------------------------------------------------------------

    def in_delivery(self, delivery: Delivery) -> None:
        """More of the stream being written out arrived."""
        if self.over:
            delivery.update(Disposition.REJECTED)
            delivery.settle()
            return
        if delivery.aborted:
            self.reset("the far side reset the connection")
            return
        link = delivery.link
        chunks: list[Any] = []
        try:
            while delivery.pending:
                data = link.recv(delivery.pending)
                if not data:
                    break
                chunks.extend(self.reader.feed(data))
        except StreamFormatError as exc:
            self.reset(f"the stream is not one: {exc}")
            return
        queue = self.wq
        for chunk in chunks:
            if chunk:
                queue.append(memoryview(chunk))
                self.wlen += len(chunk)
        if not delivery.partial:
            self.in_complete = True
        if self.tcp is not None:
            self._write()
            self._watch()

    def out_updated(self, delivery: Delivery) -> None:
        """The far side reported on the stream this side sends."""
        state = delivery.remote_state
        if state == Disposition.RECEIVED:
            if self.window.reported(delivery.remote.section_offset):
                self._watch()
                if self.tcp is not None and self._mask & READ:
                    self._read()
            return
        if state == Disposition.ACCEPTED:
            self.window.open_ended = True
            self._watch()
            return
        if state in (Disposition.RELEASED, Disposition.MODIFIED):
            if self.advanced and self.taken:
                # Every byte went out and the far side had taken the stream:
                # qdrouterd 1.18 releases a stream it served once its TCP
                # connection ends.  Nothing is lost; the other direction
                # finishes as it will.
                self._settle_out()
                self.window.open_ended = True
                self._check_done()
                return
            self.released(delivery)
        elif state == Disposition.REJECTED:
            self.reset("the far side reset the connection")

    @property
    def taken(self) -> bool:
        """Whether the far side had taken the stream this side sends."""
        return True

    def released(self, delivery: Delivery) -> None:
        self.reset("the far side released the stream")

    def _check_done(self) -> None:
        if self.over or not (self.advanced and self.in_done):
            return
        self.finish("closed")

    def finish(self, how: str) -> None:
        """Both directions are over."""
        if self.over:
            return
        self.over = True
        out = self.out
        self.lingering = out is not None and not out.settled
        if self.tcp is not None:
            self._unwatch()
            self.tcp.close()
        self._end(how)

    def reset(self, why: str) -> None:
        """One side failed: the other is reset."""
        if self.over:
            return
        self.over = True
        if self.out is not None:
            if not self.advanced and not self.out_settled:
                self.out_settled = True  # an abort settles it (AMQP 1.0 section 2.6.12)
                self.out.abort()
            self._settle_out()
        if self.incoming is not None and not self.in_done:
            self.in_done = True
            self.incoming.update(Disposition.REJECTED)
            self.incoming.settle()
        if self.tcp is not None:
            self._unwatch()
            reset(self.tcp)
        self._end(f"reset ({why})")

    def _end(self, how: str) -> None:
        conn = self.conn
        self.streams.ended(self)
        log.info("[T%d] TCP %s stream %s %s: %d bytes in, %d out", conn.id, self.kind,
                 conn.peer, how, conn.bytes_in, conn.bytes_out)
        if self.lingering:
            self.streams.linger(self, self.loop.clock() + LINGER_S)
        elif self.own is not None:
            self.own.close()
        if self.in_client is not None and self.in_client is not self.own:
            self.in_client.pump()

    def _failed(self) -> None:
        self.reset("an internal error (logged)")
        self.let_go()
        if self.own is not None:
            self.own.close()

    def _settle_out(self) -> None:
        """Settle the stream this side sent, once (``Delivery.settled`` is
        the far side's settlement)."""
        if self.out is not None and not self.out_settled:
            self.out_settled = True
            self.out.settle()

    def after(self, event: Event) -> None:
        """An event once the connection is over: the far side settling the
        stream this side sent lets the AMQP connection go."""
        if not self.lingering:
            return
        kind = event.type
        if kind == Event.DELIVERY:
            out = self.out
            if out is not None and event.delivery == out and (
                    out.settled or out.remote_state in _TERMINAL):
                self.let_go()
        elif kind in (Event.LINK_REMOTE_CLOSE, Event.CONNECTION_REMOTE_CLOSE,
                      Event.TRANSPORT_CLOSED):
            self.let_go()

    def let_go(self) -> None:
        """Close the AMQP connection kept for the far side's settlement."""
        if not self.lingering:
            return
        self.lingering = False
        self.streams.lingering.pop(self, None)
        self._settle_out()
        if self.own is not None:
            self.own.close()


class ClientStream(_Carrier):
    """A listener's client carried to a connector on another router: a
    stream to the address, and the answer's stream back (its reply
    address is a dynamic one)."""

    kind = "client"

    def __init__(self, streams: Streams, conn: TcpConnection, client: socket.socket,
                 site_id: str | None) -> None:
        super().__init__(streams, conn)
        self.tcp = client
        self.subject = connection_id(conn.peer, site_id)
        self.reply_to: str | None = None
        self.attempts = 0
        self.reached = False
        #: Bytes read while no service has taken any: sent again if the
        #: stream is released (another connector may take it).
        self.replay = bytearray()
        n = conn.id
        self.own = own = AmqpClient(self.loop, streams.attach, f"tcp-{n}", self._event)
        own.on_failure = self._failed
        receiver = own.session.receiver(f"tcp-{n}-reply")
        receiver.source.dynamic = True
        receiver.open()
        receiver.flow(1)
        self.receiver = receiver
        sender = own.session.sender(f"tcp-{n}")
        sender.target.address = conn.address
        sender.open()
        self.sender = sender
        self._watch()
        own.pump()

    @property
    def started(self) -> bool:
        """Whether a stream went out (the router found a consumer)."""
        return self.out is not None or self.attempts > 0

    def _event(self, event: Event) -> None:
        kind = event.type
        if self.over:
            self.after(event)
            return
        if kind == Event.LINK_REMOTE_OPEN and event.link == self.receiver:
            self.reply_to = self.receiver.remote_source.address
            self.start()
        elif kind == Event.LINK_FLOW and event.link == self.sender:
            self.start()
        elif kind == Event.DELIVERY:
            delivery = event.delivery
            if delivery.link == self.receiver:
                if self.incoming is None:
                    self.incoming = delivery
                    self.in_link = self.receiver
                    self.in_client = self.own
                    self._reached()
                self.in_delivery(delivery)
            elif self.out is not None and delivery == self.out:
                self.out_updated(delivery)
        elif kind in (Event.LINK_REMOTE_CLOSE, Event.CONNECTION_REMOTE_CLOSE,
                      Event.TRANSPORT_CLOSED):
            self.reset("the router closed its link")

    def start(self) -> None:
        """Send the stream, once the router gave credit and the reply address."""
        sender = self.sender
        assert sender is not None
        if (self.out is not None or self.reply_to is None or sender.credit <= 0
                or self in self.streams.retries):
            return
        self.attempts += 1
        self.out = sender.delivery(str(self.attempts).encode())
        # No empty data section: qdrouterd 1.18 waits on one for ever.
        head = stream_head(self.conn.address, self.subject, self.reply_to)
        replay = self.replay
        sender.stream(head + data_head(len(replay)) + bytes(replay) if replay else head)
        self.streams.unheld(self)
        if self.read_eof:
            sender.advance()
            self.advanced = True
        elif self.attempts == 1:
            log.info("[T%d] streamed to address %s across the network", self.conn.id,
                     self.conn.address)
        self._watch()

    @property
    def taken(self) -> bool:
        return self.reached

    def _reached(self) -> None:
        if not self.reached:
            self.reached = True
            self.replay = bytearray()

    def took(self, chunk: memoryview) -> None:
        if not self.reached:
            self.replay += chunk

    def moved(self, count: int) -> None:
        self.streams.services.moved(self.conn, count, 0, self.loop.clock())

    def wrote(self, count: int) -> None:
        self.streams.services.moved(self.conn, 0, count, self.loop.clock())

    def out_updated(self, delivery: Delivery) -> None:
        if delivery.remote_state == Disposition.RECEIVED:
            self._reached()
        super().out_updated(delivery)

    def released(self, delivery: Delivery) -> None:
        now = self.loop.clock()
        if self.reached or now - self.conn.started >= RETRY_FOR_S:
            self.reset("no connector of its address could reach its service")
            return
        self._settle_out()
        self.out = None
        self.out_settled = False
        self.advanced = False
        self.window = ReadWindow(read=len(self.replay))
        log.info("[T%d] released before it reached a service; offered again", self.conn.id)
        self.streams.retry(self, now + min(RETRY_S * self.attempts, RETRY_MAX_S))

    def cancel(self) -> socket.socket | None:
        """Give the client socket back (a connector of its own router
        appeared before any stream went out), or None if one did."""
        if self.started or self.over or self.tcp is None:
            return None
        self.over = True
        client = self.tcp
        self._unwatch()
        self.tcp = None
        self.streams.forget(self)
        if self.own is not None:
            self.own.close()
        return client


class ServiceStream(_Carrier):
    """A stream taken by a connector: a connection to its service, and the
    service's bytes streamed back to the stream's reply address."""

    kind = "service"
    #: A service that answers and closes at once (its client half-closed
    #: first) may hang up before the stream back has credit: its answer is
    #: read once it has.
    keeps_hangup = True

    def __init__(self, streams: Streams, consumer: ConnectorConsumer, delivery: Delivery,
                 conn: TcpConnection) -> None:
        super().__init__(streams, conn)
        self.consumer = consumer
        self.incoming = delivery
        self.in_link = delivery.link
        self.in_client = consumer.client
        self.dialing: socket.socket | None = None
        self.head_seen = False
        self.abort_back = False

    def in_delivery(self, delivery: Delivery) -> None:
        super().in_delivery(delivery)
        if not self.over and not self.head_seen and self.reader.head is not None:
            self.head_seen = True
            self._dial()

    def _dial(self) -> None:
        connector = self.consumer.bridge
        port = int(connector.port)
        if is_address(connector.host):
            self._connect((connector.host, port))
            return

        def resolved(address: tuple[str, int] | None, why: str) -> None:
            if self.over:
                return
            if address is None:
                self._refused(f"cannot resolve {connector.host}: {why}")
            else:
                self._connect(address)

        resolve(self.loop, connector.host, port, family_of(connector.host), resolved)

    def _connect(self, address: tuple[str, int]) -> None:
        sock = dial(family_of(address[0]), address)
        if isinstance(sock, str):
            self._refused(sock)
            return
        self.dialing = sock
        self.loop.add(sock.fileno(), WRITE, self._dialed)

    def _dialed(self, fd: int, _mask: int) -> None:
        sock = self.dialing
        assert sock is not None
        self.dialing = None
        self.loop.remove(fd)
        if self.over:
            sock.close()
            return
        error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            sock.close()
            self._refused(errno.errorcode.get(error, str(error)) + ": " +
                          os.strerror(error))
            return
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        host, port = sock.getpeername()[:2]

        def failed(why: str) -> None:
            if not self.over:
                self._refused(why)  # another connector may do better

        # A TLS service is reached once its handshake is done.
        self.streams.relay(self.consumer.bridge, sock,
                           lambda plain: self._connected(plain, f"{host}:{port}"), failed)

    def _connected(self, sock: socket.socket, peer: str) -> None:
        if self.over:
            sock.close()
            return
        services = self.streams.services
        services.connected(self.conn, peer)
        log.info("[T%d] connected to %s for stream %s (connector %s)", self.conn.id, peer,
                 self.conn.peer, self.consumer.bridge.name)
        self.tcp = sock
        head = self.reader.head
        assert head is not None
        n = self.conn.id
        self.own = own = AmqpClient(self.loop, self.streams.attach, f"tcp-{n}", self._event)
        own.on_failure = self._failed
        sender = own.session.sender(f"tcp-{n}-back")
        sender.target.address = head.reply_to
        sender.open()
        self.sender = sender
        # Tells the far side at once that a service took the stream.
        assert self.incoming is not None
        _received(self.incoming, 0)
        self._write()
        self._watch()
        own.pump()
        self.consumer.client.pump()

    def _refused(self, why: str) -> None:
        connector = self.consumer.bridge
        self.streams.services.refused(self.conn, self.loop.clock())
        log.warning("[T%d] TCP connector %s cannot reach %s:%s: %s", self.conn.id,
                    connector.name, connector.host, connector.port, why)
        incoming = self.incoming
        assert incoming is not None
        self.over = True
        incoming.update(Disposition.RELEASED)
        incoming.settle()
        self.in_done = True
        self.streams.services.ended(self.conn)
        self.streams.forget(self)
        self.consumer.hold_off()
        self.consumer.done(self)

    def _event(self, event: Event) -> None:
        if self.over:
            self.after(event)
            return
        kind = event.type
        if kind == Event.LINK_FLOW and event.link == self.sender:
            self._start()
        elif kind == Event.DELIVERY and event.delivery.link == self.sender:
            self.out_updated(event.delivery)
        elif kind in (Event.LINK_REMOTE_CLOSE, Event.CONNECTION_REMOTE_CLOSE,
                      Event.TRANSPORT_CLOSED):
            self.reset("the router closed its link")

    def _start(self) -> None:
        sender = self.sender
        head = self.reader.head
        assert sender is not None and head is not None
        if self.out is not None or sender.credit <= 0:
            return
        self.out = sender.delivery(b"1")
        sender.stream(stream_head(head.reply_to or "", head.subject or ""))
        self._watch()

    def moved(self, count: int) -> None:
        self.streams.services.moved(self.conn, 0, count, self.loop.clock())

    def wrote(self, count: int) -> None:
        self.streams.services.moved(self.conn, count, 0, self.loop.clock())

    def _end(self, how: str) -> None:
        super()._end(how)
        self.consumer.done(self)

    def reset(self, why: str) -> None:
        if self.dialing is not None:
            with contextlib.suppress(OSError, ValueError, KeyError):
                self.loop.remove(self.dialing.fileno())
            self.dialing.close()
            self.dialing = None
        # A stream back that had not started yet is started and aborted,
        # once it has credit, so the far side knows (qdrouterd 1.18's client
        # side waits for its reply stream to end otherwise): the AMQP
        # connection is kept for it, as for a settlement (``LINGER_S``).
        back_due = not self.over and self.out is None and self.sender is not None
        if back_due:
            self.abort_back = True
            self.lingering = True
        super().reset(why)
        if back_due:
            self._abort_back()

    def after(self, event: Event) -> None:
        if event.type == Event.LINK_FLOW and event.link == self.sender:
            self._abort_back()
            return
        super().after(event)

    def _abort_back(self) -> None:
        sender, head, own = self.sender, self.reader.head, self.own
        if not self.abort_back or sender is None or head is None or own is None \
                or sender.credit <= 0:
            return
        self.abort_back = False
        out = sender.delivery(b"1")
        sender.stream(stream_head(head.reply_to or "", head.subject or ""))
        own.pump()

        def abort() -> None:
            out.abort()
            self.let_go()

        # The router must have routed the head before the abort comes: an
        # abort that arrives with a delivery's first bytes takes them away
        # (the router forwards nothing of an aborted delivery not yet routed).
        self.streams.call_at(self.loop.clock() + ABORT_AFTER_S, abort)


class ConnectorConsumer:
    """A ``tcpConnector``'s links on its address: each stream it takes is a
    connection to the service.

    A stream holds the link it arrives on until its last transfer (AMQP
    1.0 section 2.6.14: a delivery's transfers are not interleaved with
    another's on one link), so each stream has a link of its own: one idle
    link with credit 1 waits for the next stream, and a new one is attached
    as soon as it takes one; a stream's link is detached when it ends.
    """

    def __init__(self, streams: Streams, bridge: TcpBridge) -> None:
        self.streams = streams
        self.bridge = bridge
        #: The stream on each busy link, by link name.
        self.busy: dict[str, ServiceStream] = {}
        #: The idle links by name.
        self.idle: dict[str, Link] = {}
        self.held_until = 0.0
        self.closed = False
        self._names = itertools.count(1)
        self.client = AmqpClient(streams.loop, streams.attach, f"tcp-connector-{bridge.name}",
                                 self._event)
        # Its links carry every stream it took: a fault (logged) does not end them all.
        self.client.on_failure = lambda: None
        self._open_idle()
        self.client.pump()

    def _open_idle(self) -> None:
        while len(self.idle) < IDLE_LINKS and not self.closed and not self.held_until:
            name = f"tcp-connector-{self.bridge.name}-{next(self._names)}"
            receiver = self.client.session.receiver(name)
            receiver.source.address = self.bridge.address
            receiver.target.address = None
            receiver.open()
            receiver.flow(1)
            self.idle[name] = receiver

    def _close_idle(self) -> None:
        for receiver in self.idle.values():
            receiver.close()
        self.idle.clear()

    def _event(self, event: Event) -> None:
        kind = event.type
        if kind == Event.DELIVERY:
            delivery = event.delivery
            link = delivery.link
            stream = self.busy.get(link.name)
            if stream is None:
                if link.name not in self.idle or self.closed:
                    delivery.update(Disposition.RELEASED)
                    delivery.settle()
                    return
                del self.idle[link.name]
                self._open_idle()
                conn = self.streams.services.streamed(self.bridge, "?", self.streams.loop.clock())
                stream = ServiceStream(self.streams, self, delivery, conn)
                self.busy[link.name] = stream
                self.streams.carriers[conn.id] = stream
            stream.in_delivery(delivery)
            head = stream.reader.head
            if head is not None and stream.conn.peer == "?":
                stream.conn.peer = head.subject or "?"
        elif kind == Event.LINK_REMOTE_CLOSE and not self.closed:
            link = event.link
            stream = self.busy.get(link.name)
            if stream is not None:
                stream.reset("the router closed its link")
            elif link.name in self.idle:
                log.warning("TCP connector %s: the router closed its link on address %s",
                            self.bridge.name, self.bridge.address)

    def done(self, stream: ServiceStream) -> None:
        """``stream`` is over: its link goes."""
        link = stream.in_link
        if link is not None and self.busy.pop(link.name, None) is not None:
            link.close()
        self.client.pump()

    def hold_off(self) -> None:
        """The service refused: take no new stream for a while, so that
        the router offers them to the address's other connectors."""
        if self.closed:
            return
        self.held_until = self.streams.loop.clock() + REFUSED_HOLDOFF_S
        self._close_idle()
        self.streams.holding.add(self)

    def tick(self, now: float) -> None:
        if self.held_until and now >= self.held_until:
            self.held_until = 0.0
            self._open_idle()
            self.client.pump()

    def close(self) -> None:
        """The connector was deleted: its streams under way go on."""
        self.closed = True
        self._close_idle()
        self.client.pump()


class Streams:
    """Every carried connection of this router that crosses the network.

    Args:
        loop: the event loop.
        services: the core's bridges and connections.
        attach: serves one end of a socket pair as an AMQP connection.
    """

    def __init__(self, loop: EventLoop, services: TcpServices, attach: Attach) -> None:
        self.loop = loop
        self.services = services
        self.attach = attach
        self.view = memoryview(bytearray(_HEAD + READ_BYTES))
        self.carriers: dict[int, _Carrier] = {}
        self.consumers: dict[int, ConnectorConsumer] = {}
        self.holding: set[ConnectorConsumer] = set()
        #: Released streams to offer again, and when.
        self.retries: dict[ClientStream, float] = {}
        #: Connections over, waiting for the far side to settle their stream.
        self.lingering: dict[_Carrier, float] = {}
        #: Calls due at a time, as (when, call).
        self.calls: list[tuple[float, Callable[[], None]]] = []
        #: Calls back with the socket a connector's connection is carried
        #: on, or with why it failed: the socket itself, or once the TLS
        #: handshake is done where the bridge has TLS (set by ``TcpBridges``).
        self.relay: Relay = _plain
        self._ids = itertools.count(1)

    def call_at(self, when: float, call: Callable[[], None]) -> None:
        """Run ``call`` at ``when`` (on the tick)."""
        self.calls.append((when, call))

    def offer(self, conn: TcpConnection, client: socket.socket) -> ClientStream:
        """Stream ``conn`` to its address across the network."""
        site = conn.listener.site_id if conn.listener is not None else None
        stream = ClientStream(self, conn, client, site)
        self.carriers[conn.id] = stream
        return stream

    def consume(self, bridge: TcpBridge) -> None:
        """``bridge``, a connector, takes streams to its address."""
        self.consumers[id(bridge)] = ConnectorConsumer(self, bridge)

    def unconsume(self, bridge: TcpBridge) -> None:
        consumer = self.consumers.pop(id(bridge), None)
        if consumer is not None:
            consumer.close()
            self.holding.discard(consumer)

    def unheld(self, stream: ClientStream) -> None:
        self.services.unheld(stream.conn)

    def forget(self, carrier: _Carrier) -> None:
        self.carriers.pop(carrier.conn.id, None)

    def ended(self, carrier: _Carrier) -> None:
        self.carriers.pop(carrier.conn.id, None)
        self.services.ended(carrier.conn)

    def retry(self, stream: ClientStream, when: float) -> None:
        self.retries[stream] = when

    def linger(self, carrier: _Carrier, until: float) -> None:
        self.lingering[carrier] = until

    def next_deadline(self) -> float | None:
        due = [c.held_until for c in self.holding]
        due.extend(self.retries.values())
        due.extend(self.lingering.values())
        due.extend(when for when, _call in self.calls)
        return min(due) if due else None

    def tick(self, now: float) -> None:
        if self.calls:
            ready = [call for when, call in self.calls if when <= now]
            self.calls = [(when, call) for when, call in self.calls if when > now]
            for call in ready:
                call()
        for carrier, until in list(self.lingering.items()):
            if until <= now:
                carrier.let_go()
        for stream, when in list(self.retries.items()):
            if when <= now:
                del self.retries[stream]
                if not stream.over and stream.own is not None:
                    stream.start()
                    stream.own.pump()
        for consumer in list(self.holding):
            if consumer.held_until <= now:
                self.holding.discard(consumer)
                consumer.tick(now)

    def close(self) -> None:
        """The router is ending: every carried connection is reset."""
        for carrier in list(self.carriers.values()):
            carrier.reset("the router is ending")
        for consumer in self.consumers.values():
            consumer.client.abort()
        for carrier in list(self.carriers.values()):
            for client in (carrier.own, carrier.in_client):
                if client is not None:
                    client.abort()
