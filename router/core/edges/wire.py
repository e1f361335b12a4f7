"""The wire conventions of edge routers (docs/networks.md#edge-routers):
the addresses and capabilities of an edge's links, and the bodies of the
address-tracking, heartbeat and link-route lookup messages, as qdrouterd
has them, so that edges and interiors of either kind work together.

Pure: values and codecs only.
"""

from __future__ import annotations

import logging
from typing import Final

from router.core.amqp import (
    APPLICATION_PROPERTIES,
    COMPACT,
    HEADER,
    PROPERTIES,
    VALUE,
    Int,
    PeerProtocolError,
    UInt,
    encode_section,
    split_sections,
)
from router.core.records import AddressRecord

log = logging.getLogger(__name__)

#: Terminus capability of an edge's downlink.
EDGE_DOWNLINK: Final = "qd.router-edge-downlink"
#: Where an edge receives the interior's address-tracking answers from.
TRACKING_ADDRESS: Final = "_$qd.edge_addr_tracking"
#: Where an edge sends its heartbeats.
HEARTBEAT_ADDRESS: Final = "_$qd.edge_heartbeat"
#: Where an edge asks whether an address is link-routed.
LOOKUP_ADDRESS: Final = "_$qd.addr_lookup"
#: The record of "beyond this edge": the anonymous uplink is its destination.
EDGE_KEY: Final = "L_edge"
HEARTBEAT_INTERVAL_S: Final = 2.0
#: An interior closes an edge connection whose last heartbeat is older.
HEARTBEAT_TIMEOUT_S: Final = 8.0
#: An unanswered link-route lookup counts as "not link-routed" after this.
LOOKUP_TIMEOUT_S: Final = 3.0
MANAGEMENT_ADDRESS: Final = "$management"
CONNECTION_LINK_ROUTE: Final = "org.apache.qpid.dispatch.router.connection.linkRoute"
FALLBACK_CAPABILITY: Final = "qd.fallback"
WAYPOINT_CAPABILITY: Final = "qd.waypoint"
#: The in-process consumers (the management node) are on connection 0:
#: they are never made known beyond the router.
IN_PROCESS: Final = 0

# The link-route lookup protocol: version, opcode and statuses.
LOOKUP_VERSION: Final = 1
LOOKUP_LINK_ROUTE: Final = 1
LOOKUP_OK: Final = 0
LOOKUP_BAD_VERSION: Final = 1
LOOKUP_BAD_OPCODE: Final = 2
LOOKUP_NOT_FOUND: Final = 3
LOOKUP_INVALID: Final = 4


def encode_tracking(key: str, reachable: bool) -> bytes:
    """An address-tracking message: body ``[key, reachable]``."""
    return (encode_section(HEADER, [False], COMPACT)
            + encode_section(VALUE, [key, reachable], COMPACT))


def decode_tracking(data: bytes) -> tuple[str, bool]:
    """The key and flag of an address-tracking message.

    Raises:
        PeerProtocolError: the body is not a list of a string and a boolean.
    """
    body = split_sections(data, "address-tracking message").get(VALUE)
    if not isinstance(body, list) or len(body) != 2 or not isinstance(body[0], str) \
            or not isinstance(body[1], bool):
        raise PeerProtocolError("address-tracking message: body is not [key, boolean]")
    return body[0], body[1]


def encode_heartbeat(sequence: int) -> bytes:
    """A heartbeat: an integer body, counting up."""
    return encode_section(VALUE, Int(sequence & 0x7FFFFFFF), COMPACT)


def encode_lookup(address: str, receiving: bool, *, reply_to: str, correlation: str) -> bytes:
    """A link-route lookup request: is ``address`` link-routed for a link the
    router receives on (``receiving``, a client sender) or sends on?"""
    return b"".join((
        encode_section(HEADER, [False], COMPACT),
        encode_section(PROPERTIES, [None, None, None, None, reply_to, correlation], COMPACT),
        encode_section(APPLICATION_PROPERTIES,
                       {"version": UInt(LOOKUP_VERSION), "opcode": UInt(LOOKUP_LINK_ROUTE)},
                       COMPACT),
        encode_section(VALUE, [address, receiving], COMPACT),
    ))


