"""From an AMQP address string to qdrouterd's routing key.

Owns the address-to-key rules of docs/routing.md#routing-keys (qdrouterd
``iterator.c``): stripping scheme and authority, dropping one trailing
separator, and classifying the rest into a key class (mobile, local,
topological, router, area, edge) with the mobile phase.  It also owns the
inverse, :func:`parse_key`, for keys read back from management or MAUs.

Rules:

1. :func:`classify` runs once per anonymous message, so it uses only
   ``str`` methods and never raises on address text; it raises only for a
   bad ``phase`` argument, which is a bug in the caller.
2. This module does not know about configured addresses or their
   treatment (``addressing.table``) nor about routes.
"""

from __future__ import annotations

import enum
import logging

import attrs

from addressing.errors import AddressError
from addressing.spec import MAX_PHASE

log = logging.getLogger(__name__)

AREA = "0"
"""qdrouterd's area is always ``0``."""
_AREA_SLASH = AREA + "/"

FALLBACK_PHASE = "F"
"""The phase character of a fallback destination's mobile key."""

_PHASE_CHARS = "0123456789"
_VALID_PHASES = frozenset(_PHASE_CHARS + FALLBACK_PHASE)
_SEPARATORS = "./"
_EDGE_CONNECTION = "_edge"


class AddressClass(enum.Enum):
    """The one-letter class that starts every routing key."""

    MOBILE = "M"
    LOCAL = "L"
    TOPO = "T"
    ROUTER = "R"
    AREA = "A"
    EDGE = "H"
    LINK_IN_PREFIX = "C"
    LINK_OUT_PREFIX = "D"
    LINK_IN_PATTERN = "E"
    LINK_OUT_PATTERN = "F"


@attrs.frozen(kw_only=True, repr=False)
class RoutingKey:
    """A parsed routing key: class, phase (mobile keys only) and text.

    ``key`` is the string form used as the address-table key, e.g.
    ``M0orders``, ``MFdest``, ``Ltemp.abc``, ``RRouter.B``, ``Tqdrouter``.

    Raises:
        AddressError: a mobile key without a phase ``0``-``9``/``F``, or a
            phase on any other class.
    """

    cls: AddressClass
    phase: str | None = None
    text: str

    def __attrs_post_init__(self) -> None:
        # Hand-written rather than an attrs validator: this runs once per
        # anonymous message.
        if self.cls is _MOBILE:
            if self.phase not in _VALID_PHASES:
                raise AddressError(
                    f"mobile routing key: phase must be one of 0-9 or 'F', got {self.phase!r}"
                )
        elif self.phase is not None:
            raise AddressError(
                f"{self.cls.name.lower()} routing key: phase must be None, got {self.phase!r}"
            )

    @property
    def key(self) -> str:
        """The key string, e.g. ``M0orders``."""
        # _value_ rather than .value: the latter is a slow descriptor.
        if self.phase is None:
            return self.cls._value_ + self.text
        return self.cls._value_ + self.phase + self.text

    def __repr__(self) -> str:
        return f"RoutingKey({self.key!r})"


_MOBILE = AddressClass.MOBILE


def _node_id_start(text: str) -> int:
    """Index where the node id starts; 0 for a relative address.

    Same state machine as qdrouterd's ``view_initialize``: a leading ``/``
    or the first ``:/`` after the first character starts an absolute
    address, and a following ``/`` introduces an authority that runs to the
    next ``/``.  An address that ends inside that prefix counts as relative.
    """
    if text[:1] == "/":
        if text[1:2] == "/":
            slash = text.find("/", 2)
            return slash + 1 if slash >= 0 else 0
        return 1 if len(text) > 1 else 0
    # The first character is consumed by the start state whatever it is, and
    # a ':' read right after a ':' returns to scanning rather than arming ':/'.
    colon = text.find(":", 1)
    while colon >= 0:
        if text[colon + 1 : colon + 2] == "/":
            after = text[colon + 2 : colon + 3]
            if not after:
                return 0
            if after == "/":
                slash = text.find("/", colon + 3)
                return slash + 1 if slash >= 0 else 0
            return colon + 2
        colon = text.find(":", colon + 2)
    return 0


def strip_address(text: str) -> str:
    """Remove scheme and authority, then one trailing separator.

    ``amqp://host:port/a/b`` → ``a/b``; ``amqp:/a/b`` → ``a/b``;
    ``//host/a`` → ``a``; ``/a/b`` → ``a/b``; ``a/b/`` → ``a/b``; a relative
    string is kept as is.  Never raises.

    Args:
        text: an AMQP 1.0 terminus address or a message ``to`` (AMQP 1.0
            section 3.2.4 ``address-string``).

    Returns:
        The text qdrouterd classifies and matches against configuration.
    """
    start = _node_id_start(text)
    if start:
        text = text[start:]
    if text and text[-1] in _SEPARATORS:
        text = text[:-1]
    return text


def _to_slash(text: str) -> str:
    # qdrouterd's MODE_TO_SLASH ends the view before a '/' that follows at
    # least one character, so a leading '/' is kept.
    slash = text.find("/", 1)
    return text if slash < 0 else text[:slash]


