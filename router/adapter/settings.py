"""Per-listener and per-connector settings the adapter needs, built by the
CLI from the conf."""

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
    cost: int = 1
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


@attrs.frozen(kw_only=True)
class ConnectorSettings:
    """Where one connector connects and what its connection uses."""

    name: str | None = None
    host: str = "127.0.0.1"
    port: int = 5672
    role: Role = Role.NORMAL
    cost: int = 1
    sasl_mechanisms: str = "ANONYMOUS"
    idle_timeout_s: int = 16
    max_frame_size: int = 16384
    max_sessions: int = 32768
    max_session_frames: int = 0
    link_capacity: int = 250
    strip_in: bool = True
    strip_out: bool = True
    # Reconnect delays (reference 3.3): after an attempt that never opened,
    # and after an established connection dropped.
    retry_failed_s: float = 5.0
    retry_dropped_s: float = 2.0
    initial_handshake_timeout_s: int = 0
