"""AMQP over WebSockets (RFC 6455, subprotocol ``amqp``, or ``binary``, the
name older clients ask for, qdrouterd's own console among them), as qdrouterd's
listeners with ``http: yes`` and ``websockets: yes`` accept it.

A WebSocket connection is an AMQP connection like any other: the HTTP
server (``router.adapter.http.server``) answers the upgrade request, then
hands the socket to the transports (``router.adapter.connections.transports``) with a
``Channel`` between the socket and proton's transport. The channel turns
what arrives into the AMQP bytes inside the binary messages and what the
transport writes into binary messages; the framing, masking and the close
handshake are wsproto's (a sans-IO WebSocket library built on h11, the
HTTP parser the server already uses). AMQP bytes need not line up with
messages: the peer may split a frame across messages and fragments, or
put several frames in one.
"""

from __future__ import annotations

import contextlib
import logging
import ssl

import h11
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from router.adapter.connections.tls_pipe import TlsPipe

__all__ = ["SUBPROTOCOL", "Channel", "is_upgrade", "upgrade"]

log = logging.getLogger(__name__)

#: The subprotocol a client must ask for (as qdrouterd's), and the older
#: name qdrouterd takes as the same (rhea-based clients, its console, ask
#: for it); a client asking for both gets ``amqp``.
SUBPROTOCOL = "amqp"
SUBPROTOCOLS = (SUBPROTOCOL, "binary")

# Close codes (RFC 6455 section 7.4.1).
_NORMAL = 1000
_UNSUPPORTED_DATA = 1003
_GOING_AWAY = 1001


def is_upgrade(request: h11.Request) -> bool:
    """Whether ``request`` asks to switch to the WebSocket protocol."""
    for name, value in request.headers:
        if name == b"upgrade" and value.strip().lower() == b"websocket":
            return True
    return False


def upgrade(request: h11.Request, tls: TlsPipe | None = None) -> Channel | str:
    """Answer a WebSocket upgrade request: a channel whose ``out`` holds
    the ``101`` response, or why it is refused (not a handshake wsproto
    accepts, or neither ``amqp`` nor ``binary`` asked for), for a ``400``; ``tls``:
    the connection's TLS, which the channel goes on with."""
    ws = WSConnection(ConnectionType.SERVER)
    try:
        ws.initiate_upgrade_connection(list(request.headers), request.target)
        event = next(ws.events(), None)
    except RemoteProtocolError as error:
        return str(error)
    if not isinstance(event, Request):
        return "not a WebSocket handshake"
    chosen = next((name for name in SUBPROTOCOLS if name in event.subprotocols), None)
    if chosen is None:
        return f"WebSocket subprotocol '{SUBPROTOCOL}' required"
    channel = Channel(ws, tls)
    channel.emit(ws.send(AcceptConnection(subprotocol=chosen)))
    return channel


class Channel:
    """One WebSocket connection's framing, between its socket and its
    proton transport.

    ``out`` holds the bytes to write to the socket (the handshake's
    answer, binary messages, pongs, the close); ``inbound`` the AMQP bytes
    received and not yet pushed into the transport; ``closed`` is set once
    the peer closed or broke the WebSocket protocol: the AMQP connection
    then ends as if its socket had closed.
    """

    __slots__ = ("closed", "inbound", "out", "tls", "ws")

    def __init__(self, ws: WSConnection, tls: TlsPipe | None = None) -> None:
        self.ws = ws
        #: The connection's TLS (WebSockets over TLS), or None.
        self.tls = tls
        self.out = bytearray()
        self.inbound = bytearray()
        self.closed = False

    def emit(self, data: bytes) -> None:
        """Bytes of the WebSocket protocol for the peer (encrypted with TLS)."""
        tls = self.tls
        if tls is None:
            self.out += data
            return
        try:
            tls.send(data)
        except ssl.SSLError:
            self.closed = True  # the TLS failed: nothing more goes out
        self.out += tls.wire()

    def received(self, data: bytes | None, decrypted: bool = False) -> None:
        """Take what the socket read (``None``: it reached its end);
        ``decrypted``: already through TLS (what followed the upgrade
        request)."""
        ws = self.ws
        tls = self.tls
        if tls is not None and not decrypted:
            try:
                plain = tls.received(data or b"")
            except ssl.SSLError as error:
                log.info("WebSocket TLS failed: %s", error.reason or error)
                self.out += tls.wire()  # the alert
                self.closed = True
                return
            self.out += tls.wire()
            if tls.closed or data is None:
                data = None
            elif not plain:
                return
            else:
                data = plain
        try:
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, BytesMessage):
                    self.inbound += event.data
                elif isinstance(event, Ping):
                    self.emit(ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    # The peer's close, or wsproto's on a frame it could not
                    # parse (code 1002, 1007, 1009): answered, then the end.
                    if event.code not in (_NORMAL, _GOING_AWAY):
                        log.info("WebSocket closed: %s %s", event.code, event.reason or "")
                    self._answer_close(event)
                    self.closed = True
                    return
                elif isinstance(event, TextMessage):
                    log.info("WebSocket text message refused: AMQP is carried in binary "
                             "messages")
                    self.close(_UNSUPPORTED_DATA, "AMQP needs binary messages")
                    self.closed = True
                    return
                elif isinstance(event, RejectData | RejectConnection | Request):
                    self.closed = True
                    return
        except (LocalProtocolError, RemoteProtocolError) as error:
            log.info("WebSocket protocol error: %s", error)
            self.closed = True

    def _answer_close(self, event: CloseConnection) -> None:
        with contextlib.suppress(LocalProtocolError):  # already closed on this side
            self.emit(self.ws.send(event.response()))

    def send(self, data: bytes) -> None:
        """Frame AMQP bytes the transport wrote as one binary message
        (dropped once the peer closed or the TLS failed)."""
        if self.closed:
            return
        try:
            self.emit(self.ws.send(BytesMessage(data=data)))
        except LocalProtocolError:
            self.closed = True  # closing: nothing more goes out

    def close(self, code: int = _NORMAL, reason: str | None = None) -> None:
        """Start the close handshake from this side (once; not once the
        peer closed or the socket failed)."""
        if self.closed:
            return
        with contextlib.suppress(LocalProtocolError):  # already closing or closed
            self.emit(self.ws.send(CloseConnection(code=code, reason=reason)))
