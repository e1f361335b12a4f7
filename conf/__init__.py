"""Hop's configuration: qdrouterd.conf (and its JSON form) to a typed ``RouterConf``.

Reads the conf syntax with a lark grammar, types every attribute with the
schema declared on the section classes, builds the addressing, link-route
and auto-link specs, and reports every problem as ``file:line:col: message``
in one ``ConfError``.  Must not import the router, proton or click.
"""

from addressing import Direction, Distribution
from conf.build import build_section, role_problem, section_attributes
from conf.connections import (
    DEFAULT_HANDSHAKE_TIMEOUT_S,
    LINK_CAPACITY,
    RETRY_DROPPED_S,
    RETRY_FAILED_S,
    AddressFamily,
    ConnectorSection,
    ListenerSection,
    Role,
    StripAnnotations,
    logged_fields,
)
from conf.diagnostics import ConfError, Diagnostic
from conf.entities import ENTITY_TYPES, EntityType
from conf.groups import ManagementAccess, UserGroupSection, ignored_group_settings
from conf.loading import DEFAULT_CONF_TEXT, load, load_policy_dir, parse
from conf.logs import (
    DEFAULT_LOG_ENABLE,
    DEFAULT_LOG_OUTPUT,
    DEFAULT_LOG_SOURCE,
    DEFAULT_LOG_TIMESTAMP,
    LOG_LEVELS,
    LogModule,
    LogSection,
)
from conf.model import RouterConf
from conf.names import camel_case
from conf.render import render
from conf.routing import (
    AddressSection,
    AutoLinkSection,
    BindingSection,
    ExchangeSection,
    LinkDistribution,
    LinkRouteSection,
    MatchMethod,
)
from conf.sections import (
    AuthServicePluginSection,
    ConsoleSection,
    DiscoverySection,
    PolicySection,
    RouterMode,
    RouterSection,
    SslProfileSection,
    VhostSection,
)
from conf.tcp import TcpConnectorSection, TcpListenerSection
from conf.types import parse_boolean, port_number

__all__ = [
    "DEFAULT_CONF_TEXT",
    "DEFAULT_HANDSHAKE_TIMEOUT_S",
    "DEFAULT_LOG_ENABLE",
    "DEFAULT_LOG_OUTPUT",
    "DEFAULT_LOG_SOURCE",
    "DEFAULT_LOG_TIMESTAMP",
    "ENTITY_TYPES",
    "LINK_CAPACITY",
    "LOG_LEVELS",
    "RETRY_DROPPED_S",
    "RETRY_FAILED_S",
    "AddressFamily",
    "AddressSection",
    "AuthServicePluginSection",
    "AutoLinkSection",
    "BindingSection",
    "ConfError",
    "ConnectorSection",
    "ConsoleSection",
    "Diagnostic",
    "Direction",
    "DiscoverySection",
    "Distribution",
    "EntityType",
    "ExchangeSection",
    "LinkDistribution",
    "LinkRouteSection",
    "ListenerSection",
    "LogModule",
    "LogSection",
    "ManagementAccess",
    "MatchMethod",
    "PolicySection",
    "Role",
    "RouterConf",
    "RouterMode",
    "RouterSection",
    "SslProfileSection",
    "StripAnnotations",
    "TcpConnectorSection",
    "TcpListenerSection",
    "UserGroupSection",
    "VhostSection",
    "build_section",
    "camel_case",
    "ignored_group_settings",
    "load",
    "load_policy_dir",
    "logged_fields",
    "parse",
    "parse_boolean",
    "port_number",
    "render",
    "role_problem",
    "section_attributes",
]
