"""The routing core: pure, synchronous, no I/O.

Address records and link binding (``Router``), the per-message records the
data plane updates (``records``), settlement rules, and the message codec
that reads and rewrites router annotations on encoded messages.
"""

from router.core.effects import (
    AnswerAttach,
    AttachAutoLink,
    AttachRefused,
    BlockSender,
    CreditEffect,
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
)
from router.core.records import (
    PRIORITIES,
    AddressRecord,
    Connection,
    Fanout,
    InLink,
    OutLink,
    RemoteTarget,
    Role,
    RoutedEnd,
    RouterLink,
    Transfer,
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
    "PRIORITIES",
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
    "Transfer",
    "Unavailable",
    "UnblockSender",
    "annotate",
    "decode_annotations",
    "fold_multicast",
    "may_have_router_keys",
    "outcome_for_lost_copy",
    "scan",
    "strip_router_annotations",
    "waypoint_ordinal",
]
