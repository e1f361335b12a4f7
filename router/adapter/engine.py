"""The running router: its loop, and how it stops.

Owns running the event loop until a stop request (``stop``), one wake-up
at a time (``run_once``: the loop's I/O and timed parts, then the
wake-up's events and output), and the graceful shutdown: stop accepting
and granting credit, let in-flight deliveries settle for the grace
period, release the rest, close every connection.  The parts it runs are
built and wired by ``router.assembly``; it decides nothing about routing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from router import logs
from router.adapter.connections.certificates import Certificates
from router.adapter.connections.connectors import Connectors
from router.adapter.connections.listeners import Listeners
from router.adapter.connections.peergroup import PeerGroup
from router.adapter.connections.transports import Transports
from router.adapter.events import Events
from router.adapter.forwarding.forwarder import Forwarder
from router.adapter.forwarding.outcomes import settle_with
from router.adapter.loop.eventloop import EventLoop
from router.adapter.tcp.bridges import TcpBridges
from router.core import Router
from router.core.settlement import RELEASED

log = logging.getLogger(__name__)

#: The longest the loop sleeps, whatever its parts say.
_MAX_WAIT_S = 1.0


class Engine:
    """Runs the router's I/O until ``stop()``.

    Args:
        router: the routing core.
        loop: the event loop every part is registered with.
        transports: the AMQP connections.
        events: dispatches proton's events and finishes each wake-up.
        forwarder: the per-message path (frozen while shutting down).
        listeners: the listening sockets.
        connectors: the connectors.
        certificates: the sslProfiles (read again on SIGHUP).
        group: the peer group this router may join.
        shutdown_grace_s: how long in-flight deliveries may take to settle
            once a stop is requested.
    """

    def __init__(self, *, router: Router, loop: EventLoop, transports: Transports,
                 events: Events, forwarder: Forwarder, listeners: Listeners,
                 connectors: Connectors, certificates: Certificates,
                 group: PeerGroup, shutdown_grace_s: float,
                 tcp: TcpBridges | None = None) -> None:
        self.router = router
        self.loop = loop
        self.transports = transports
        self.events = events
        self.forwarder = forwarder
        self.listeners = listeners
        self.connectors = connectors
        self.certificates = certificates
        self.group = group
        self.shutdown_grace_s = shutdown_grace_s
        #: The TCP bridges (docs/tcp.md).
        self.tcp = tcp

    # -- what the process sees ------------------------------------------------------

    def wakeup_fd(self) -> int:
        """A descriptor that wakes the loop when written (for signal.set_wakeup_fd)."""
        return self.loop.wakeup_fd()

    def stop(self) -> None:
        """Begin the graceful shutdown; a second call ends its grace period at
        once.  Safe in a signal handler: it only counts and wakes the loop."""
        self.loop.stop()

    def defer(self, call: Callable[[], None]) -> None:
        """Run ``call`` in the loop at its next wake-up (from a signal handler
        or another thread)."""
        self.loop.defer(call)

    def start_connectors(self) -> None:
        """Begin connecting every configured connector."""
        self.connectors.start()

    def reload_tls(self) -> bool:
        """Read every sslProfile's files again (SIGHUP)."""
        return self.certificates.reload()

    # -- running ----------------------------------------------------------------------

    def run(self, on_drain: Callable[[], None] | None = None) -> None:
        """Serve until ``stop()``; drain for the grace period (``on_drain`` is
        called once as it begins: systemd's STOPPING=1); close everything."""
        loop = self.loop
        drain_until: float | None = None
        while True:
            now = loop.clock()
            wake = now + _MAX_WAIT_S
            if loop.stopping:
                if drain_until is None:
                    drain_until = now + self.shutdown_grace_s
                    self._begin_drain()
                    if on_drain is not None:
                        on_drain()
                if loop.stop_requests > 1 or now >= drain_until or self._drained():
                    break
                wake = min(wake, drain_until)
            due = loop.next_deadline()
            if due is not None:
                wake = min(wake, due)
            self.run_once(max(0.0, wake - now))
        self.shutdown()

    def run_once(self, timeout: float) -> None:
        """One wake-up: wait up to ``timeout`` s for I/O, then handle all of it."""
        self.loop.run_once(timeout)
        self.events.process()

    def _begin_drain(self) -> None:
        """Stop accepting connections and granting credit; let what is in
        flight settle until the grace period ends."""
        for listener in list(self.listeners.listeners.values()):
            self.listeners.close_listener(listener)
        self.connectors.stop_retrying()
        self.forwarder.frozen = True
        unsettled = sum(len(il.unsettled) for conn in self.transports.conns.values()
                        for il in conn.core.in_links.values())
        log.log(logs.NOTICE, "Shutting down: %d unsettled deliver%s may settle for up "
                "to %g s", unsettled, "y" if unsettled == 1 else "ies", self.shutdown_grace_s)

    def _drained(self) -> bool:
        return all(not il.unsettled for conn in self.transports.conns.values()
                   for il in conn.core.in_links.values())

    def shutdown(self) -> None:
        """Give every producer delivery still unsettled RELEASED, then close
        every connection with ``amqp:connection:forced``."""
        released = 0
        conns = self.transports.conns
        for conn in conns.values():
            if conn.closed:
                continue
            for il in conn.core.in_links.values():
                for d, ref in il.unsettled.items():
                    ref.in_delivery = None  # a consumer's outcome now goes nowhere
                    settle_with(d, RELEASED)
                    released += 1
                il.unsettled.clear()
        if released:
            log.info("Shutting down: released %d unsettled deliver%s", released,
                     "y" if released == 1 else "ies")
        for conn in list(conns.values()):
            self.transports.close_connection(conn, "Router shutting down")
        self.events.process()
        for conn in list(conns.values()):
            self.events.tear_down(conn)
        self.loop.close_parts()
        logs.forget(self.transports)

    def close(self) -> None:
        """Release the engine's descriptors (listeners, peer-group socket, the
        loop's own); for an engine that never ran or has finished running."""
        self.loop.close_parts()
        self.loop.close()
        logs.forget(self.transports)


__all__ = ["Engine"]
