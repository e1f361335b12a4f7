"""Per-listener and per-connector settings the adapter needs, built by the
CLI from the conf."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
from proton import SASL

import conf
from router.adapter.connections.tls import SecretError, TlsError, TlsProfile, secret_value
from router.core import Role
from router.core.policy import UNLIMITED, AddressPatterns, GroupSettings, Vhost
from router.core.reconnect import Endpoint, ReconnectPolicy, parse_failover_urls

#: The most sessions a connection may have (AMQP 1.0 section 2.7.1: channel
#: numbers are 16-bit; qdrouterd caps maxSessions at 32768).
MAX_SESSIONS = 32768


class SaslError(Exception):
    """A SASL setting that cannot be used (exit status 1 at start-up)."""


#: The name of a worker's listener and connectors for its sibling workers
#: (docs/scaling.md#workers): their connections are the router's own, not
#: listed by management.
MESH_NAME: Final = "worker-mesh"
#: The settings the router serves its own TCP bridges' AMQP clients with
#: (docs/tcp.md#across-the-network): hidden from management and policy.
TCP_ADAPTOR_NAME: Final = "tcp-adaptor"


def internal(name: str | None) -> bool:
    """Whether a listener or connector of this name joins a router's workers."""
    return name is not None and name.startswith(MESH_NAME)


@attrs.frozen(kw_only=True)
class ConnectionSettings:
    """What a listener's and a connector's connections have alike.

    Made from a ``listener`` or ``connector`` section, whose schema holds
    the defaults: no field has one here.
    """

    name: str | None
    host: str
    port: int
    role: Role
    cost: int
    sasl_mechanisms: str
    idle_timeout_s: int
    initial_handshake_timeout_s: int
    max_frame_size: int
    #: Sessions per connection, 1 to ``MAX_SESSIONS``.
    max_sessions: int
    max_session_frames: int
    link_capacity: int
    strip_in: bool
    strip_out: bool
    #: The message fields its connections log (``messageLoggingComponents``,
    #: docs/operations.md#message-logging); empty: none.
    logged_fields: tuple[str, ...]
    #: Peers to try in order (a connector), or announced to clients in OPEN
    #: (a listener's ``failover-server-list``).
    failover: tuple[Endpoint, ...]
    #: The proton SSL domain (``router.adapter.connections.tls``) when there is an sslProfile.
    tls: Any
    #: The vhost whose policy applies to its connections (``policyVhost``).
    policy_vhost: str | None
    #: The conf section these settings came from (shown by management).
    section: Any
    #: Its sslProfile did not load and ``hopd --tls-errors log`` let the
    #: router start (docs/security.md#tls): a listener closes every
    #: connection it accepts, a connector fails every attempt, saying this.
    #: None: it serves.
    refused: str | None = None
    #: The profile's caCertFile is what did not load (qdrouterd logs that
    #: case as "SSL CA configuration failed").
    refused_ca: bool = False


@attrs.frozen(kw_only=True)
class AuthServiceSettings:
    """An ``authServicePlugin``, checked (``auth_service_settings``): where a
    listener's SASL is relayed (docs/security.md#delegated-authentication)."""

    name: str
    host: str
    port: int
    #: The hostname sent in the service's ``sasl-init`` (``realm``; None:
    #: none is sent).
    realm: str | None
    #: TLS to the service (its sslProfile's client domain, the service's
    #: name checked against ``host``), or None.
    tls: Any = None


