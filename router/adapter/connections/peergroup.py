"""Peer groups on the wire (docs/networks.md#peer-groups): the multicast
socket, beacons out and in, and the inter-router connectors the router
makes to the peers it hears.

Owns the UDP socket (joined to the group's multicast address on one
interface, so a router announcing 127.0.0.1 stays on loopback), sending a
beacon every ``announceInterval``, feeding what arrives to
``router.core.beacons.PeerTable``, and turning its live peers into
connectors: one per peer this side is to connect to (the pairing rule),
let go once the peer's beacons expired and its connection is gone.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket

import attrs

import conf
from router.adapter.connections.ports import ConnectorControl
from router.adapter.connections.settings import connector_settings
from router.adapter.connections.state import Connector
from router.adapter.loop.eventloop import EventLoop
from router.core import Role
from router.core.beacons import MAX_BEACON, Beacon, BeaconError, Ignored, PeerTable
from router.core.reconnect import ReconnectPolicy

__all__ = ["DiscoverySettings", "PeerDiscovery", "PeerGroup"]

log = logging.getLogger(__name__)

#: How a connector to a discovered peer retries while the peer is live.
PEER_RECONNECT = ReconnectPolicy(initial_s=0.1, max_s=2.0)


@attrs.frozen(kw_only=True)
class DiscoverySettings:
    """A ``discovery`` section with the listener it announces resolved."""

    group: str
    address: str
    port: int
    interface: str
    ttl: int
    interval_s: float
    expiry_s: float
    secret: bytes | None
    announce_host: str
    announce_port: int
    #: The ``normal`` listeners announced for clients: (host, port).
    clients: tuple[tuple[str, int], ...] = ()
    #: The conf section these settings came from (shown by management).
    section: conf.DiscoverySection | None = None


class PeerDiscovery:
    """The router's side of a peer group: a part of the loop.

    Args:
        loop: where its socket is watched (raises OSError when the
            multicast socket cannot be set up).
        connectors: where the connectors to its peers are added.
        settings: the group.
        router_id: this router's id.
        instance: this router's start time (epoch seconds).
    """

    def __init__(self, loop: EventLoop, connectors: ConnectorControl,
                 settings: DiscoverySettings, router_id: str, instance: int) -> None:
        self.loop = loop
        self.connectors_of = connectors
        self.settings = settings
        self.table = PeerTable(group=settings.group, router_id=router_id,
                               secret=settings.secret, expiry_s=settings.expiry_s)
        self.beacon = Beacon(group=settings.group, router_id=router_id,
                             host=settings.announce_host, port=settings.announce_port,
                             instance=instance, clients=settings.clients).encode(settings.secret)
        self.connectors: dict[str, Connector] = {}
        self.sent = 0
        self._logged: set[Ignored] = set()
        self._next_deadline = 0.0
        self.sock = self._open()
        loop.add(self.sock.fileno(), select.EPOLLIN, self._readable)

    def next_deadline(self) -> float | None:
        return self._next_deadline

    def _open(self) -> socket.socket:
        s = self.settings
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(("", s.port))
            interface = socket.inet_aton(s.interface)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                            socket.inet_aton(s.address) + interface)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, interface)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, s.ttl)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        log.info("Peer group %s: announcing %s:%d on %s:%d via %s", s.group, s.announce_host,
                 s.announce_port, s.address, s.port, s.interface)
        return sock

    def _readable(self, _fd: int, _mask: int) -> None:
        """Read every datagram waiting; peers newly heard get a connector."""
        now = self.loop.clock()
        changed = False
        while True:
            try:
                data = self.sock.recv(MAX_BEACON + 1)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                log.warning("Peer group %s: receive failed: %s", self.settings.group, exc)
                break
            try:
                beacon = self.table.heard(data, now)
            except BeaconError as error:
                if error.reason is not Ignored.OWN and error.reason not in self._logged:
                    self._logged.add(error.reason)
                    log.info("Peer group %s: ignoring a beacon (%s: %s); further ones of "
                             "this kind are counted only", self.settings.group,
                             error.reason.value, error)
                continue
            if beacon is not None:
                log.info("Peer group %s: peer %s at %s:%d", self.settings.group,
                         beacon.router_id, beacon.host, beacon.port)
                changed = True
        if changed:
            self._reconcile()

    def tick(self, now: float) -> None:
        """Announce this router, forget peers gone quiet, let their connectors go."""
        if self.loop.stopping:
            self._next_deadline = now + self.settings.interval_s
            return
        with contextlib.suppress(OSError):
            self.sock.sendto(self.beacon, (self.settings.address, self.settings.port))
            self.sent += 1
        self._next_deadline = now + self.settings.interval_s
        for beacon in self.table.expire(now):
            log.info("Peer group %s: peer %s gone (no beacon for %g s)", self.settings.group,
                     beacon.router_id, self.settings.expiry_s)
        self._reconcile()

    def _reconcile(self) -> None:
        wanted = {b.router_id: b for b in self.table.to_connect()}
        for router_id, beacon in wanted.items():
            connector = self.connectors.get(router_id)
            if connector is not None and connector.failover.current.port == beacon.port \
                    and connector.failover.current.host == beacon.host:
                continue
            if connector is not None:
                self.connectors_of.remove(connector)
            # Not a connector of the conf: management shows no section for it.
            settings = attrs.evolve(connector_settings(conf.ConnectorSection(
                name=f"discovery/{router_id}", host=beacon.host, port=str(beacon.port),
                role=Role.INTER_ROUTER)), reconnect=PEER_RECONNECT, section=None)
            self.connectors[router_id] = self.connectors_of.add(settings)
        for router_id, connector in list(self.connectors.items()):
            if router_id not in wanted and connector.conn is None:
                self.connectors_of.remove(connector)
                del self.connectors[router_id]

    def close(self) -> None:
        self.loop.remove(self.sock.fileno())
        with contextlib.suppress(OSError):
            self.sock.close()


class PeerGroup:
    """The peer group this router may join: a part of the loop from the start,
    with work once ``join`` has opened the group's socket.

    Args:
        loop: where the group's socket is watched.
        connectors: where the connectors to its peers are added.
    """

    def __init__(self, loop: EventLoop, connectors: ConnectorControl) -> None:
        self.loop = loop
        self.connectors = connectors
        #: The group joined, if any.
        self.joined: PeerDiscovery | None = None

    def join(self, settings: DiscoverySettings, router_id: str, instance: int) -> None:
        """Announce this router to a peer group and connect to its peers
        (raises OSError when the multicast socket cannot be set up)."""
        self.joined = PeerDiscovery(self.loop, self.connectors, settings, router_id, instance)

    def next_deadline(self) -> float | None:
        return None if self.joined is None else self.joined.next_deadline()

    def tick(self, now: float) -> None:
        if self.joined is not None:
            self.joined.tick(now)

    def close(self) -> None:
        if self.joined is not None:
            self.joined.close()
