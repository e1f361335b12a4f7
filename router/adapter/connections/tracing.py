"""Protocol trace: every AMQP frame of a connection, logged under the
PROTOCOL module at trace level (docs/operations.md#protocol-trace).

Owns turning proton's frame tracing on and off for a connection: on while
the PROTOCOL module logs at trace, unless management turned it on or off for
that connection alone (``enableProtocolTrace``; its frames are then logged
whatever the module's level).  A change of the module's level applies to
every connection again, as in qdrouterd.  Nothing of it runs per frame unless
tracing is on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from proton import Transport

from router import logs
from router.adapter.connections.state import Conn

log = logging.getLogger(__name__)


def _tracer(conn: Conn) -> Callable[[Any, str], None]:
    prefix = f"[C{conn.core.conn_id}]:"

    def trace(_transport: Any, message: str) -> None:
        record = log.makeRecord(log.name, logs.TRACE, "(frame)", 0, prefix + message,
                                (), None)
        record.qd_forced = conn.protocol_trace is True
        log.handle(record)
    return trace


def apply(conn: Conn) -> None:
    """Trace ``conn``'s frames when its own flag or the PROTOCOL module's
    level asks for it, else stop."""
    on = conn.protocol_trace
    if on is None:
        on = logs.enabled("PROTOCOL", logs.TRACE)
    if on == conn.tracing:
        return
    conn.tracing = on
    transport = conn.transport
    if on:
        transport.tracer = _tracer(conn)
        transport.trace(Transport.TRACE_FRM)
    else:
        transport.trace(Transport.TRACE_OFF)


__all__ = ["apply"]
