"""The registry of configuration entity types: section name, class, singleton, unique attributes.

Owns which sections exist and in which order they are rendered and
documented, and the settings written inside a section's attribute rather
than as sections of their own (a vhost's user groups).  It must not parse
or check values.
"""

from __future__ import annotations

import attrs

from autolink import FIRST_RETRY_S, RETRY_S
from conf.connections import RETRY_DROPPED_S, RETRY_FAILED_S, ConnectorSection, ListenerSection
from conf.fields import Section
from conf.groups import UserGroupSection
from conf.logs import LogSection
from conf.routing import (
    AddressSection,
    AutoLinkSection,
    BindingSection,
    ExchangeSection,
    LinkRouteSection,
)
from conf.sections import (
    AuthServicePluginSection,
    ConsoleSection,
    DiscoverySection,
    PolicySection,
    RouterSection,
    SslProfileSection,
    VhostSection,
)
from conf.tcp import TcpConnectorSection, TcpListenerSection

__all__ = [
    "ENTITY_TYPES",
    "ENTITY_TYPES_BY_NAME",
    "NESTED_TYPES",
    "NESTED_TYPES_BY_NAME",
    "EntityType",
    "NestedType",
    "entity_type_of",
]


@attrs.frozen(kw_only=True)
class EntityType:
    """One kind of section."""

    conf_name: str
    cls: type[Section]
    summary: str
    #: Paragraphs on how the section behaves, for the manual page.
    details: tuple[str, ...] = ()
    singleton: bool = False
    #: Conf names of the attributes whose values must differ between sections of this type.
    unique: tuple[str, ...] = ("name",)
    #: Why Hop accepts sections of this type but does not apply them (a
    #: warning is logged for each); None for the types Hop applies.
    ignored: str | None = None


