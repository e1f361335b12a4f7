"""Peer-group discovery: the beacons routers announce themselves with, and
who is alive in the group.

Owns the beacon's wire format and its authentication, the table of peers
heard (with their expiry), and the rule that picks which side of a pair
opens the inter-router connection.  Pure: the adapter sends and receives
the datagrams and passes the time.

A beacon is one UDP datagram::

    b"HOPB" | version (1 byte, 1) | flags (1 byte; bit 0: signed) |
    payload length (2 bytes, big-endian) | payload | [HMAC-SHA256, 32 bytes]

The payload is UTF-8 JSON: ``{"g": group, "id": router id, "h": host,
"p": port, "i": instance, "n": [[host, port], ...]}``: the inter-router
listener peers connect to, and the ``normal`` listeners clients may use
(``n`` may be absent: none).  With
a group secret the HMAC covers everything before it; a router with a secret
takes only beacons signed with it, one without takes only unsigned ones.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import struct

import attrs

__all__ = ["MAX_BEACON", "Beacon", "BeaconError", "Ignored", "PeerTable", "connects_to"]

MAGIC = b"HOPB"
VERSION = 1
_SIGNED = 0x01
_HEADER = struct.Struct(">4sBBH")
_MAC_SIZE = 32
#: The largest datagram read as a beacon.
MAX_BEACON = 1024


class BeaconError(ValueError):
    """A datagram that is not a valid beacon for this group; ``reason`` says why."""

    def __init__(self, reason: Ignored, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class Ignored(enum.Enum):
    """Why a datagram was ignored (counted per reason)."""

    MALFORMED = "malformed"
    BAD_SIGNATURE = "bad-signature"
    OTHER_GROUP = "other-group"
    OWN = "own"


@attrs.frozen(kw_only=True)
class Beacon:
    """A router's announcement of itself to its group."""

    group: str
    router_id: str
    host: str
    port: int
    instance: int = 0
    #: The router's listeners for clients (role ``normal``): (host, port).
    clients: tuple[tuple[str, int], ...] = ()

    def encode(self, secret: bytes | None = None) -> bytes:
        fields: dict[str, object] = {"g": self.group, "id": self.router_id, "h": self.host,
                                     "p": self.port, "i": self.instance}
        if self.clients:
            fields["n"] = [[host, port] for host, port in self.clients]
        payload = json.dumps(fields, separators=(",", ":")).encode()
        head = _HEADER.pack(MAGIC, VERSION, _SIGNED if secret else 0, len(payload))
        data = head + payload
        if secret:
            data += hmac.new(secret, data, hashlib.sha256).digest()
        return data

    @classmethod
    def decode(cls, data: bytes, secret: bytes | None = None) -> Beacon:
        """The beacon in ``data``.

        Raises:
            BeaconError: not a beacon, a bad or missing signature, or bad fields.
        """
        if len(data) < _HEADER.size or len(data) > MAX_BEACON:
            raise BeaconError(Ignored.MALFORMED, f"{len(data)} bytes is no beacon")
        magic, version, flags, length = _HEADER.unpack_from(data)
        if magic != MAGIC or version != VERSION:
            raise BeaconError(Ignored.MALFORMED, "not a Hop beacon")
        signed = bool(flags & _SIGNED)
        end = _HEADER.size + length
        if len(data) != end + (_MAC_SIZE if signed else 0):
            raise BeaconError(Ignored.MALFORMED, "length does not match")
        if signed != bool(secret):
            raise BeaconError(Ignored.BAD_SIGNATURE,
                              "signed beacon, no group secret here" if signed
                              else "unsigned beacon for a group with a secret")
        if secret and not hmac.compare_digest(
                data[end:], hmac.new(secret, data[:end], hashlib.sha256).digest()):
            raise BeaconError(Ignored.BAD_SIGNATURE, "the signature does not match")
        try:
            fields = json.loads(data[_HEADER.size:end].decode())
        except (UnicodeDecodeError, ValueError):
            raise BeaconError(Ignored.MALFORMED, "payload is not JSON") from None
        if not isinstance(fields, dict):
            raise BeaconError(Ignored.MALFORMED, "payload is not a map")
        group, router_id, host = fields.get("g"), fields.get("id"), fields.get("h")
        port, instance = fields.get("p"), fields.get("i", 0)
        if not all(isinstance(v, str) and v for v in (group, router_id, host)):
            raise BeaconError(Ignored.MALFORMED, "group, id and host must be text")
        if not _is_port(port):
            raise BeaconError(Ignored.MALFORMED, "bad port")
        if not isinstance(instance, int) or isinstance(instance, bool):
            raise BeaconError(Ignored.MALFORMED, "bad instance")
        assert isinstance(group, str) and isinstance(router_id, str) and isinstance(host, str)
        assert isinstance(port, int)
        return cls(group=group, router_id=router_id, host=host, port=port, instance=instance,
                   clients=_clients(fields.get("n", [])))


def _is_port(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def _clients(value: object) -> tuple[tuple[str, int], ...]:
    """The ``n`` field: a list of [host, port] pairs."""
    if not isinstance(value, list):
        raise BeaconError(Ignored.MALFORMED, "client listeners must be a list")
    clients: list[tuple[str, int]] = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
                and item[0] and _is_port(item[1])):
            raise BeaconError(Ignored.MALFORMED, "a client listener must be [host, port]")
        clients.append((item[0], item[1]))
    return tuple(clients)


def connects_to(own_id: str, peer_id: str) -> bool:
    """Whether this router opens the connection of the pair: exactly one side
    does, the one whose id sorts first."""
    return own_id < peer_id


@attrs.define
class _Peer:
    beacon: Beacon
    last_heard: float


class PeerTable:
    """The live peers of one group, as their beacons say.

    Args:
        group: the group this router belongs to.
        router_id: this router's id (its own beacons are ignored).
        secret: the group secret, if any.
        expiry_s: a peer unheard for this long is gone.
    """

    def __init__(self, *, group: str, router_id: str, secret: bytes | None,
                 expiry_s: float) -> None:
        self.group = group
        self.router_id = router_id
        self.secret = secret
        self.expiry_s = expiry_s
        self.peers: dict[str, _Peer] = {}
        self.ignored: dict[Ignored, int] = dict.fromkeys(Ignored, 0)

    def heard(self, data: bytes, now: float) -> Beacon | None:
        """A datagram arrived; returns the beacon of a peer newly (or again)
        live, or a changed one, else None.

        Raises:
            BeaconError: the datagram is ignored (and counted) for ``reason``.
        """
        try:
            beacon = Beacon.decode(data, self.secret)
            if beacon.group != self.group:
                raise BeaconError(Ignored.OTHER_GROUP, f"group {beacon.group!r}")
            if beacon.router_id == self.router_id:
                raise BeaconError(Ignored.OWN, "own beacon")
        except BeaconError as error:
            self.ignored[error.reason] += 1
            raise
        known = self.peers.get(beacon.router_id)
        self.peers[beacon.router_id] = _Peer(beacon, now)
        if known is None or known.beacon != beacon:
            return beacon
        return None

    def expire(self, now: float) -> list[Beacon]:
        """The peers unheard for ``expiry_s``, now forgotten."""
        gone = [p.beacon for p in self.peers.values() if now - p.last_heard >= self.expiry_s]
        for beacon in gone:
            del self.peers[beacon.router_id]
        return gone

    def to_connect(self) -> list[Beacon]:
        """The live peers this side opens the connection to."""
        return [p.beacon for p in self.peers.values()
                if connects_to(self.router_id, p.beacon.router_id)]
