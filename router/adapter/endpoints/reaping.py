"""Freeing the links and sessions both sides closed, once a second.

Owns giving proton back what is left of a link or session that is over.
Proton keeps every link and session of a connection, closed or not, until
the application frees it (``pn_link_free``, ``pn_session_free``) or the
connection is freed: about 1.5 kB of C heap a link (its termini, names,
delivery lists), and more for a session.  A connection that lives for
days while its links come and go (a consumer that re-attaches, an
auto-link created and deleted over management, the router's own sessions
for link routes and streams) would otherwise hold every link it ever had
(docs/reliability.md#what-grows).

A link is freed once both sides closed it and the router holds it no more:
it has left the link table (what it held was settled as it went:
``Departures``), and is neither an auto-link's nor a parked attach.  A
session is freed once both sides ended it and it is not one the router
still counts as its own.  The sweep runs a second after the events that
closed them, so nothing of the wake-up that closed them still points at
them, and proton keeps what it has yet to write (the detach, the end) until
it is written.  A part of the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

from router.adapter.connections.state import Conn
from router.adapter.pn import NULL, lib

#: Both ends closed: the state a link or session must have to be freed.
CLOSED: Final = lib.PN_LOCAL_CLOSED | lib.PN_REMOTE_CLOSED

_EVERY_S: Final = 1.0


class Reaper:
    """Every second, each connection's links and sessions that are over, freed.

    Args:
        conns: the open connections, by handle.
        held: the link handles the router still holds, each a collection
            (the link table, the auto-links attaching, the parked attaches).
        own_sessions: the sessions the router still counts as its own.
        clock: the loop's clock.
    """

    def __init__(self, conns: Mapping[Any, Conn], held: Callable[[], tuple[Collection[Any], ...]],
                 own_sessions: Callable[[], Collection[Any]],
                 clock: Callable[[], float]) -> None:
        self.conns = conns
        self.held = held
        self.own_sessions = own_sessions
        self._next = clock() + _EVERY_S

    def next_deadline(self) -> float | None:
        return self._next

    def tick(self, now: float) -> None:
        self._next = now + _EVERY_S
        held: tuple[Collection[Any], ...] | None = None
        in_use: set[Any] | None = None
        for conn in list(self.conns.values()):
            cptr = conn.cptr
            if conn.closed or cptr is None:
                continue  # its teardown frees the lot
            lptr = lib.pn_link_head(cptr, CLOSED)
            while lptr != NULL:
                after = lib.pn_link_next(lptr, CLOSED)
                if held is None:
                    held = self.held()
                if not any(lptr in table for table in held):
                    lib.pn_link_free(lptr)
                lptr = after
            ssn = lib.pn_session_head(cptr, CLOSED)
            while ssn != NULL:
                after = lib.pn_session_next(ssn, CLOSED)
                if in_use is None:
                    in_use = _sessions_of(held if held is not None else self.held())
                    in_use.update(self.own_sessions())
                if ssn not in in_use:  # freeing a session frees its links
                    lib.pn_session_free(ssn)
                ssn = after

    def close(self) -> None:
        """Nothing to close: the connections free what is left as they go."""


def _sessions_of(held: tuple[Collection[Any], ...]) -> set[Any]:
    """The sessions of the links the router holds."""
    return {lib.pn_link_session(lptr) for table in held for lptr in table}


__all__ = ["CLOSED", "Reaper"]
