"""The routing package's one exception: a peer sent something we cannot use.

Owns ``PeerProtocolError``. Must not hold other exception types: bugs in this
package surface as ordinary Python exceptions and are never caught here.
"""

from __future__ import annotations

__all__ = ["PeerProtocolError"]


class PeerProtocolError(ValueError):
    """A control message from another router is malformed (the peer's fault).

    Raised by the decoders in :mod:`router.core.routing.values` and
    :mod:`router.core.routing.codec`; the caller drops the message and warns
    once per ``(router_id, opcode, str(exc))``.

    Attributes:
        router_id: the sender's id when it could be read, else None.
        opcode: the control opcode (``"LSU"``...) when it could be read, else None.
    """

    def __init__(
        self, message: str, *, router_id: str | None = None, opcode: str | None = None
    ) -> None:
        super().__init__(message)
        self.router_id = router_id
        self.opcode = opcode
