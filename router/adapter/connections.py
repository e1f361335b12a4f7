"""Connections as the event loop holds them: listeners, connectors and the
per-socket record of a transport, plus what a router says in its OPEN.

Owns no behaviour beyond that state; the loop (``router.adapter.engine``)
drives them.
"""

from __future__ import annotations

import secrets
import socket
import string
from typing import Any

from proton import Connection as PnConnection
from proton import Transport, symbol

import router
from router.adapter.settings import ConnectorSettings, ListenerSettings
from router.core import Connection, Role


class Listener:
    """A bound listening socket and the settings of what it accepts."""

    def __init__(self, settings: ListenerSettings, sock: socket.socket) -> None:
        self.settings = settings
        self.sock = sock
        host, port = sock.getsockname()[:2]
        self.host: str = host
        self.port: int = port


class Connector:
    """A connector: the connection it keeps trying to have (reference 3.3)."""

    def __init__(self, settings: ConnectorSettings) -> None:
        self.settings = settings
        self.address = f"{settings.host}:{settings.port}"
        self.sock: socket.socket | None = None  # while connecting
        self.conn: Conn | None = None  # while connected
        self.retry_at: float | None = 0.0
        # The last status line (management ``connectionMsg``).
        self.message: str | None = None


Settings = ListenerSettings | ConnectorSettings


class Conn:
    """One socket with its proton transport and connection."""

    __slots__ = ("closed", "connector", "core", "cost", "cptr", "deadline", "fd", "opened",
                 "peer", "pn_conn", "settings", "sock", "started", "tptr", "transport",
                 "want_write")

    def __init__(self, sock: socket.socket, core: Connection, settings: Settings,
                 transport: Transport, pn_conn: PnConnection, peer: str, now: float,
                 connector: Connector | None = None) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.core = core
        self.settings = settings
        self.connector = connector
        self.cost = settings.cost
        self.transport = transport
        self.pn_conn = pn_conn
        self.tptr = transport._impl
        self.cptr = pn_conn._impl
        self.peer = peer
        self.want_write = False
        self.closed = False
        self.opened = False
        self.started = now
        # When a connection this side closed is dropped if the peer has not
        # answered the close by then (0: none).
        self.deadline = 0.0


def symbols(*names: str) -> list[Any]:
    return [symbol(n) for n in names]


def open_properties(conn: Conn) -> dict[Any, Any]:
    """OPEN properties as qdrouterd sends them (reference 9.1)."""
    props: dict[Any, Any] = {symbol("product"): "hop", symbol("version"): router.__version__,
                             symbol("qd.conn-id"): conn.core.conn_id}
    if conn.core.role is Role.INTER_ROUTER:
        if conn.settings.cost > 1:
            props[symbol("qd.inter-router-cost")] = conn.settings.cost
        props[symbol("qd.annotations-version")] = 1
    return props


_TOKEN_ALPHABET = string.ascii_letters + string.digits + "+_"


def token(length: int = 15) -> str:
    """Random link-name suffix, as qdrouterd's ``qdlink.<15 chars>``."""
    return "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(length))


__all__ = ["Conn", "Connector", "Listener", "Settings", "open_properties", "symbols", "token"]