def encode_proxy_request(operation: str, name: str, *, reply_to: str, correlation: str,
                         pattern: str | None = None, direction: str | None = None) -> bytes:
    """A management CREATE or DELETE of a ``connection.linkRoute`` named ``name``."""
    body: dict[str, object] = {}
    if operation == "CREATE":
        body = {"type": CONNECTION_LINK_ROUTE, "name": name, "pattern": pattern,
                "direction": direction}
    return b"".join((
        encode_section(HEADER, [False], COMPACT),
        encode_section(PROPERTIES, [None, None, MANAGEMENT_ADDRESS, None, reply_to, correlation],
                       COMPACT),
        encode_section(APPLICATION_PROPERTIES, {"operation": operation,
                                                "type": CONNECTION_LINK_ROUTE, "name": name},
                       COMPACT),
        encode_section(VALUE, body, COMPACT),
    ))


def decode_lookup_reply(data: bytes) -> tuple[object, bool, bool]:
    """The correlation id of a lookup reply and its answer: link-routed, and
    with destinations (both false unless the status is OK).

    Raises:
        PeerProtocolError: not a lookup reply.
    """
    sections = split_sections(data, "address lookup reply")
    props = sections.get(PROPERTIES)
    app = sections.get(APPLICATION_PROPERTIES)
    body = sections.get(VALUE)
    if not isinstance(props, list) or len(props) < 6 or not isinstance(app, dict):
        raise PeerProtocolError("address lookup reply: no correlation id or status")
    if app.get("status") != LOOKUP_OK:
        return props[5], False, False
    if not isinstance(body, list) or len(body) < 2 or not all(
            isinstance(v, bool) for v in body[:2]):
        raise PeerProtocolError("address lookup reply: body is not [boolean, boolean]")
    return props[5], bool(body[0]), bool(body[1])


def waypoint_capabilities(key: str, phases: tuple[int, int] | None, *,
                          incoming: bool) -> tuple[str, ...]:
    """The capabilities of an uplink link for mobile key ``key``: a fallback
    key's links are fallback links, and an address with waypoint phases has
    the links of its inner phases marked as waypoints, so that the interior
    binds them to the same phase (docs/brokers.md#phases).

    Args:
        key: the record's key (``M<phase><address>``).
        phases: the address's ingress and egress phases, when configured.
        incoming: a link the edge receives on (its consumers' way in).
    """
    if key[1] == "F":
        return (FALLBACK_CAPABILITY,)
    if phases is None or phases[1] <= 0:
        return ()
    phase = int(key[1])
    ingress, egress = phases
    if (not incoming and phase == ingress) or (incoming and phase == egress):
        return ()
    if phase < ingress or phase > egress:
        return ()
    return (f"{WAYPOINT_CAPABILITY}.{phase + (1 if incoming else 0)}",)


def mobile(record: AddressRecord) -> bool:
    """Whether ``record`` is a mobile address's (its key starts with ``M``)."""
    return record.key[0] == "M"


__all__ = [
    "CONNECTION_LINK_ROUTE",
    "EDGE_DOWNLINK",
    "EDGE_KEY",
    "FALLBACK_CAPABILITY",
    "HEARTBEAT_ADDRESS",
    "HEARTBEAT_INTERVAL_S",
    "HEARTBEAT_TIMEOUT_S",
    "IN_PROCESS",
    "LOOKUP_ADDRESS",
    "LOOKUP_BAD_OPCODE",
    "LOOKUP_BAD_VERSION",
    "LOOKUP_INVALID",
    "LOOKUP_LINK_ROUTE",
    "LOOKUP_NOT_FOUND",
    "LOOKUP_OK",
    "LOOKUP_TIMEOUT_S",
    "LOOKUP_VERSION",
    "MANAGEMENT_ADDRESS",
    "TRACKING_ADDRESS",
    "WAYPOINT_CAPABILITY",
    "decode_lookup_reply",
    "decode_tracking",
    "encode_heartbeat",
    "encode_lookup",
    "encode_proxy_request",
    "encode_tracking",
    "mobile",
    "waypoint_capabilities",
]
