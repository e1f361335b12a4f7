"""An AMQP client over WebSockets for system tests: wsproto's client side
of the handshake and framing, proton's transport and endpoints pumped by
hand over a blocking socket, so a test controls every frame."""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections.abc import Callable

from proton import Connection, Delivery, Endpoint, Message, Transport
from proton.utils import BlockingConnection
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Event,
    Ping,
    RejectConnection,
    RejectData,
    Request,
)
from wsproto.utilities import LocalProtocolError

from tests.system.clients import pump

TIMEOUT_S = 10.0


class WsClient:
    """One TCP connection that upgrades to WebSockets (subprotocols
    ``subprotocols``) and then carries an AMQP connection."""

    def __init__(self, port: int, subprotocols: tuple[str, ...] = ("amqp",),
                 tls: ssl.SSLContext | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname="127.0.0.1")
        self.ws = WSConnection(ConnectionType.CLIENT)
        #: What the handshake got: AcceptConnection, or RejectConnection
        #: (``status``, ``body``).
        self.accepted: AcceptConnection | None = None
        self.status: int | None = None
        self.body = b""
        #: The router's close (code, reason), once it arrived.
        self.closed: tuple[int, str | None] | None = None
        self.eof = False
        self.transport: Transport = Transport()
        self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.connection: Connection = Connection()
        self.connection.container = "ws-client"
        self.transport.bind(self.connection)
        self.sock.sendall(self.ws.send(Request(host=f"127.0.0.1:{port}", target="/",
                                               subprotocols=list(subprotocols))))
        deadline = time.monotonic() + TIMEOUT_S
        while self.accepted is None and self.status is None:
            if time.monotonic() > deadline:
                raise AssertionError("no answer to the WebSocket handshake")
            self._read(1.0)

    # -- bytes ---------------------------------------------------------------------

    def _events(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, AcceptConnection):
                self.accepted = event
            elif isinstance(event, RejectConnection):
                self.status = event.status_code
                if not event.has_body:
                    self.eof = True
            elif isinstance(event, RejectData):
                self.body += event.data
            elif isinstance(event, BytesMessage):
                self.transport.push(event.data)
            elif isinstance(event, Ping):
                self.sock.sendall(self.ws.send(event.response()))
            elif isinstance(event, CloseConnection):
                self.closed = (event.code, event.reason)
                # Not when this side closed first: then this was the answer.
                with contextlib.suppress(LocalProtocolError, OSError):
                    self.sock.sendall(self.ws.send(event.response()))

    def _read(self, timeout: float) -> None:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(65536)
        except (TimeoutError, ssl.SSLWantReadError):
            return
        except OSError:
            data = b""
        if not data:
            self.eof = True
            self.ws.receive_data(None)
        else:
            self.ws.receive_data(data)
        self._events(list(self.ws.events()))

    def send_frames(self, data: bytes) -> None:
        """Raw bytes straight to the socket (hand-made frames)."""
        self.sock.sendall(data)

    def flush(self, split: int | None = None) -> None:
        """The transport's output to the router: one binary message, or with
        ``split`` in pieces of that many bytes, each piece a fragment of one
        message (``message_finished`` only on the last)."""
        while self.transport.pending() > 0:
            data = self.transport.peek(self.transport.pending())
            self.transport.pop(len(data))
            if split is None:
                self.sock.sendall(self.ws.send(BytesMessage(data=data)))
                continue
            for i in range(0, len(data), split):
                piece = data[i:i + split]
                last = i + split >= len(data)
                self.sock.sendall(self.ws.send(BytesMessage(data=piece, message_finished=last)))

    def pump_until(self, condition: Callable[[], bool], what: str,
                   timeout: float = TIMEOUT_S, split: int | None = None) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            self.flush(split)
            if self.eof:
                raise AssertionError(f"the router closed the socket before {what}")
            self._read(0.05)

    # -- AMQP ----------------------------------------------------------------------

    def open(self, split: int | None = None) -> None:
        self.connection.open()
        self.session = self.connection.session()
        self.session.open()
        self.pump_until(lambda: bool(self.connection.state & Endpoint.REMOTE_ACTIVE),
                        "the router's OPEN", split=split)

    def send(self, address: str, body: str) -> Delivery:
        """Send one unsettled message once the router gave credit; returns
        its delivery (``wait_outcome`` waits for the consumer's outcome)."""
        link = self.session.sender(f"ws-sender-{address}")
        link.target.address = address
        link.open()
        self.pump_until(lambda: link.credit > 0, f"credit on {address}")
        delivery = link.delivery(b"1")
        link.send(Message(body=body).encode())
        link.advance()
        self.flush()
        return delivery

    def wait_outcome(self, delivery: Delivery, also: Callable[[], object] = lambda: None) -> int:
        """Pump until ``delivery``'s outcome arrives, calling ``also`` each
        time round (to pump the consumer's own connection)."""
        self.pump_until(lambda: (also(), delivery.remote_state != 0)[1], "the outcome")
        return int(delivery.remote_state)

    def receive_on(self, count: int, also: Callable[[], object] = lambda: None) -> list[object]:
        """Accept ``count`` messages on the receiver ``attach_receiver``
        made, calling ``also`` each time round."""
        link = self.receiver
        bodies: list[object] = []

        def take() -> bool:
            also()
            while (delivery := link.current) is not None and not delivery.partial:
                message = Message()
                message.decode(link.recv(delivery.pending))
                bodies.append(message.body)
                delivery.update(Delivery.ACCEPTED)
                delivery.settle()
                link.advance()
            return len(bodies) >= count

        self.pump_until(take, f"{count} messages")
        self.flush()
        return bodies

    def attach_receiver(self, address: str) -> None:
        """A receiver the router has answered (so its address is known)."""
        link = self.session.receiver(f"ws-consumer-{address}")
        link.source.address = address
        link.open()
        link.flow(10)
        self.pump_until(lambda: bool(link.state & Endpoint.REMOTE_ACTIVE),
                        f"the attach of {address}")
        self.receiver = link

    def close_websocket(self, code: int = 1000) -> None:
        self.sock.sendall(self.ws.send(CloseConnection(code=code)))

    def wait_closed(self) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while self.closed is None and not self.eof:
            if time.monotonic() > deadline:
                raise AssertionError("the router did not close the WebSocket")
            self._read(0.2)

    def close(self) -> None:
        self.sock.close()


def round_trip(ws: WsClient, url: str, address: str, body: str) -> None:
    """``ws`` sends ``body`` to a plain client's receiver on ``url`` and
    gets the outcome ACCEPTED."""
    plain = BlockingConnection(url, timeout=TIMEOUT_S)
    try:
        receiver = plain.create_receiver(address)
        delivery = ws.send(address, body)
        assert receiver.receive(timeout=TIMEOUT_S).body == body
        receiver.accept()
        assert ws.wait_outcome(delivery, also=lambda: pump(plain, 0.01)) == Delivery.ACCEPTED
    finally:
        plain.close()

