"""A TCP connection carried across routers as a pair of streamed messages:
the rules of qdrouterd 1.18's format that do not touch a socket
(docs/tcp.md#across-the-network-next).

Owns the connection id a stream's ``subject`` carries and the read window:
how far the side reading a socket may run ahead of what the far side has
written out to its own socket, as the far side reports it with ``received``
delivery states (AMQP 1.0 section 3.4.1, ``section-offset`` = bytes
written).  Pure: the adapter reads and writes, and tells the window.
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["WINDOW_BYTES", "ReadWindow", "connection_id"]

#: The most bytes read from a socket and not yet reported written out at the
#: far end (qdrouterd 1.18: 121,635 x 6 x 2).
WINDOW_BYTES: Final = 121_635 * 6 * 2


def connection_id(client_host_port: str, site_id: str | None) -> str:
    """A carried connection's id: the client's ``host:port``, then
    ``@siteId`` where the listener has one."""
    return f"{client_host_port}@{site_id}" if site_id else client_host_port


@attrs.define(slots=True)
class ReadWindow:
    """The read side of one stream.

    ``read`` counts the bytes read from the socket into the stream,
    ``written`` the far side's last report of bytes it wrote out.  Once the
    stream's delivery is settled or has a terminal outcome, the far side
    reports no more and the window no longer applies (``open_ended``).
    """

    read: int = 0
    written: int = 0
    open_ended: bool = False

    @property
    def room(self) -> int | None:
        """How many bytes may be read now (None: no limit)."""
        if self.open_ended:
            return None
        return max(0, WINDOW_BYTES - (self.read - self.written))

    @property
    def full(self) -> bool:
        return not self.open_ended and self.read - self.written >= WINDOW_BYTES

    def took(self, count: int) -> None:
        """``count`` bytes were read into the stream."""
        self.read += count

    def reported(self, section_offset: int) -> bool:
        """The far side reports ``section_offset`` bytes written; whether
        the window was full and is not now (reading may go on).

        A report older than one already taken (states can cross) or beyond
        what was read (a confused peer) changes nothing past its bounds.
        """
        was_full = self.full
        if section_offset > self.written:
            self.written = min(section_offset, self.read)
        return was_full and not self.full

    def ended(self) -> bool:
        """The delivery was settled or given a terminal outcome; whether
        reading was held and may go on."""
        was_full = self.full
        self.open_ended = True
        return was_full
