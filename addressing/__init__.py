"""Addresses: specs, parsing to routing keys, prefix/pattern matching, distribution,
and the roles of the connections addresses are reached over.

Pure: imports only the standard library and attrs.
"""

from addressing.containers import RouteContainer, serves
from addressing.errors import AddressError
from addressing.exchanges import (
    Binding,
    BindingKeys,
    BindingSpec,
    Exchange,
    ExchangeSpec,
    ExchangeTable,
    MatchMethod,
    NextHop,
)
from addressing.forwarding import Consumer, choose_balanced, choose_closest
from addressing.keys import (
    AddressClass,
    RoutingKey,
    classify,
    parse_key,
    routing_key,
    strip_address,
)
from addressing.patterns import PatternTable, normalize_pattern, prefix_pattern
from addressing.priority import DEFAULT_PRIORITY, effective_priority
from addressing.roles import Role
from addressing.spec import MAX_PHASE, MAX_PRIORITY, AddressSpec, Direction, Distribution
from addressing.table import AddressTable

__all__ = [
    "DEFAULT_PRIORITY",
    "MAX_PHASE",
    "MAX_PRIORITY",
    "AddressClass",
    "AddressError",
    "AddressSpec",
    "AddressTable",
    "Binding",
    "BindingKeys",
    "BindingSpec",
    "Consumer",
    "Direction",
    "Distribution",
    "Exchange",
    "ExchangeSpec",
    "ExchangeTable",
    "MatchMethod",
    "NextHop",
    "PatternTable",
    "Role",
    "RouteContainer",
    "RoutingKey",
    "choose_balanced",
    "choose_closest",
    "classify",
    "effective_priority",
    "normalize_pattern",
    "parse_key",
    "prefix_pattern",
    "routing_key",
    "serves",
    "strip_address",
]
