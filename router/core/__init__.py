"""The routing core: pure, synchronous, no I/O.

Address records and link binding (``Router``), the per-message records the
data plane updates (``records``), settlement rules, and the message codec
that reads and rewrites router annotations on encoded messages.
"""

# Connection roles are declared once, in addressing, so that conf types the
# role attribute with the same enum; the core's users find it here too.
from addressing import Role
from router.core.effects import (
    AnswerAttach,
    AttachAutoLink,
    AttachRefused,
    BlockSender,
    CreditEffect,
    DetachAutoLink,
    DetachRouted,
    Effect,
    ForwardAttach,
    IncomingAccepted,
    OutgoingAccepted,
    SendFrame,
    UnblockSender,
)
from router.core.ids import ConnectionId, LinkId, RouterId
from router.core.message import (
    AnnotationEncoder,
    MessageFormatError,
    MessageInfo,
    RouterAnnotations,
    annotate,
    decode_annotations,
    may_have_router_keys,
    scan,
    strip_router_annotations,
    user_id_of,
)
from router.core.records import (
    OUTCOME_INDEX,
    PRIORITIES,
    TALLY_KEYS,
    AddressRecord,
    Connection,
    Fanout,
    InLink,
    OutLink,
    RemoteTarget,
    RoutedEnd,
    RouterLink,
    Stream,
    Transfer,
    count_outcome,
    describe_counters,
    tally,
)
from router.core.router import (
    FALLBACK_PHASE,
    UNAVAILABLE,
    Router,
    Unavailable,
    waypoint_ordinal,
)
from router.core.settlement import LostCopy, Outcome, fold_multicast, outcome_for_lost_copy

__all__ = [
    "FALLBACK_PHASE",
    "OUTCOME_INDEX",
    "PRIORITIES",
    "TALLY_KEYS",
    "UNAVAILABLE",
    "AddressRecord",
    "AnnotationEncoder",
    "AnswerAttach",
    "AttachAutoLink",
    "AttachRefused",
    "BlockSender",
    "Connection",
    "ConnectionId",
    "CreditEffect",
    "DetachAutoLink",
    "DetachRouted",
    "Effect",
    "Fanout",
    "ForwardAttach",
    "InLink",
    "IncomingAccepted",
    "LinkId",
    "LostCopy",
    "MessageFormatError",
    "MessageInfo",
    "OutLink",
    "Outcome",
    "OutgoingAccepted",
    "RemoteTarget",
    "Role",
    "RoutedEnd",
    "Router",
    "RouterAnnotations",
    "RouterId",
    "RouterLink",
    "SendFrame",
    "Stream",
    "Transfer",
    "Unavailable",
    "UnblockSender",
    "annotate",
    "count_outcome",
    "decode_annotations",
    "describe_counters",
    "fold_multicast",
    "may_have_router_keys",
    "outcome_for_lost_copy",
    "scan",
    "strip_router_annotations",
    "tally",
    "user_id_of",
    "waypoint_ordinal",
]
