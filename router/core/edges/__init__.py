"""Edge routers (docs/networks.md#edge-routers): an edge router's uplink to an
interior router, and an interior router's side of the edges attached to it.

Owns, on an edge router (``Uplink``), which ``edge`` connection is the
active uplink (the first to open; another open one when it goes) and the
links the edge attaches on it:

- an anonymous sending link, the way up for every message bound beyond the
  edge (the ``L_edge`` record's destination);
- the downlink, a receiving link whose source is the edge's id with the
  capability ``qd.router-edge-downlink``: the edge's own ``_edge/<id>/...``
  addresses come down it;
- one receiving link per address a consumer on the edge has, so that the
  interior sees a consumer here;
- one sending link per address a producer on the edge has, a destination
  of that address only while the interior says it has destinations beyond
  this edge (it says so on the address-tracking link, messages
  ``[key, true|false]``);
- the heartbeat link, a message every two seconds;
- the link-route lookup links: a client attach on the edge that no link
  route of the edge's own serves is first looked up at the interior, and
  forwarded up the uplink when the interior has a link route for it;
- a management link: the link routes the edge's own brokers serve are made
  ``connection.linkRoute`` entities of the uplink at the interior, so that
  attaches anywhere in the network reach them.

On an interior router (``EdgeHosts``): binding an edge's downlink to the
edge's ``H<edge-id>`` key, the tracking answers each edge gets (whether
each address it produces to has a destination that is not on that edge:
the credit rule of ``AddressRecord.may_feed``, so an answer goes out
exactly when that sender's credit would change), the heartbeats it
expects, and the link-route lookups edges ask for.

The edge's side is ``uplink``, the interior's ``hosts``, and the wire
conventions both follow (addresses, capabilities, message bodies:
qdrouterd's, so that edges and interiors of either kind work together)
``wire``.  Pure: no clock, no sockets; it returns effects like the rest of
the core.
"""

from router.core.edges.hosts import EdgeHosts, EdgePeer
from router.core.edges.uplink import Uplink
from router.core.edges.wire import (
    EDGE_DOWNLINK,
    EDGE_KEY,
    HEARTBEAT_ADDRESS,
    LOOKUP_ADDRESS,
    TRACKING_ADDRESS,
    decode_lookup_reply,
    decode_tracking,
    encode_heartbeat,
    encode_lookup,
    encode_tracking,
    waypoint_capabilities,
)

__all__ = [
    "EDGE_DOWNLINK",
    "EDGE_KEY",
    "HEARTBEAT_ADDRESS",
    "LOOKUP_ADDRESS",
    "TRACKING_ADDRESS",
    "EdgeHosts",
    "EdgePeer",
    "Uplink",
    "decode_lookup_reply",
    "decode_tracking",
    "encode_heartbeat",
    "encode_lookup",
    "encode_tracking",
    "waypoint_capabilities",
]
