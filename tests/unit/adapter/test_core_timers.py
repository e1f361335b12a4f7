"""The core's timers as a loop part (router/adapter/loop/timers.py): before
each tick the core hears which inter-router connections brought frames
(docs/networks.md#timers)."""

from __future__ import annotations

from typing import Any

from proton import Connection, Transport

from router.adapter.loop.timers import CoreTimers
from router.core import Connection as CoreConnection
from router.core import ConnectionId, Effect
from tests.unit.adapter.wire import pump


class Handle:
    """What the adapter keeps of a connection, as much as the part reads."""

    def __init__(self, transport: Transport) -> None:
        self.tptr: Any = transport._impl
        self.closed = False


class Core:
    """A routing core with inter-router connections; records what it is told."""

    def __init__(self, connections: list[CoreConnection]) -> None:
        self.connections = connections
        self.calls: list[tuple[str, int, float]] = []

    def inter_router_connections(self) -> list[CoreConnection]:
        return self.connections

    def neighbor_heard(self, conn: CoreConnection, now: float) -> None:
        self.calls.append(("heard", int(conn.conn_id), now))

    def tick(self, now: float) -> list[Effect]:
        self.calls.append(("tick", 0, now))
        return []

    def next_deadline(self) -> float | None:
        return None


def _joined() -> tuple[Connection, Transport, Transport]:
    """A neighbour's connection, its transport and the router's transport."""
    neighbour = Connection()
    theirs = Transport()
    theirs.bind(neighbour)
    ours = Transport(Transport.SERVER)
    ours.bind(Connection())
    neighbour.open()
    return neighbour, theirs, ours


def test_the_core_hears_a_connection_only_when_it_brought_frames() -> None:
    neighbour, theirs, ours = _joined()
    _, quiet_theirs, quiet_ours = _joined()
    busy = CoreConnection(ConnectionId(1), handle=Handle(ours))
    quiet = CoreConnection(ConnectionId(2), handle=Handle(quiet_ours))
    core = Core([busy, quiet])
    applied: list[list[Effect]] = []
    part = CoreTimers(core, applied.append)  # type: ignore[arg-type]
    part.tick(1.0)  # the first reading is where counting starts
    assert core.calls == [("tick", 0, 1.0)]

    pump(theirs, ours)  # the neighbour's OPEN (and the header) arrive
    pump(quiet_theirs, quiet_ours)
    core.calls.clear()
    part.tick(2.0)
    assert core.calls == [("heard", 1, 2.0), ("heard", 2, 2.0), ("tick", 0, 2.0)]

    session = neighbour.session()
    session.open()
    pump(theirs, ours)  # a BEGIN: frames on the busy one only
    core.calls.clear()
    part.tick(3.0)
    assert core.calls == [("heard", 1, 3.0), ("tick", 0, 3.0)]

    core.calls.clear()
    part.tick(4.0)
    assert core.calls == [("tick", 0, 4.0)], "nothing came: nothing heard"
    assert applied == [[], [], [], []]


def test_a_closed_connection_is_not_read() -> None:
    _, theirs, ours = _joined()
    handle = Handle(ours)
    core = Core([CoreConnection(ConnectionId(1), handle=handle)])
    part = CoreTimers(core, lambda effects: None)  # type: ignore[arg-type]
    part.tick(1.0)
    pump(theirs, ours)
    handle.closed = True
    core.calls.clear()
    part.tick(2.0)
    assert core.calls == [("tick", 0, 2.0)]
