"""What the tests that start processes wait with: a free loopback port, and
a condition polled until it holds or a deadline passes."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(condition: Callable[[], object], timeout: float = 10.0, what: str = "",
             interval: float = 0.02) -> None:
    """Poll ``condition`` every ``interval`` s until it is true; after
    ``timeout`` s an AssertionError names ``what`` (or the condition)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(interval)


__all__ = ["free_port", "wait_for"]
