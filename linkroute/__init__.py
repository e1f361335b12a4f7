"""Link routes as a domain of their own: their specs, matching attaches to
them, where a link-routed attach goes, and the life of the pair of links
that results, as functions and a transition table.

Which router does what with them (its table, advertising keys, turning a
pair's life into effects) is ``router.core.linkrouting``'s, which uses this
package; the per-delivery relay is the adapter's.  Must not import proton,
lark or the router.
"""

from linkroute.attach import (
    EXPIRATION_REFUSED,
    NO_ROUTE,
    Refusal,
    ToContainer,
    ToRouter,
    client_address,
    external_address,
    route_attach,
    routed_name,
)
from linkroute.pairing import (
    ROUTED_LINK_LOST,
    ROUTED_LINK_LOST_DESCRIPTION,
    TRANSITIONS,
    Answer,
    AnswerNear,
    Detach,
    DetachSide,
    PairAction,
    PairEvent,
    PairState,
    RoutedLink,
    Side,
)
from linkroute.spec import LinkRouteError, LinkRouteSpec
from linkroute.table import (
    LINK_ROUTE_HINT,
    LinkRoute,
    LinkRouteTable,
    RouteEntry,
    key_pattern,
    route_key,
)

__all__ = [
    "EXPIRATION_REFUSED",
    "LINK_ROUTE_HINT",
    "NO_ROUTE",
    "ROUTED_LINK_LOST",
    "ROUTED_LINK_LOST_DESCRIPTION",
    "TRANSITIONS",
    "Answer",
    "AnswerNear",
    "Detach",
    "DetachSide",
    "LinkRoute",
    "LinkRouteError",
    "LinkRouteSpec",
    "LinkRouteTable",
    "PairAction",
    "PairEvent",
    "PairState",
    "Refusal",
    "RouteEntry",
    "RoutedLink",
    "Side",
    "ToContainer",
    "ToRouter",
    "client_address",
    "external_address",
    "key_pattern",
    "route_attach",
    "route_key",
    "routed_name",
]
