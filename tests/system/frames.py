"""A frame-level AMQP client for what proton clients will not send: more
sessions than the peer's channel-max, for one.  It speaks SASL ANONYMOUS,
then writes performatives encoded with proton's ``Data`` and reads frames
back one at a time."""

from __future__ import annotations

import socket
import struct
from typing import Any

from proton import Data, Described, symbol, uint, ulong

SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_INIT, SASL_OUTCOME = 0x41, 0x44
OPEN, BEGIN, ATTACH, END, CLOSE = 0x10, 0x11, 0x12, 0x17, 0x18


def performative(code: int, *fields: Any) -> bytes:
    """A described list: the body of one frame."""
    data = Data()
    data.put_described()
    data.enter()
    data.put_ulong(ulong(code))
    data.put_list()
    data.enter()
    for value in fields:
        data.put_object(value)
    data.exit()
    data.exit()
    return bytes(data.encode())


class FrameClient:
    """One raw connection to a router listener."""

    def __init__(self, host: str, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self._buffer = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, code: int, *fields: Any, channel: int = 0, sasl: bool = False) -> None:
        body = performative(code, *fields)
        header = struct.pack(">IBBH", 8 + len(body), 2, 1 if sasl else 0, channel)
        self.sock.sendall(header + body)

    def _read(self, n: int) -> bytes:
        while len(self._buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed by the router")
            self._buffer += chunk
        out, self._buffer = self._buffer[:n], self._buffer[n:]
        return out

    def frame(self) -> tuple[int, int | None, list[Any]]:
        """The next non-empty frame: (channel, performative code, its fields)."""
        while True:
            size, doff, _kind, channel = struct.unpack(">IBBH", self._read(8))
            rest = self._read(size - 8)[(doff * 4) - 8:]
            if not rest:
                continue  # an empty frame (heartbeat)
            data = Data()
            data.decode(rest)
            data.next()
            value = data.get_object()
            assert isinstance(value, Described)
            return channel, int(value.descriptor), list(value.value)

    def wait_for(self, code: int) -> tuple[int, list[Any]]:
        """Frames up to the next one of ``code``: (its channel, its fields)."""
        while True:
            channel, got, fields = self.frame()
            if got == code:
                return channel, fields
            if got == CLOSE and code != CLOSE:
                raise ConnectionError(f"connection closed: {fields}")

    def handshake(self, hostname: str | None = None) -> list[Any]:
        """SASL ANONYMOUS, then OPEN; returns the router's OPEN fields."""
        self.sock.sendall(SASL_HEADER)
        assert self._read(8) == SASL_HEADER
        self.frame()  # sasl-mechanisms
        self.send(SASL_INIT, symbol("ANONYMOUS"), b"", sasl=True)
        _, code, fields = self.frame()
        assert code == SASL_OUTCOME and fields[0] == 0, f"SASL refused: {fields}"
        self.sock.sendall(AMQP_HEADER)
        assert self._read(8) == AMQP_HEADER
        self.send(OPEN, "frame-client", hostname)
        return self.wait_for(OPEN)[1]

    def begin(self, channel: int) -> None:
        """BEGIN on ``channel``, whatever the router's channel-max."""
        self.send(BEGIN, None, uint(0), uint(1000), uint(1000), channel=channel)
