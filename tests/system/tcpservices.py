"""TCP services and clients for the TCP bridge system tests (docs/tcp.md):
an echo service that names itself, and a client that sends, ends its
stream and reads everything back."""

from __future__ import annotations

import contextlib
import re
import socket
import threading

TCP_LISTENING = re.compile(r"Listening for TCP on [0-9.]+:(\d+) for address (\S+)")


class EchoServer:
    """A TCP service that first sends its name and a newline (unless
    ``greet`` is false), then echoes every byte, and ends its stream when
    the client ends its own."""

    def __init__(self, name: str, *, greet: bool = True) -> None:
        self.name = name
        self.greet = greet
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            if self.greet:
                conn.sendall(self.name.encode() + b"\n")
            while True:
                try:
                    data = conn.recv(1 << 16)
                except OSError:
                    return
                if not data:
                    break
                with contextlib.suppress(OSError):
                    conn.sendall(data)
            with contextlib.suppress(OSError):  # the client may have gone already
                conn.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._stop = True
        self.sock.close()


def read_line(sock: socket.socket) -> bytes:
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        line.extend(chunk)
    return bytes(line)


def exchange(port: int, payload: bytes) -> tuple[bytes, bytes]:
    """Connect, send ``payload``, end the stream; the service's name and
    everything else it sent until it ended its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        name = read_line(sock)
        got = bytearray()

        def read() -> None:
            while True:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    return
                got.extend(chunk)

        reader = threading.Thread(target=read)
        reader.start()
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        reader.join(30)
        return name.strip(), bytes(got)


def half_closed(port: int, payload: bytes) -> bytes:
    """Connect, send ``payload``, end the stream, then read everything the
    service sends until it ends its own (a service that does not greet)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        got = bytearray()
        while chunk := sock.recv(1 << 16):
            got.extend(chunk)
    return bytes(got)
