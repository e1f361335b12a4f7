"""The routing package's exception, defined with the codec it shares (``router.core.amqp``)."""

from __future__ import annotations

from router.core.amqp.errors import PeerProtocolError

__all__ = ["PeerProtocolError"]
