"""The control plane's one decoding exception: a peer sent something we cannot use.

Owns ``PeerProtocolError``, raised by the generic codec and by the decoders
built on it (control messages, management requests). Must not hold other
exception types: bugs surface as ordinary Python exceptions.
"""

from __future__ import annotations

__all__ = ["PeerProtocolError"]


class PeerProtocolError(ValueError):
    """A message from a peer is malformed (the peer's fault).

    Raised by the decoders in :mod:`router.core.amqp.values`,
    :mod:`router.core.routing.codec` and the management request decoder; for
    control messages the caller drops the message and warns once per
    ``(router_id, opcode, str(exc))``.

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
