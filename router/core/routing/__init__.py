"""The inter-router routing protocol core (docs/networks.md), sans-IO.

HELLO, link-state (RA/LSR/LSU) and mobile-address (MAU/MAR) exchange with
qdrouterd-compatible wire encoding, shortest paths with next hops and valid
origins, and the ``RoutingProtocol`` engine that turns inputs (connections,
decoded control messages, local address changes, ``tick(now)``) into effects.

Must not import proton, sockets, threads or the clock; the adapter owns I/O
and time and carries out the effects.
"""

from router.core.routing.codec import (
    ControlEnvelope,
    decode_control,
    decode_envelope,
    encode_control,
)
from router.core.routing.effects import (
    ALL,
    Destination,
    DuplicateRouterId,
    Effect,
    MobileAddressesChanged,
    RouterAdded,
    RouterLost,
    RoutesChanged,
    SendControl,
    SendHello,
)
from router.core.routing.errors import PeerProtocolError
from router.core.routing.linkstate import Neighbor, NodeRecord
from router.core.routing.messages import (
    AREA,
    HELLO_ADDRESS,
    MA_ALL_ADDRESS,
    PROTOCOL_VERSION,
    TOPO_ALL_ADDRESS,
    ControlMessage,
    Hello,
    LinkState,
    LinkStateRequest,
    LinkStateUpdate,
    MobileAddressRequest,
    MobileAddressUpdate,
    Opcode,
    RouterAdvertisement,
    control_address,
)
from router.core.routing.mobile import NO_HINT
from router.core.routing.paths import Route, Routes, compute_routes
from router.core.routing.protocol import TICK_INTERVAL_S, ProtocolTimers, RoutingProtocol

__all__ = [
    "ALL",
    "AREA",
    "HELLO_ADDRESS",
    "MA_ALL_ADDRESS",
    "NO_HINT",
    "PROTOCOL_VERSION",
    "TICK_INTERVAL_S",
    "TOPO_ALL_ADDRESS",
    "ControlEnvelope",
    "ControlMessage",
    "Destination",
    "DuplicateRouterId",
    "Effect",
    "Hello",
    "LinkState",
    "LinkStateRequest",
    "LinkStateUpdate",
    "MobileAddressRequest",
    "MobileAddressUpdate",
    "MobileAddressesChanged",
    "Neighbor",
    "NodeRecord",
    "Opcode",
    "PeerProtocolError",
    "ProtocolTimers",
    "Route",
    "RouterAdded",
    "RouterAdvertisement",
    "RouterLost",
    "Routes",
    "RoutesChanged",
    "RoutingProtocol",
    "SendControl",
    "SendHello",
    "compute_routes",
    "control_address",
    "decode_control",
    "decode_envelope",
    "encode_control",
]