ENTITY_TYPES: tuple[EntityType, ...] = (
    EntityType(
        conf_name="router",
        cls=RouterSection,
        summary="The router itself. At most one; when absent a standalone router with "
        "default settings is configured.",
        singleton=True,
        unique=(),
    ),
    EntityType(
        conf_name="listener",
        cls=ListenerSection,
        summary="A port on which the router accepts AMQP connections.",
    ),
    EntityType(
        conf_name="connector",
        cls=ConnectorSection,
        summary="A peer the router connects to, and reconnects to when the connection drops.",
        details=(
            f"A failed attempt is retried after {RETRY_FAILED_S:g} seconds, a connection that "
            f"was up is re-established {RETRY_DROPPED_S:g} seconds after it drops, for as long "
            "as the section exists. "
            "With role route-container the peer is a container (a broker): the link "
            "routes and auto-links whose connection names this connector, or whose "
            "containerId is the peer's container id, use it.",
        ),
    ),
    EntityType(
        conf_name="sslProfile",
        cls=SslProfileSection,
        summary="TLS settings, referred to by name from listeners, connectors and "
        "authServicePlugins.",
    ),
    EntityType(
        conf_name="authServicePlugin",
        cls=AuthServicePluginSection,
        summary="A remote AMQP service to which SASL authentication is delegated.",
        details=(
            "A listener naming it (saslPlugin) relays each client's SASL to the service: "
            "the client is offered the service's mechanisms (those the listener's "
            "saslMechanisms allow, and those that send passwords in clear only over TLS or "
            "with allowInsecureMechanisms), and is authenticated as the service's OPEN says "
            "(authenticated-identity), with the permissions of its address-authz property: "
            "the addresses it may send to and receive from, besides any vhost policy. A "
            "service that cannot be reached, or does not answer within 15 seconds, fails "
            "the client's authentication.",
        ),
    ),
    EntityType(
        conf_name="address",
        cls=AddressSection,
        summary="How message-routed addresses matching a prefix or pattern are treated. "
        "Exactly one of prefix and pattern is required.",
        details=(
            "A waypoint address (waypoint: yes, or ingressPhase and egressPhase) names two "
            "hops: producers send to its ingress phase, where out auto-links take the "
            "messages to a broker queue; in auto-links bring the queue's messages back at "
            "the egress phase, where consumers receive them. Messages wait on the broker "
            "while nobody consumes them.",
            "With enableFallback a message that no consumer can take goes to the address's "
            "fallback destinations instead (fallback auto-links, or receivers with the "
            "qd.fallback capability); a fallback in auto-link returns those messages to "
            "consumers when they come, and asks its broker for messages only while a "
            "consumer can take them.",
        ),
    ),
    EntityType(
        conf_name="linkRoute",
        cls=LinkRouteSection,
        summary="Attaches matching a prefix or pattern are routed to a container. "
        "Exactly one of prefix and pattern, at most one of containerId and connection.",
        details=(
            "A client link whose address matches (the target of a sender for direction "
            "in, the source of a receiver for direction out) is not terminated by the "
            "router: it is attached on to the container, over other routers when the "
            "container is connected elsewhere, and transfers, dispositions, credit, drain "
            "and detaches pass through unchanged. A link route is active while a "
            "route-container connection serves it, and routers that do not configure it "
            "learn it from the router that has it. With no active route an attach is "
            "refused with qd:no-route-to-dest; when the container's connection drops, "
            "routed links are detached with qd:routed-link-lost and open deliveries "
            "settled. A link route for the prefix $coordinator carries transactions to "
            "the container.",
        ),
    ),
    EntityType(
        conf_name="autoLink",
        cls=AutoLinkSection,
        summary="A link the router attaches itself to a container, for an address. "
        "At most one of containerId and connection.",
        details=(
            "An out auto-link is a consumer of its address (phase 0 by default): messages "
            "sent to the address go to the container's node. An in auto-link is a producer "
            "into its address (phase 1 by default): the container's messages reach the "
            "address's consumers anywhere in the network, and the container gets credit "
            "only while a consumer can take them. Its state (operStatus) is inactive "
            "until a connection serves it, attaching, active once the container answered "
            "with the node's address, or failed after the container detached it; a failed "
            f"auto-link is attached again after {FIRST_RETRY_S:g} seconds, then every "
            f"{RETRY_S:g}, and an auto-link "
            "whose connection drops is attached again when one serves it.",
        ),
    ),
    EntityType(
        conf_name="exchange",
        cls=ExchangeSection,
        summary="An exchange (experimental in qdrouterd): messages sent to its address are "
        "forwarded by their subject, a copy to the next hop of each binding whose key "
        "matches.",
        details=(
            "A message goes once to each distinct next hop (address and phase) of the "
            "bindings whose keys match its subject; when none does, to the alternate address "
            "if there is one; when nowhere takes it, it is dropped (released when unsettled). "
            "Copies are pre-settled: an unsettled message that went anywhere is accepted by "
            "the router. The exchange's address has a destination, and is advertised to "
            "other routers, while the exchange has a binding or an alternate. No name may be "
            "missing and no two exchanges may share an address, at any phase.",
        ),
    ),
    EntityType(
        conf_name="binding",
        cls=BindingSection,
        summary="A binding of an exchange: subjects matching the key go to the next hop.",
        details=(
            "With matchMethod amqp a key's tokens are separated by '.', '*' matches one token "
            "and '#' any number; with mqtt by '/', '+' matches one token and '#', only as the "
            "last token, any number. A binding without a key matches every subject, and a "
            "message without a subject matches no binding. An exchange may not bind one key "
            "to one next hop twice, nor a next hop that leads its messages back to it through "
            "the router's exchanges.",
        ),
    ),
    EntityType(
        conf_name="tcpListener",
        cls=TcpListenerSection,
        summary="A TCP port whose connections are carried to a service: each client's "
        "connection reaches a tcpConnector of the same address.",
        details=(
            "Each connection accepted goes to one of the address's connectors on this "
            "router, the one with the fewest open connections; a connector whose service "
            "refuses is passed over and the next one tried. While this router has no "
            "connector for the address, the connection is carried across the router "
            "network to a connector of the address on another router, in qdrouterd 1.18's "
            "stream format; until the network has one, it is held, unread (as qdrouterd "
            "1.18 did). Bytes travel both ways as they come; a side that ends its stream "
            "(half-close) ends it on the other side, and a reset is passed on as a reset "
            "(docs/tcp.md).",
        ),
    ),
    EntityType(
        conf_name="tcpConnector",
        cls=TcpConnectorSection,
        summary="A TCP service the router connects to for the connections of an address.",
        details=(
            "A connection is opened to the service for each client connection that the "
            "address's listeners give this connector; nothing is opened ahead of them.",
        ),
    ),
    EntityType(
        conf_name="log",
        cls=LogSection,
        summary="Settings of one log module; at most one section per module. "
        "Modules without a section inherit from DEFAULT.",
        unique=("name", "module"),
    ),
    EntityType(
        conf_name="policy",
        cls=PolicySection,
        summary="Global connection policy. At most one; defaults apply when absent.",
        singleton=True,
        unique=(),
    ),
    EntityType(
        conf_name="vhost",
        cls=VhostSection,
        summary="A vhost policy: limits and user groups for connections to one hostname.",
        unique=("name", "hostname"),
    ),
    EntityType(
        conf_name="discovery",
        cls=DiscoverySection,
        summary="A peer group (a Hop extension): the router announces an inter-router "
        "listener by multicast beacons and connects to the other routers it hears.",
        singleton=True,
        unique=(),
    ),
    EntityType(
        conf_name="console",
        cls=ConsoleSection,
        summary="Deprecated in qdrouterd: a proxy serving its web console.",
        ignored="deprecated in qdrouterd; Hop's console is served by listeners with "
        "http: yes (their console attribute)",
    ),
)

ENTITY_TYPES_BY_NAME = {entity.conf_name: entity for entity in ENTITY_TYPES}


@attrs.frozen(kw_only=True)
class NestedType:
    """Settings written as the values of a JSON map attribute of a section,
    declared with the same schema metadata as a section's attributes."""

    #: The name qdrouterd's management schema gives the type.
    name: str
    cls: type[Section]
    #: The section and attribute whose map values hold these settings.
    parent: str
    attribute: str
    summary: str


NESTED_TYPES: tuple[NestedType, ...] = (
    NestedType(
        name="vhostUserGroupSettings",
        cls=UserGroupSection,
        parent="vhost",
        attribute="groups",
        summary="The settings of one user group of a vhost (qdrouterd's "
        "vhostUserGroupSettings): each value of the vhost's groups map, keyed by the group's "
        "name. The names are matched as written (not normalised); an unknown name is an "
        "error. Users in no group get the group $default when the vhost has "
        "allowUnknownUser; the group $connector applies to what the peer of a connector "
        "whose policyVhost names the vhost attaches.",
    ),
)

NESTED_TYPES_BY_NAME = {nested.name: nested for nested in NESTED_TYPES}


def entity_type_of(cls: type[Section]) -> EntityType:
    """The entity type whose sections are ``cls`` instances."""
    for entity in ENTITY_TYPES:
        if entity.cls is cls:
            return entity
    raise KeyError(cls.__name__)
