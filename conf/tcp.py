"""The ``tcpListener`` and ``tcpConnector`` sections (docs/tcp.md).

Owns the attributes of the two TCP bridges, as qdrouterd 1.18 documented
them: a listener takes clients' TCP connections and carries each to an
address; a connector is where an address's connections are made to a
service.  It must not open sockets or resolve host names.
"""

from __future__ import annotations

import attrs

from conf.fields import Problem, Section, setting
from conf.types import BooleanType, StringType, TcpPortType

__all__ = ["TcpConnectorSection", "TcpListenerSection"]


_NAME = setting("name", StringType(), "unique name of the bridge")
_ADDRESS = setting("address", StringType(),
                   "the address the bridge's connections travel on: listeners and "
                   "connectors of one address make a service")
_SITE_ID = setting("siteId", StringType(),
                   "a label for where the connections are handled, shown with each "
                   "connection and sent along with it")


_SSL_PROFILE = setting("sslProfile", StringType(),
                       "name of an sslProfile section: TLS between the router and "
                       "the bridge's TCP peer (a Hop extension)")


def _address_problems(address: str) -> list[Problem]:
    if not address:
        return [("address", "the address must not be empty")]
    return []


@attrs.frozen(kw_only=True)
class TcpListenerSection(Section):
    """A ``tcpListener``: clients connect here to reach the address's service."""

    name: str | None = attrs.field(default=None, metadata=_NAME)
    address: str = attrs.field(metadata=_ADDRESS)
    host: str = attrs.field(
        default="0.0.0.0",
        metadata=setting("host", StringType(),
                         "address to bind; empty means all local addresses"),
    )
    port: str = attrs.field(
        metadata=setting("port", TcpPortType(allow_zero=True),
                         "port to bind; 0 picks a free port (logged)"),
    )
    site_id: str | None = attrs.field(default=None, metadata=_SITE_ID)
    ssl_profile: str | None = attrs.field(default=None, metadata=_SSL_PROFILE)
    authenticate_peer: bool = attrs.field(
        default=False,
        metadata=setting("authenticatePeer", BooleanType(),
                         "with sslProfile, require a client certificate signed by the "
                         "profile's caCertFile"),
    )

    def problems(self) -> list[Problem]:
        problems = _address_problems(self.address)
        if self.authenticate_peer and self.ssl_profile is None:
            problems.append(("authenticatePeer", "authenticatePeer needs an sslProfile"))
        return problems


@attrs.frozen(kw_only=True)
class TcpConnectorSection(Section):
    """A ``tcpConnector``: the service that connections to the address reach."""

    name: str | None = attrs.field(default=None, metadata=_NAME)
    address: str = attrs.field(metadata=_ADDRESS)
    host: str = attrs.field(
        metadata=setting("host", StringType(), "host name or IP address of the service"),
    )
    port: str = attrs.field(
        metadata=setting("port", TcpPortType(allow_zero=False), "port of the service"),
    )
    site_id: str | None = attrs.field(default=None, metadata=_SITE_ID)
    ssl_profile: str | None = attrs.field(default=None, metadata=_SSL_PROFILE)
    verify_hostname: bool = attrs.field(
        default=True,
        metadata=setting("verifyHostname", BooleanType(),
                         "with sslProfile, check the service certificate's name against "
                         "host", aliases=("verifyHostName",)),
    )

    def problems(self) -> list[Problem]:
        problems = _address_problems(self.address)
        if not self.host:
            problems.append(("host", "a connector needs the service's host"))
        return problems
