"""Confs and helpers for system tests of routers in front of brokers."""

from __future__ import annotations

import re
import time

from tests.system.harness import Hop
from tests.system.network import LOG_INFO

AUTOLINK_ATTACHED = r"Auto link attached: dir={direction} address={address}\b"


def broker_connector(port: int, name: str = "broker", host: str = "127.0.0.1") -> str:
    """A route-container connector to a broker listening on ``port``."""
    return (f"connector {{\n    name: {name}\n    host: {host}\n    port: {port}\n"
            f"    role: route-container\n    saslMechanisms: ANONYMOUS\n}}\n")


def waypoint(address: str, connection: str = "broker", *, external: str | None = None) -> str:
    """A waypoint address with its out and in auto-links to ``connection``."""
    ext = f"    externalAddress: {external}\n" if external else ""
    links = "".join(
        f"autoLink {{\n    address: {address}\n    direction: {d}\n"
        f"    connection: {connection}\n{ext}}}\n" for d in ("out", "in"))
    return f"address {{\n    prefix: {address}\n    waypoint: yes\n}}\n{links}"


def wait_autolinks(hop: Hop, address: str, directions: tuple[str, ...] = ("out", "in"),
                   count: int = 1, timeout: float = 20.0) -> None:
    """Wait until the router logged ``count`` attaches of each direction's auto-link."""
    deadline = time.monotonic() + timeout
    for direction in directions:
        pattern = re.compile(AUTOLINK_ATTACHED.format(direction=direction,
                                                      address=re.escape(address)))
        while len(pattern.findall(hop.log_text())) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"auto-link {direction} {address} not attached "
                                     f"{count}x:\n{hop.log_text()}")
            time.sleep(0.05)


__all__ = ["LOG_INFO", "broker_connector", "wait_autolinks", "waypoint"]
