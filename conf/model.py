"""``RouterConf``: the whole typed configuration of one router.

Owns the shape handed to the rest of Hop: typed sections, and the domain
specs for addresses, link routes and auto-links.  It must not parse text.
"""

from __future__ import annotations

import attrs

from addressing import AddressSpec, BindingSpec, ExchangeSpec
from autolink import AutoLinkSpec
from conf.connections import ConnectorSection, ListenerSection
from conf.logs import LogSection
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
from linkroute import LinkRouteSpec

__all__ = ["RouterConf"]


@attrs.frozen(kw_only=True)
class RouterConf:
    """A validated configuration; sections keep the order of the file."""

    router: RouterSection = attrs.field(factory=RouterSection)
    listeners: tuple[ListenerSection, ...] = ()
    connectors: tuple[ConnectorSection, ...] = ()
    ssl_profiles: tuple[SslProfileSection, ...] = ()
    addresses: tuple[AddressSpec, ...] = ()
    link_routes: tuple[LinkRouteSpec, ...] = ()
    auto_links: tuple[AutoLinkSpec, ...] = ()
    logs: tuple[LogSection, ...] = ()
    policy: PolicySection = attrs.field(factory=PolicySection)
    vhosts: tuple[VhostSection, ...] = ()
    auth_service_plugins: tuple[AuthServicePluginSection, ...] = ()
    exchanges: tuple[ExchangeSpec, ...] = ()
    bindings: tuple[BindingSpec, ...] = ()
    tcp_listeners: tuple[TcpListenerSection, ...] = ()
    tcp_connectors: tuple[TcpConnectorSection, ...] = ()
    #: Deprecated ``console`` sections: kept so the file renders back, not applied.
    consoles: tuple[ConsoleSection, ...] = ()
    #: The peer group this router joins (``discovery``), if any.
    discovery: DiscoverySection | None = None