@attrs.frozen(kw_only=True)
class ListenerSettings(ConnectionSettings):
    """What one listener binds to and gives the connections it accepts
    (``listener_settings``)."""

    authenticate_peer: bool
    require_encryption: bool
    #: PLAIN and the like on connections without TLS.
    allow_insecure_mechanisms: bool
    #: Cyrus SASL configuration (router ``saslConfigDir``/``saslConfigName``).
    sasl_config_dir: str | None
    sasl_config_name: str
    #: An HTTP listener (``http: yes``) serving ``/metrics`` and ``/healthz``,
    #: and AMQP over WebSockets unless ``websockets: no``.
    http: bool
    metrics: bool
    healthz: bool
    websockets: bool
    #: The web console and its JSON endpoint (``console``).
    console: bool
    #: The folder of files it serves (``httpRootDir``), or None.
    http_root_dir: str | None
    #: An HTTP listener's TLS (its sslProfile; None: plain HTTP only), and
    #: whether plain HTTP is refused (``requireSsl``).
    http_tls: ssl.SSLContext | None
    require_ssl: bool
    #: Addresses on its connections live in their vhost's namespace
    #: (docs/routing.md#multi-tenant-listeners).
    multi_tenant: bool
    #: Where its SASL is relayed (``saslPlugin``), or None.
    auth_service: AuthServiceSettings | None = None


@attrs.frozen(kw_only=True)
class ConnectorSettings(ConnectionSettings):
    """Where one connector connects and what its connection uses
    (``connector_settings``)."""

    # Reconnect delays (docs/networks.md#connectors-back-off-and-failover):
    # after an attempt that never opened, and after an established connection
    # dropped.
    retry_failed_s: float
    retry_dropped_s: float
    # The back-off when any reconnect option is set (None: qdrouterd's delays).
    reconnect: ReconnectPolicy | None
    #: SASL credentials the connector authenticates with.
    sasl_username: str | None
    sasl_password: str | None


def _connection_settings(section: conf.ListenerSection | conf.ConnectorSection
                         ) -> dict[str, Any]:
    """What listeners and connectors configure alike; inter-router and edge
    connections never strip annotations (docs/routing.md#message-annotations)."""
    strip = section.strip_annotations.value
    role = section.role
    if role in (Role.INTER_ROUTER, Role.EDGE):
        strip = "no"
    return {
        "name": section.name,
        "port": conf.port_number(section.port),
        "role": role,
        "cost": section.cost,
        "sasl_mechanisms": section.sasl_mechanisms or "ANONYMOUS",
        "idle_timeout_s": section.idle_timeout_seconds,
        "max_frame_size": section.max_frame_size,
        # 0, or more than AMQP's channel numbers allow, means as many as allowed.
        "max_sessions": section.max_sessions if 0 < section.max_sessions <= MAX_SESSIONS
        else MAX_SESSIONS,
        "policy_vhost": section.policy_vhost,
        "max_session_frames": section.max_session_frames,
        "link_capacity": section.credit_window,
        "strip_in": strip in ("in", "both"),
        "strip_out": strip in ("out", "both"),
        "logged_fields": conf.logged_fields(section.message_logging_components),
        "section": section,
    }


def _profile(section: conf.ListenerSection | conf.ConnectorSection,
             profiles: Mapping[str, TlsProfile] | None) -> TlsProfile | None:
    if section.ssl_profile is None:
        return None
    profile = (profiles or {}).get(section.ssl_profile)
    if profile is None:
        raise TlsError(f"no sslProfile named {section.ssl_profile!r}")
    return profile


def auth_service_settings(section: conf.AuthServicePluginSection,
                          profiles: Mapping[str, TlsProfile] | None = None
                          ) -> AuthServiceSettings:
    """The adapter's settings for an ``authServicePlugin`` section.

    Raises:
        TlsError: an unknown sslProfile.
    """
    endpoint = section.endpoint()
    assert endpoint is not None, "the conf refuses a plugin without host or authService"
    host, port = endpoint
    tls = None
    if section.ssl_profile is not None:
        profile = (profiles or {}).get(section.ssl_profile)
        if profile is None:
            raise TlsError(f"no sslProfile named {section.ssl_profile!r}")
        tls = profile.client_domain(verify_hostname=True)
    return AuthServiceSettings(name=section.name or f"{host}:{port}", host=host, port=port,
                               realm=section.realm, tls=tls)