def _phase_char(phase: int, fallback: bool) -> str:
    if fallback:
        return FALLBACK_PHASE
    if 0 <= phase <= MAX_PHASE:
        return _PHASE_CHARS[phase]
    raise AddressError(f"phase must be between 0 and {MAX_PHASE}, got {phase}")


def _split(text: str, router_id: str, edge_mode: bool) -> tuple[AddressClass, str]:
    """Class and key text of a stripped address (mobile: the whole text)."""
    if text[:1] != "_":
        return _MOBILE, text
    if text.startswith("_local/"):
        return AddressClass.LOCAL, text[7:]
    if text.startswith("_topo/"):
        rest = text[6:]
        # qdrouterd accepts "all/" where the area belongs (and then needs a
        # second "all/" for broadcast): that is the _topo/all QUIRK.
        if rest.startswith("all/"):
            rest = rest[4:]
        elif rest.startswith(_AREA_SLASH):
            rest = rest[len(_AREA_SLASH) :]
        elif edge_mode:
            return AddressClass.LOCAL, _EDGE_CONNECTION
        else:
            return AddressClass.AREA, _to_slash(rest)
        if rest.startswith("all/"):
            return AddressClass.TOPO, rest[4:]
        mine = router_id + "/"
        if rest.startswith(mine):
            return AddressClass.LOCAL, rest[len(mine) :]
        if edge_mode:
            return AddressClass.LOCAL, _EDGE_CONNECTION
        return AddressClass.ROUTER, _to_slash(rest)
    if text.startswith("_edge/"):
        rest = text[6:]
        mine = router_id + "/"
        if rest.startswith(mine):
            return AddressClass.LOCAL, rest[len(mine) :]
        if edge_mode:
            return AddressClass.LOCAL, _EDGE_CONNECTION
        return AddressClass.EDGE, _to_slash(rest)
    return _MOBILE, text


def classify(
    address: str,
    *,
    router_id: str,
    phase: int = 0,
    fallback: bool = False,
    edge_mode: bool = False,
) -> RoutingKey:
    """Compute the routing key of an address (docs/routing.md#routing-keys).

    Args:
        address: the address as received (scheme/authority allowed).
        router_id: this router's id.
        phase: the mobile phase 0..9 (not used by non-mobile keys).
        fallback: use the fallback phase ``F`` instead of ``phase``.
        edge_mode: this router is an edge router: ``_topo``/``_edge``
            addresses not for this router map to ``L_edge`` (the uplink).

    Returns:
        The routing key.  ``_local/x`` → ``Lx``; ``_topo/0/all/x`` → ``Tx``
        (QUIRK kept: ``_topo/all/x`` is not broadcast); ``_topo/0/<me>/x``
        and ``_edge/<me>/x`` → ``Lx``; ``_topo/0/<other>/...`` →
        ``R<other>``; ``_topo/<area>/...`` → ``A<area>``; ``_edge/<edge>/...``
        → ``H<edge>``; anything else → ``M<phase><address>``.

    Raises:
        AddressError: ``phase`` is outside 0..9 (a caller bug).
    """
    phase_char = _phase_char(phase, fallback)
    cls, text = _split(strip_address(address), router_id, edge_mode)
    if cls is _MOBILE:
        return RoutingKey(cls=cls, phase=phase_char, text=text)
    return RoutingKey(cls=cls, text=text)


def routing_key(
    address: str,
    *,
    router_id: str,
    phase: int = 0,
    fallback: bool = False,
    edge_mode: bool = False,
) -> str:
    """``classify(...).key`` without building the record (the per-message path).

    Same arguments, result and errors as :func:`classify`.
    """
    phase_char = _phase_char(phase, fallback)
    cls, text = _split(strip_address(address), router_id, edge_mode)
    if cls is _MOBILE:
        return "M" + phase_char + text
    return cls._value_ + text


def parse_key(key: str) -> RoutingKey:
    """Parse a routing key string back into a :class:`RoutingKey`.

    Args:
        key: e.g. ``M0orders``, ``MFdest``, ``Ltemp.abc``, ``RRouter.B``,
            ``Ca.b`` (link-route prefix), as shown by management.

    Returns:
        The key's class, phase (mobile keys only) and text.

    Raises:
        AddressError: empty key, unknown class letter, or a mobile key
            without a phase character 0-9 or ``F``.
    """
    if not key:
        raise AddressError("routing key is empty")
    try:
        cls = AddressClass(key[0])
    except ValueError:
        raise AddressError(f"routing key {key!r}: unknown class {key[0]!r}") from None
    if cls is AddressClass.MOBILE:
        phase = key[1:2]
        if phase not in _VALID_PHASES:
            raise AddressError(
                f"routing key {key!r}: mobile phase must be 0-9 or 'F', got {phase!r}"
            )
        return RoutingKey(cls=cls, phase=phase, text=key[2:])
    return RoutingKey(cls=cls, text=key[1:])
