"""The routing sections: address, linkRoute, autoLink, exchange, binding.

What they do: docs/routing.md#addresses, docs/brokers.md#link-routes,
docs/brokers.md#waypoints-and-auto-links; docs/routing.md#exchanges.

Owns the attributes of these sections and their conversion to and from the
domain specs (``AddressSpec``, ``LinkRouteSpec``, ``AutoLinkSpec``,
``ExchangeSpec``, ``BindingSpec``).  The semantic rules (prefix xor
pattern, phases, connection xor containerId) are
the specs' own: this module must not repeat them, only carry their errors.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from addressing import (
    MAX_PHASE,
    MAX_PRIORITY,
    AddressSpec,
    BindingSpec,
    Direction,
    Distribution,
    ExchangeSpec,
    MatchMethod,
)
from autolink import AutoLinkSpec
from conf.fields import Section, setting
from conf.types import INT32_MAX, BooleanType, EnumType, IntegerType, StringType
from linkroute import LinkRouteSpec

__all__ = [
    "AddressSection",
    "AutoLinkSection",
    "BindingSection",
    "ExchangeSection",
    "LinkDistribution",
    "LinkRouteSection",
    "MatchMethod",
]


class LinkDistribution(enum.Enum):
    """The only distribution a link route has."""

    LINK_BALANCED = "linkBalanced"


_NAME = setting("name", StringType(), "unique name of the section")
_PREFIX = setting("prefix", StringType(), "address prefix matched (exclusive with pattern)")
_PATTERN = setting(
    "pattern",
    StringType(),
    "wildcard pattern matched: . separated words, * one word, # any words",
)
_PHASE = IntegerType(0, MAX_PHASE)
_DIRECTION = setting(
    "direction", EnumType(Direction), "in: into the router, out: out of it", aliases=("dir",)
)
_CONTAINER_ID = setting("containerId", StringType(), "container id of the destination connection")
_CONNECTION = setting(
    "connection", StringType(), "name of the listener or connector of the destination"
)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _field_values(instance: attrs.AttrsInstance) -> dict[str, Any]:
    """``attrs.asdict(instance, recurse=False)``, faster: a file may hold thousands of sections."""
    cls = type(instance)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(field.name for field in attrs.fields(cls))
    return {name: getattr(instance, name) for name in names}


@attrs.frozen(kw_only=True)
class AddressSection(Section):
    """An ``address`` section; the configuration is an ``AddressSpec``."""

    name: str | None = attrs.field(default=None, metadata=_NAME)
    prefix: str | None = attrs.field(default=None, metadata=_PREFIX)
    pattern: str | None = attrs.field(default=None, metadata=_PATTERN)
    distribution: Distribution = attrs.field(
        default=Distribution.BALANCED,
        metadata=setting("distribution", EnumType(Distribution), "how messages are spread"),
    )
    waypoint: bool = attrs.field(
        default=False,
        metadata=setting("waypoint", BooleanType(), "shorthand for ingress phase 0, egress 1"),
    )
    ingress_phase: int | None = attrs.field(
        default=None,
        metadata=setting("ingressPhase", _PHASE, "phase of messages entering", default_doc="0"),
    )
    egress_phase: int | None = attrs.field(
        default=None,
        metadata=setting(
            "egressPhase",
            _PHASE,
            "phase consumers receive from",
            default_doc="1 for a waypoint, else 0",
        ),
    )
    priority: int | None = attrs.field(
        default=None,
        metadata=setting(
            "priority",
            IntegerType(0, MAX_PRIORITY),
            "inter-router priority of its messages",
            default_doc="the message's",
        ),
    )
    enable_fallback: bool = attrs.field(
        default=False,
        metadata=setting("enableFallback", BooleanType(), "create a fallback destination"),
    )
    redelivery_limit: int | None = attrs.field(
        default=None,
        metadata=setting(
            "redeliveryLimit",
            IntegerType(0, INT32_MAX),
            "times a released delivery is forwarded again to another consumer "
            "before its producer is told",
            default_doc="the router's redeliveryLimit",
        ),
    )

    def to_spec(self) -> AddressSpec:
        """The domain spec.

        Raises:
            AddressError: when the section is semantically wrong.
        """
        return AddressSpec(**_field_values(self))

    @classmethod
    def from_spec(cls, spec: AddressSpec) -> AddressSection:
        """The section that configures ``spec``."""
        return cls(**attrs.asdict(spec, recurse=False))


@attrs.frozen(kw_only=True)
class LinkRouteSection(Section):
    """A ``linkRoute`` section; the configuration is a ``LinkRouteSpec``."""

    name: str | None = attrs.field(default=None, metadata=_NAME)
    prefix: str | None = attrs.field(default=None, metadata=_PREFIX)
    pattern: str | None = attrs.field(default=None, metadata=_PATTERN)
    add_external_prefix: str | None = attrs.field(
        default=None,
        metadata=setting("addExternalPrefix", StringType(), "prefix added toward the container"),
    )
    del_external_prefix: str | None = attrs.field(
        default=None,
        metadata=setting("delExternalPrefix", StringType(), "prefix removed toward the container"),
    )
    container_id: str | None = attrs.field(default=None, metadata=_CONTAINER_ID)
    connection: str | None = attrs.field(default=None, metadata=_CONNECTION)
    distribution: LinkDistribution = attrs.field(
        default=LinkDistribution.LINK_BALANCED,
        metadata=setting("distribution", EnumType(LinkDistribution), "the only value"),
    )
    direction: Direction = attrs.field(metadata=_DIRECTION)

    def to_spec(self) -> LinkRouteSpec:
        """The domain spec.

        Raises:
            LinkRouteError: when the section is semantically wrong.
        """
        fields = _field_values(self)
        del fields["distribution"]
        return LinkRouteSpec(**fields)

    @classmethod
    def from_spec(cls, spec: LinkRouteSpec) -> LinkRouteSection:
        """The section that configures ``spec``."""
        return cls(**attrs.asdict(spec, recurse=False))


@attrs.frozen(kw_only=True)
class AutoLinkSection(Section):
    """An ``autoLink`` section; the configuration is an ``AutoLinkSpec``."""

    name: str | None = attrs.field(default=None, metadata=_NAME)
    address: str = attrs.field(
        metadata=setting(
            "address", StringType(), "router address the link is bound to", aliases=("addr",)
        ),
    )
    direction: Direction = attrs.field(metadata=_DIRECTION)
    phase: int | None = attrs.field(
        default=None,
        metadata=setting(
            "phase",
            _PHASE,
            "address phase the link is bound to",
            default_doc="out: 0, in: 1 (0 with fallback)",
        ),
    )
    container_id: str | None = attrs.field(default=None, metadata=_CONTAINER_ID)
    connection: str | None = attrs.field(default=None, metadata=_CONNECTION)
    external_address: str | None = attrs.field(
        default=None,
        metadata=setting(
            "externalAddress",
            StringType(),
            "address used toward the container",
            aliases=("externalAddr",),
            default_doc="the address",
        ),
    )
    fallback: bool = attrs.field(
        default=False,
        metadata=setting("fallback", BooleanType(), "bind as a fallback destination"),
    )

    def to_spec(self) -> AutoLinkSpec:
        """The domain spec.

        Raises:
            AutoLinkError: when the section is semantically wrong.
        """
        return AutoLinkSpec(**_field_values(self))

    @classmethod
    def from_spec(cls, spec: AutoLinkSpec) -> AutoLinkSection:
        """The section that configures ``spec``."""
        return cls(**attrs.asdict(spec, recurse=False))


@attrs.frozen(kw_only=True)
class ExchangeSection(Section):
    """An ``exchange`` (experimental in qdrouterd; docs/routing.md#exchanges)."""

    name: str | None = attrs.field(
        default=None, metadata=setting("name", StringType(), "name bindings refer to")
    )
    address: str = attrs.field(
        metadata=setting("address", StringType(), "address the exchange receives on")
    )
    phase: int = attrs.field(default=0, metadata=setting("phase", _PHASE, "phase of that address"))
    alternate_address: str | None = attrs.field(
        default=None,
        metadata=setting("alternateAddress", StringType(), "where unmatched messages go"),
    )
    alternate_phase: int = attrs.field(
        default=0,
        metadata=setting("alternatePhase", _PHASE, "phase of the alternate address"),
    )
    match_method: MatchMethod = attrs.field(
        default=MatchMethod.AMQP,
        metadata=setting(
            "matchMethod",
            EnumType(MatchMethod),
            "amqp: . separated with * and #; mqtt: / separated with + and #",
        ),
    )

    def to_spec(self) -> ExchangeSpec:
        """The domain spec.

        Raises:
            AddressError: when the section is semantically wrong (no name).
        """
        values = _field_values(self)
        values["name"] = self.name or ""
        return ExchangeSpec(**values)

    @classmethod
    def from_spec(cls, spec: ExchangeSpec) -> ExchangeSection:
        """The section that configures ``spec``."""
        return cls(**attrs.asdict(spec, recurse=False))


@attrs.frozen(kw_only=True)
class BindingSection(Section):
    """A ``binding`` of an exchange (docs/routing.md#exchanges)."""

    name: str | None = attrs.field(default=None, metadata=_NAME)
    exchange_name: str = attrs.field(
        metadata=setting("exchangeName", StringType(), "name of the exchange section")
    )
    binding_key: str | None = attrs.field(
        default=None,
        metadata=setting(
            "bindingKey",
            StringType(),
            "key matched against the subject",
            default_doc="matches everything",
        ),
    )
    next_hop_address: str = attrs.field(
        metadata=setting("nextHopAddress", StringType(), "where matching messages go")
    )
    next_hop_phase: int = attrs.field(
        default=0, metadata=setting("nextHopPhase", _PHASE, "phase of the next hop")
    )

    def to_spec(self) -> BindingSpec:
        """The domain spec.

        Raises:
            AddressError: when the section is semantically wrong.
        """
        return BindingSpec(**_field_values(self))

    @classmethod
    def from_spec(cls, spec: BindingSpec) -> BindingSection:
        """The section that configures ``spec``."""
        return cls(**attrs.asdict(spec, recurse=False))