def listener_settings(section: conf.ListenerSection,
                      profiles: Mapping[str, TlsProfile] | None = None,
                      router: conf.RouterSection | None = None,
                      plugins: Mapping[str, conf.AuthServicePluginSection] | None = None
                      ) -> ListenerSettings:
    """The adapter's settings for a ``listener`` section; ``profiles`` are
    the router's checked sslProfiles, ``router`` the router section whose
    SASL configuration applies (None: a default one), ``plugins`` the
    ``authServicePlugin`` sections by name.

    Raises:
        TlsError: an unknown profile, ``requireSsl`` without one, or client
            certificates asked for with no CA to check them.
        SaslError: a mechanism this build of proton cannot serve, or a
            ``saslPlugin`` that names no plugin.
    """
    profile = _profile(section, profiles)
    tls = None
    http = section.http or section.http_root_dir is not None
    http_tls = None
    if profile is not None and http:
        http_tls = profile.http_context(verify_client=section.authenticate_peer)
    if profile is not None:
        mechanisms = (section.sasl_mechanisms or "").split()
        tls = profile.server_domain(
            verify_client=section.authenticate_peer and "EXTERNAL" in mechanisms,
            require_tls=section.require_ssl)
    elif section.require_ssl:
        raise TlsError(f"listener {section.name or section.port}: requireSsl needs an "
                       "sslProfile")
    mechanisms = (section.sasl_mechanisms or "ANONYMOUS").split()
    needs_cyrus = sorted(set(mechanisms) - {"ANONYMOUS", "EXTERNAL"})
    auth_service = None
    if section.sasl_plugin is not None:
        plugin = (plugins or {}).get(section.sasl_plugin)
        if plugin is None:
            raise SaslError(f"listener {section.name or section.port}: no authServicePlugin "
                            f"named {section.sasl_plugin!r}")
        auth_service = auth_service_settings(plugin, profiles)
        needs_cyrus = []  # the service authenticates, not this router's SASL library
    if needs_cyrus and not SASL.extended():
        raise SaslError(
            f"listener {section.name or section.port}: SASL {' '.join(needs_cyrus)} needs "
            "python-qpid-proton built with Cyrus SASL (install libsasl2-dev and pkg-config, "
            "then reinstall python-qpid-proton from source)")
    if router is None:
        router = conf.RouterSection()
    return ListenerSettings(
        tls=tls,
        allow_insecure_mechanisms=section.allow_insecure_mechanisms,
        sasl_config_dir=router.sasl_config_dir,
        sasl_config_name=router.sasl_config_name,
        host=section.host or "0.0.0.0",
        authenticate_peer=section.authenticate_peer,
        require_encryption=section.require_encryption,
        initial_handshake_timeout_s=conf.DEFAULT_HANDSHAKE_TIMEOUT_S
        if section.initial_handshake_timeout_seconds is None
        else section.initial_handshake_timeout_seconds,
        failover=tuple(parse_failover_urls(section.failover_urls or "")),
        # An httpRootDir makes the listener speak HTTP, as in qdrouterd.
        http=http,
        http_tls=http_tls,
        require_ssl=section.require_ssl,
        metrics=section.metrics,
        healthz=section.healthz,
        websockets=section.websockets,
        console=section.console,
        http_root_dir=section.http_root_dir,
        multi_tenant=section.multi_tenant,
        auth_service=auth_service,
        **_connection_settings(section),
    )


