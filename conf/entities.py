"""The registry of configuration entity types: section name, class, singleton, unique attributes.

Owns which sections exist and in which order they are rendered and
documented.  It must not parse or check values.
"""

from __future__ import annotations

import attrs

from conf.connections import ConnectorSection, ListenerSection
from conf.fields import Section
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
    PolicySection,
    RouterSection,
    SslProfileSection,
    VhostSection,
)

__all__ = ["ENTITY_TYPES", "ENTITY_TYPES_BY_NAME", "EntityType", "entity_type_of"]


@attrs.frozen(kw_only=True)
class EntityType:
    """One kind of section."""

    conf_name: str
    cls: type[Section]
    summary: str
    singleton: bool = False
    #: Conf names of the attributes whose values must differ between sections of this type.
    unique: tuple[str, ...] = ("name",)


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
    ),
    EntityType(
        conf_name="address",
        cls=AddressSection,
        summary="How message-routed addresses matching a prefix or pattern are treated. "
        "Exactly one of prefix and pattern is required.",
    ),
    EntityType(
        conf_name="linkRoute",
        cls=LinkRouteSection,
        summary="Attaches matching a prefix or pattern are routed to a container. "
        "Exactly one of prefix and pattern, at most one of containerId and connection.",
    ),
    EntityType(
        conf_name="autoLink",
        cls=AutoLinkSection,
        summary="A link the router attaches itself to a container, for an address. "
        "At most one of containerId and connection.",
    ),
    EntityType(
        conf_name="exchange",
        cls=ExchangeSection,
        summary="An exchange (experimental in qdrouterd): messages are routed by subject.",
    ),
    EntityType(
        conf_name="binding",
        cls=BindingSection,
        summary="A binding of an exchange: subjects matching the key go to the next hop.",
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
)

ENTITY_TYPES_BY_NAME = {entity.conf_name: entity for entity in ENTITY_TYPES}


def entity_type_of(cls: type[Section]) -> EntityType:
    """The entity type whose sections are ``cls`` instances."""
    for entity in ENTITY_TYPES:
        if entity.cls is cls:
            return entity
    raise KeyError(cls.__name__)
