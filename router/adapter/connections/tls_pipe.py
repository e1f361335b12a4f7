"""TLS on an HTTP listener's connections, sans-IO: Python's ``ssl`` objects
over memory buffers, between a socket and the HTTP server or a WebSocket
channel (HTTPS and WebSockets over TLS). AMQP connections have proton's
own TLS layer instead (``router.adapter.connections.tls``).
"""

from __future__ import annotations

import ssl

__all__ = ["TlsPipe", "looks_like_tls"]

_READ = 65536


def looks_like_tls(first: bytes) -> bool:
    """Whether a connection's first bytes start a TLS handshake (a
    handshake record, RFC 8446 section 5.1), not plain HTTP."""
    return first[:1] == b"\x16"


class TlsPipe:
    """The server side of one TLS connection.

    ``received`` takes what the socket read and returns the plaintext;
    ``send`` takes plaintext (held until the handshake is done);
    ``wire`` returns what to write to the socket. A broken handshake or
    record raises ``ssl.SSLError``; ``closed`` is set once the peer sent
    its close_notify.
    """

    __slots__ = ("closed", "handshaken", "incoming", "obj", "outgoing", "pending")

    def __init__(self, context: ssl.SSLContext) -> None:
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.pending = bytearray()
        self.handshaken = False
        self.closed = False

    def received(self, data: bytes) -> bytes:
        """Raw bytes in (``b""``: the socket's end), plaintext out."""
        if data:
            self.incoming.write(data)
        else:
            self.incoming.write_eof()
        plain = bytearray()
        try:
            if not self.handshaken:
                self.obj.do_handshake()
                self.handshaken = True
                if self.pending:
                    self.obj.write(bytes(self.pending))
                    self.pending.clear()
            while chunk := self.obj.read(_READ):
                plain += chunk
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            self.closed = True
        return bytes(plain)

    def send(self, plain: bytes) -> None:
        if self.handshaken:
            self.obj.write(plain)
        else:
            self.pending += plain

    def peer_certificate(self) -> dict[str, object] | None:
        """The client certificate the handshake checked (None: none)."""
        if not self.handshaken:
            return None
        try:
            return dict(self.obj.getpeercert() or {}) or None
        except ValueError:
            return None

    def wire(self) -> bytes:
        """What is to be written to the socket now."""
        return self.outgoing.read()
