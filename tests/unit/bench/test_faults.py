"""The slow-clients scenario's clock (bench.faults): which held connections
the far end closed, and how long after each was opened."""

from __future__ import annotations

import socket
import threading
import time

from bench import faults


def test_closed_within_times_each_close_from_its_own_opening() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted: list[socket.socket] = []
    try:
        held = {}
        for kind, first in (("early", b"AMQP"), ("late", b""), ("never", b"")):
            held[faults._slow(port, first)] = (kind, time.monotonic())
            accepted.append(server.accept()[0])
        early, late, _never = accepted
        early.sendall(b"AMQP\x00\x01\x00\x00")  # something said before the close
        threading.Timer(0.2, early.close).start()
        threading.Timer(0.6, late.close).start()
        closed = faults._closed_within(held, timeout=3.0)
        by_kind = {held[sock][0]: seconds for sock, seconds in closed.items()}
        # The one never closed is not counted; the others from their openings.
        assert set(by_kind) == {"early", "late"}
        assert 0.19 <= by_kind["early"] < by_kind["late"]
    finally:
        for sock in [*held, *accepted, server]:
            sock.close()