def connector_settings(section: conf.ConnectorSection,
                       profiles: Mapping[str, TlsProfile] | None = None) -> ConnectorSettings:
    """The adapter's settings for a ``connector`` section.

    Raises:
        TlsError: an unknown sslProfile.
        SaslError: a saslPassword that cannot be read.
    """
    profile = _profile(section, profiles)
    tls = None if profile is None else profile.client_domain(
        verify_hostname=section.verify_hostname)
    options = (section.initial_reconnect_delay, section.max_reconnect_delay,
               section.use_exponential_back_off, section.back_off_multiplier,
               section.max_reconnect_attempts)
    policy = None
    if any(option is not None for option in options):
        default = ReconnectPolicy()
        policy = ReconnectPolicy(
            initial_s=default.initial_s if section.initial_reconnect_delay is None
            else section.initial_reconnect_delay / 1000.0,
            max_s=default.max_s if section.max_reconnect_delay is None
            else section.max_reconnect_delay / 1000.0,
            exponential=default.exponential if section.use_exponential_back_off is None
            else section.use_exponential_back_off,
            multiplier=section.back_off_multiplier or default.multiplier,
            max_attempts=section.max_reconnect_attempts or 0)
    failover = tuple(parse_failover_urls(section.failover_urls or ""))
    password = None
    if section.sasl_password is not None:
        try:
            password = secret_value(section.sasl_password)
        except SecretError as exc:
            raise SaslError(f"connector {section.name or section.host}: saslPassword: "
                            f"{exc}") from None
    settings = _connection_settings(section)
    if section.sasl_username is not None and section.sasl_mechanisms is None:
        settings["sasl_mechanisms"] = "PLAIN"
    return ConnectorSettings(host=section.host, reconnect=policy, failover=failover, tls=tls,
                             retry_failed_s=conf.RETRY_FAILED_S,
                             retry_dropped_s=conf.RETRY_DROPPED_S,
                             # A connector has no initialHandshakeTimeoutSeconds (nor
                             # has qdrouterd's): 0, none.
                             initial_handshake_timeout_s=0,
                             sasl_username=section.sasl_username, sasl_password=password,
                             **settings)


def _group_settings(group: conf.UserGroupSection) -> GroupSettings:
    """The policy's view of one user group.  As in qdrouterd's code, 0 means
    no limit for sessions, senders and receivers, and the listener's for the
    frame size and the session window."""
    def limit(value: int | None) -> int:
        return UNLIMITED if value is None else value

    return GroupSettings(
        users=frozenset(group.users or ()),
        remote_hosts=group.remote_hosts or (),
        max_connections_per_user=group.max_connections_per_user,
        max_connections_per_host=group.max_connections_per_host,
        max_message_size=group.max_message_size,
        max_sessions=group.max_sessions or UNLIMITED,
        max_senders=group.max_senders or UNLIMITED,
        max_receivers=group.max_receivers or UNLIMITED,
        max_frame_size=group.max_frame_size or None,
        max_session_window=group.max_session_window or None,
        allow_dynamic_source=group.allow_dynamic_source,
        allow_anonymous_sender=group.allow_anonymous_sender,
        allow_admin_status_update=group.allow_admin_status_update,
        allow_user_id_proxy=group.allow_user_id_proxy,
        allow_waypoint_links=group.allow_waypoint_links,
        allow_fallback_links=group.allow_fallback_links,
        allow_dynamic_link_routes=group.allow_dynamic_link_routes,
        sources=group.sources,
        targets=group.targets,
        source_patterns=None if group.source_pattern is None
        else AddressPatterns.of(group.source_pattern),
        target_patterns=None if group.target_pattern is None
        else AddressPatterns.of(group.target_pattern),
        management=group.management.value if group.management is not None else None,
    )


def vhost_from_section(section: conf.VhostSection,
                       warn: Callable[..., None] | None = None) -> Vhost:
    """The policy's ``Vhost`` for a ``vhost`` section (conf file, policyDir
    or management), whose groups the conf checked; ``warn`` is told of group
    settings Hop accepts and does not apply.

    Raises:
        conf.ConfError: a group that does not fit its declaration, in a
            section the conf loader did not make.
    """
    groups = {}
    for name, group in section.user_groups().items():
        groups[name] = _group_settings(group)
        written = (section.groups or {})[name]
        assert isinstance(written, dict)
        for key, reason in conf.ignored_group_settings(written):
            if warn is not None:
                warn("vhost %r group %r: %s is ignored: %s", section.hostname, name, key, reason)
    aliases = tuple(a.strip() for a in (section.aliases or "").split(",") if a.strip())
    return Vhost(hostname=section.hostname, aliases=aliases,
                 max_connections=section.max_connections,
                 max_connections_per_user=section.max_connections_per_user,
                 max_connections_per_host=section.max_connections_per_host,
                 allow_unknown_user=section.allow_unknown_user,
                 max_message_size=section.max_message_size, groups=groups)
