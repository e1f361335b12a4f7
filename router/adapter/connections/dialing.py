"""Starting an outgoing TCP connection without stopping the loop.

Owns what connectors and the connections to authentication services do
alike before their socket connects: the address family a host as written
asks for (IPv6 only for an IPv6 literal), a host name resolved in a thread
of its own (so a slow or failing name server never stops the loop; the
answer comes back through the loop's ``defer``), and the non-blocking
connect.  What to do once the socket connects, or fails, is the caller's.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import threading
from collections.abc import Callable

from router.adapter.loop.eventloop import EventLoop

#: Where a name resolved to (None: it did not), and why not.
Resolved = Callable[[tuple[str, int] | None, str], None]


def is_address(host: str) -> bool:
    """Whether ``host`` is an IPv4 or IPv6 address rather than a name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def family_of(host: str) -> int:
    """The address family a host as written asks for: IPv6 only for an
    IPv6 literal (qdrouterd's socketAddressFamily is not used)."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def resolve(loop: EventLoop, host: str, port: int, family: int, done: Resolved) -> None:
    """Resolve ``host`` in a thread; ``done`` is called in the loop with the
    first address, or None and the resolver's reason."""
    def run() -> None:
        try:
            found = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
            address: tuple[str, int] | None = (str(found[0][4][0]), int(found[0][4][1]))
            why = ""
        except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError
            address, why = None, getattr(exc, "strerror", None) or str(exc)
        loop.defer(lambda: done(address, why))

    threading.Thread(target=run, name=f"resolve {host}", daemon=True).start()


def dial(family: int, address: tuple[str, int] | str) -> socket.socket | str:
    """A non-blocking socket whose connect to ``address`` has begun (watch
    it for writing: ``SO_ERROR`` then says how it went), or why it could not
    begin."""
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:  # out of descriptors, say
        return exc.strerror or str(exc)
    sock.setblocking(False)
    try:
        error = sock.connect_ex(address)
    except OSError as exc:
        error = exc.errno or errno.EINVAL
    if error not in (0, errno.EINPROGRESS):
        sock.close()
        return os.strerror(error)
    return sock


__all__ = ["Resolved", "dial", "family_of", "is_address", "resolve"]
