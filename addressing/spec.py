"""Address configuration specs: what an ``address`` section says.

Owns the typed, validated description of one configured address (prefix or
pattern, distribution, phases, priority, fallback).  It must not know how a
spec was written down (that is ``conf``'s job) nor how addresses are matched
at run time (``addressing.patterns``).
"""

from __future__ import annotations

import enum

import attrs

from addressing.errors import AddressError

MAX_PRIORITY = 9
MAX_PHASE = 9


class Distribution(enum.Enum):
    """How messages to an address are spread among its consumers."""

    MULTICAST = "multicast"
    CLOSEST = "closest"
    BALANCED = "balanced"
    UNAVAILABLE = "unavailable"


class Direction(enum.Enum):
    """Direction of a link route or auto-link, seen from the client/container.

    ``IN``: messages flow into the router (client senders, or a router
    receiver for an auto-link); ``OUT``: messages flow out of the router.
    """

    IN = "in"
    OUT = "out"


def _check_phase(
    instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None and not 0 <= value <= MAX_PHASE:
        raise AddressError(
            f"{attribute.name}: phase must be between 0 and {MAX_PHASE}, got {value}"
        )


def _check_priority(
    instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None and not 0 <= value <= MAX_PRIORITY:
        raise AddressError(f"priority must be between 0 and {MAX_PRIORITY}, got {value}")


def _check_redelivery_limit(
    instance: object, attribute: attrs.Attribute[int | None], value: int | None
) -> None:
    if value is not None and value < 0:
        raise AddressError(f"redeliveryLimit must be 0 or more, got {value}")


@attrs.frozen(kw_only=True)
class AddressSpec:
    """One configured address (qdrouterd's ``router.config.address``).

    Exactly one of ``prefix`` and ``pattern`` is set.  Phases: when neither
    is given they default to 0/1 for a waypoint and 0/0 otherwise; Hop
    defaults the missing one of a pair the same way instead of failing
    (qdrouterd refuses a lone phase, see docs/compatibility.md#phases).
    """

    name: str | None = None
    prefix: str | None = None
    pattern: str | None = None
    distribution: Distribution = Distribution.BALANCED
    waypoint: bool = False
    ingress_phase: int | None = attrs.field(default=None, validator=_check_phase)
    egress_phase: int | None = attrs.field(default=None, validator=_check_phase)
    priority: int | None = attrs.field(default=None, validator=_check_priority)
    enable_fallback: bool = False
    #: Times a released delivery is forwarded again to another destination
    #: (docs/routing.md#re-forwarding-released-deliveries); None takes the
    #: router's ``redeliveryLimit``.
    redelivery_limit: int | None = attrs.field(default=None,
                                               validator=_check_redelivery_limit)

    def __attrs_post_init__(self) -> None:
        if (self.prefix is None) == (self.pattern is None):
            if self.prefix is None:
                raise AddressError("either a 'prefix' or a 'pattern' attribute must be provided")
            raise AddressError("cannot specify both a 'prefix' and a 'pattern' attribute")
        text = self.prefix if self.prefix is not None else self.pattern
        assert text is not None
        kind = "prefix" if self.prefix is not None else "pattern"
        if not text.replace(".", "").replace("/", ""):
            raise AddressError(f"{kind} invalid - no tokens: {text!r}")
        if self.enable_fallback and (
            self.waypoint or (self.ingress_phase or 0) != 0 or (self.egress_phase or 0) != 0
        ):
            raise AddressError(
                "fallback cannot be specified with waypoint or non-zero ingress and egress phases"
            )

    @property
    def phases(self) -> tuple[int, int]:
        """The (ingress, egress) phase pair this address uses."""
        default_egress = 1 if self.waypoint else 0
        ingress = self.ingress_phase if self.ingress_phase is not None else 0
        egress = self.egress_phase if self.egress_phase is not None else default_egress
        return ingress, egress
