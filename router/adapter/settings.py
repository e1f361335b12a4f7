"""Per-listener settings the adapter needs, built by the CLI from the conf."""

from __future__ import annotations

import attrs

from router.core import Role


@attrs.frozen(kw_only=True)
class ListenerSettings:
    """What one listener binds to and gives the connections it accepts."""

    name: str | None = None
    host: str = "127.0.0.1"
    port: int = 5672
    role: Role = Role.NORMAL
    sasl_mechanisms: str = "ANONYMOUS"
    authenticate_peer: bool = False
    require_encryption: bool = False
    idle_timeout_s: int = 16
    initial_handshake_timeout_s: int = 0
    max_frame_size: int = 16384
    max_sessions: int = 32768
    max_session_frames: int = 0
    link_capacity: int = 250
    strip_in: bool = True
    strip_out: bool = True
