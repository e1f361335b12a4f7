"""The ``listener`` and ``connector`` sections (docs/operations.md#sections).

Owns the attributes of the two connection-making entities, their defaults
and the checks that need only one section (openProperties refused on
router-to-router roles).  Checks against the router mode live in
``conf.build``.  It must not open sockets or resolve host names.
"""

from __future__ import annotations

import enum

import attrs

from addressing import Role
from conf.document import JsonValue
from conf.fields import Problem, Section, setting
from conf.types import (
    INT32_MAX,
    UINT32_MAX,
    BooleanType,
    EnumType,
    FloatType,
    IntegerType,
    JsonMapType,
    PortType,
    StringType,
    port_number,
)

__all__ = [
    "LINK_CAPACITY",
    "RETRY_DROPPED_S",
    "RETRY_FAILED_S",
    "AddressFamily",
    "ConnectorSection",
    "ListenerSection",
    "Role",
    "StripAnnotations",
    "logged_fields",
]

#: The credit window granted per link when ``linkCapacity`` is 0 (its default).
LINK_CAPACITY = 250
#: qdrouterd's fixed delays, in seconds, before a connector with none of the
#: reconnect options tries again: after an attempt that never opened, and
#: after a connection that was up dropped.
RETRY_FAILED_S = 5.0
RETRY_DROPPED_S = 2.0


class StripAnnotations(enum.Enum):
    """Which router message annotations are stripped on normal connections."""

    IN = "in"
    OUT = "out"
    BOTH = "both"
    NO = "no"


class AddressFamily(enum.Enum):
    """``socketAddressFamily``; like qdrouterd, only reported, the host literal decides."""

    IPV4 = "IPv4"
    IPV6 = "IPv6"


_RESERVED_PROPERTIES = frozenset(
    {"product", "version", "failover-server-list", "network-host", "port", "scheme", "hostname"}
)
_LOGGED_FIELDS = frozenset(
    {
        "message-id", "user-id", "to", "subject", "reply-to", "correlation-id", "content-type",
        "content-encoding", "absolute-expiry-time", "creation-time", "group-id",
        "group-sequence", "reply-to-group-id", "app-properties",
    }
)  # fmt: skip


def _check_property_key(key: str) -> str | None:
    """docs/operations.md#checks; Hop also reserves ``scheme`` and ``hostname``
    (qdrouterd's typo, docs/compatibility.md#configuration-errors)."""
    if not key.isascii():
        return f"openProperties keys must be ASCII, got {key!r}"
    if key in _RESERVED_PROPERTIES or key.startswith(("qd.", "x-opt-qd.")):
        return f"reserved key {key!r} is not allowed in openProperties"
    return None


def _check_logged_fields(text: str) -> str | None:
    words = [w.strip() for w in text.split(",") if w.strip()]
    if words in (["all"], ["none"]):
        return None
    for word in words:
        if word not in _LOGGED_FIELDS:
            allowed = ", ".join(sorted(_LOGGED_FIELDS))
            return f"expected 'all', 'none' or a comma list of {allowed}; got {word!r}"
    return None if words else "expected 'all', 'none' or a comma list of message fields, got ''"


def logged_fields(text: str) -> tuple[str, ...]:
    """The message fields a valid ``messageLoggingComponents`` names: every
    one for ``all``, none for ``none``."""
    words = tuple(w.strip() for w in text.split(",") if w.strip())
    if words == ("all",):
        return tuple(sorted(_LOGGED_FIELDS))
    return () if words == ("none",) else words


def _check_open_properties(role: Role, properties: dict[str, JsonValue] | None) -> list[Problem]:
    if properties is not None and role in (Role.INTER_ROUTER, Role.EDGE):
        return [("openProperties", f"openProperties not allowed for role {role.value!r}")]
    return []


_NAME = setting("name", StringType(), "unique name; route-container matching uses it")
_FAMILY = setting(
    "socketAddressFamily",
    EnumType(AddressFamily),
    "address family; only reported, as in qdrouterd (the host literal decides)",
    aliases=("protocolFamily",),
    ignored="the host literal decides the address family, as in qdrouterd",
)
_ROLE = setting(
    "role", EnumType(Role), "role of the connections (inter-router needs mode interior)"
)
_COST = setting("cost", IntegerType(1, INT32_MAX), "inter-router link cost")
_SSL_PROFILE = setting(
    "sslProfile",
    StringType(),
    "name of an sslProfile section; enables TLS",
)
_SASL_MECHANISMS = setting("saslMechanisms", StringType(), "space-separated SASL mechanisms")
_MAX_FRAME_SIZE = setting(
    "maxFrameSize",
    IntegerType(0, UINT32_MAX, floor=512,
                floor_warning="maxFrameSize {value} is taken as 512, the smallest max-frame-size "
                "AMQP allows (AMQP 1.0 section 2.7.1)"),
    "max-frame-size offered in OPEN, in bytes (a value below 512 is taken as 512, with a "
    "warning)",
)
_MAX_SESSIONS = setting(
    "maxSessions", IntegerType(0, UINT32_MAX), "sessions per connection; 0 or >32768 mean 32768"
)
_MAX_SESSION_FRAMES = setting(
    "maxSessionFrames",
    IntegerType(0, UINT32_MAX),
    "session incoming window in frames; 0 means unlimited",
)
_IDLE_TIMEOUT = setting(
    "idleTimeoutSeconds", IntegerType(0, INT32_MAX), "local idle timeout; 0 disables it"
)
_STRIP = setting(
    "stripAnnotations",
    EnumType(StripAnnotations),
    "router annotations stripped on normal connections",
)
_LINK_CAPACITY = setting(
    "linkCapacity",
    IntegerType(0, INT32_MAX),
    f"credit window granted to senders per link; 0 means {LINK_CAPACITY}",
)
_LOG_MESSAGE = setting(
    "messageLoggingComponents",
    StringType("string: all, none or a comma list of message fields", _check_logged_fields),
    "message fields logged at trace on module MESSAGE",
    aliases=("logMessage",),
)
_POLICY_VHOST = setting(
    "policyVhost",
    StringType(),
    "vhost whose policy applies to these connections (connectors: its $connector group)",
)
_OPEN_PROPERTIES = setting(
    "openProperties",
    JsonMapType("JSON map with string keys", check_key=_check_property_key),
    "extra OPEN properties, sent after the router's own; not for inter-router or edge "
    "roles, reserved keys refused",
)


class _ConnectionHelpers:
    port: str
    link_capacity: int

    @property
    def port_number(self) -> int:
        """The TCP port: ``amqp`` is 5672, ``amqps`` 5671, otherwise the number."""
        return port_number(self.port)

    @property
    def credit_window(self) -> int:
        """The credit granted to a sender per link: ``linkCapacity``, 0 meaning the default."""
        return self.link_capacity or LINK_CAPACITY


def _check_failover_urls(text: str) -> str | None:
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        entry = entry.split("://", 1)[-1]
        if entry.startswith("["):  # an IPv6 literal: [::1]:5672
            host, _, rest = entry[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else "5672"
        else:
            host, _, port = entry.rpartition(":") if ":" in entry else (entry, "", "5672")
        if not host:
            return f"bad failover URL {raw.strip()!r}: no host"
        if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
            return f"bad failover URL {raw.strip()!r}: bad port {port!r}"
    return None


#: How long an accepted connection may take to finish its handshake when the
#: listener says nothing (docs/compatibility.md#slow-clients).
DEFAULT_HANDSHAKE_TIMEOUT_S = 60


@attrs.frozen(kw_only=True)
class ListenerSection(Section, _ConnectionHelpers):
    """A ``listener``: where the router accepts connections."""

    name: str | None = attrs.field(default=None, metadata=_NAME)
    host: str = attrs.field(
        default="",
        metadata=setting("host", StringType(), "address to bind; empty means all local addresses"),
    )
    port: str = attrs.field(
        default="amqp",
        metadata=setting("port", PortType(allow_zero=True), "port to bind; 0 picks a free port"),
    )
    socket_address_family: AddressFamily | None = attrs.field(default=None, metadata=_FAMILY)
    role: Role = attrs.field(default=Role.NORMAL, metadata=_ROLE)
    cost: int = attrs.field(default=1, metadata=_COST)
    ssl_profile: str | None = attrs.field(default=None, metadata=_SSL_PROFILE)
    sasl_mechanisms: str | None = attrs.field(default=None, metadata=_SASL_MECHANISMS)
    authenticate_peer: bool = attrs.field(
        default=False,
        metadata=setting("authenticatePeer", BooleanType(), "require an authenticated peer"),
    )
    allow_insecure_mechanisms: bool = attrs.field(
        default=False,
        metadata=setting(
            "allowInsecureMechanisms",
            BooleanType(),
            "accept mechanisms that send the password in clear (PLAIN) on connections "
            "without TLS (a Hop extension; qdrouterd always accepts them)",
        ),
    )
    sasl_plugin: str | None = attrs.field(
        default=None,
        metadata=setting(
            "saslPlugin",
            StringType(),
            "name of an authServicePlugin section: SASL is relayed to its service, and "
            "every client must authenticate",
        ),
    )
    require_encryption: bool = attrs.field(
        default=False,
        metadata=setting("requireEncryption", BooleanType(), "refuse unencrypted connections"),
    )
    require_ssl: bool = attrs.field(
        default=False,
        metadata=setting(
            "requireSsl",
            BooleanType(),
            "with an sslProfile: refuse clients that do not start TLS (else they may "
            "also connect in plain text)",
        ),
    )
    trusted_certs_file: str | None = attrs.field(
        default=None,
        metadata=setting(
            "trustedCertsFile",
            StringType("path"),
            "unused (use sslProfile caCertFile)",
            aliases=("trustedCerts",),
            ignored="unused, as in qdrouterd: sslProfile caCertFile is the trusted CA file",
        ),
    )
    max_frame_size: int = attrs.field(default=16384, metadata=_MAX_FRAME_SIZE)
    max_sessions: int = attrs.field(default=32768, metadata=_MAX_SESSIONS)
    max_session_frames: int = attrs.field(default=0, metadata=_MAX_SESSION_FRAMES)
    idle_timeout_seconds: int = attrs.field(default=16, metadata=_IDLE_TIMEOUT)
    initial_handshake_timeout_seconds: int | None = attrs.field(
        default=None,
        metadata=setting(
            "initialHandshakeTimeoutSeconds",
            IntegerType(0, INT32_MAX),
            "close connections that have not finished their handshake within this time: "
            "the AMQP header, TLS, SASL and OPEN (an HTTP listener: its first request, "
            "counted from the accept, and each later one from its first byte); 0 disables",
            default_doc=f"{DEFAULT_HANDSHAKE_TIMEOUT_S} (qdrouterd's default, 0, lets a "
            "silent client hold its connection forever)",
        ),
    )
    strip_annotations: StripAnnotations = attrs.field(
        default=StripAnnotations.BOTH, metadata=_STRIP
    )
    link_capacity: int = attrs.field(default=LINK_CAPACITY, metadata=_LINK_CAPACITY)
    multi_tenant: bool = attrs.field(
        default=False,
        metadata=setting(
            "multiTenant",
            BooleanType(),
            "each connection's addresses live in the namespace of its vhost (the policy "
            "vhost, else the OPEN hostname): prefixed with '<vhost>/' inside the router",
        ),
    )
    failover_urls: str | None = attrs.field(
        default=None,
        metadata=setting(
            "failoverUrls",
            StringType("string: comma list of [scheme://]host[:port]", _check_failover_urls),
            "failover list announced to clients in OPEN (failover-server-list)",
            aliases=("failoverList",),
        ),
    )
    healthz: bool = attrs.field(
        default=True, metadata=setting("healthz", BooleanType(), "HTTP health endpoint")
    )
    metrics: bool = attrs.field(
        default=True, metadata=setting("metrics", BooleanType(), "HTTP metrics endpoint")
    )
    websockets: bool = attrs.field(
        default=True,
        metadata=setting(
            "websockets",
            BooleanType(),
            "an HTTP listener accepts AMQP over WebSockets (subprotocol amqp)",
        ),
    )
    http: bool = attrs.field(
        default=False,
        metadata=setting("http", BooleanType(), "listener speaks HTTP instead of raw AMQP"),
    )
    console: bool = attrs.field(
        default=True,
        metadata=setting(
            "console",
            BooleanType(),
            "an HTTP listener serves the web console (at /, and at /console/ when "
            "httpRootDir takes /) and its JSON management endpoint (/api/v1/); read-only "
            "unless the listener authenticates users (authenticatePeer) and policy lets "
            "them write",
        ),
    )
    http_root_dir: str | None = attrs.field(
        default=None,
        metadata=setting(
            "httpRootDir",
            StringType("path"),
            "a folder whose files the listener serves over HTTP (it makes the "
            "listener speak HTTP, as in qdrouterd)",
            aliases=("httpRoot",),
        ),
    )
    message_logging_components: str = attrs.field(default="none", metadata=_LOG_MESSAGE)
    policy_vhost: str | None = attrs.field(default=None, metadata=_POLICY_VHOST)
    open_properties: dict[str, JsonValue] | None = attrs.field(
        default=None, metadata=_OPEN_PROPERTIES
    )

    def problems(self) -> list[Problem]:
        return _check_open_properties(self.role, self.open_properties)


@attrs.frozen(kw_only=True)
class ConnectorSection(Section, _ConnectionHelpers):
    """A ``connector``: a connection the router keeps making to a peer."""

    name: str | None = attrs.field(default=None, metadata=_NAME)
    host: str = attrs.field(
        default="127.0.0.1", metadata=setting("host", StringType(), "peer host")
    )
    port: str = attrs.field(
        default="amqp", metadata=setting("port", PortType(allow_zero=False), "peer port")
    )
    socket_address_family: AddressFamily | None = attrs.field(default=None, metadata=_FAMILY)
    role: Role = attrs.field(default=Role.NORMAL, metadata=_ROLE)
    cost: int = attrs.field(default=1, metadata=_COST)
    ssl_profile: str | None = attrs.field(default=None, metadata=_SSL_PROFILE)
    sasl_mechanisms: str | None = attrs.field(default=None, metadata=_SASL_MECHANISMS)
    allow_redirect: bool = attrs.field(
        default=True,
        metadata=setting(
            "allowRedirect",
            BooleanType(),
            "unused, as in qdrouterd",
            ignored="unused, as in qdrouterd",
        ),
    )
    max_frame_size: int = attrs.field(default=16384, metadata=_MAX_FRAME_SIZE)
    max_sessions: int = attrs.field(default=32768, metadata=_MAX_SESSIONS)
    max_session_frames: int = attrs.field(default=0, metadata=_MAX_SESSION_FRAMES)
    idle_timeout_seconds: int = attrs.field(default=16, metadata=_IDLE_TIMEOUT)
    strip_annotations: StripAnnotations = attrs.field(
        default=StripAnnotations.BOTH, metadata=_STRIP
    )
    link_capacity: int = attrs.field(default=LINK_CAPACITY, metadata=_LINK_CAPACITY)
    message_logging_components: str = attrs.field(default="none", metadata=_LOG_MESSAGE)
    open_properties: dict[str, JsonValue] | None = attrs.field(
        default=None, metadata=_OPEN_PROPERTIES
    )
    verify_hostname: bool = attrs.field(
        default=True,
        metadata=setting(
            "verifyHostname",
            BooleanType(),
            "with TLS, check the server certificate name against the host",
            aliases=("verifyHostName",),
        ),
    )
    sasl_username: str | None = attrs.field(
        default=None, metadata=setting("saslUsername", StringType(), "SASL user name")
    )
    sasl_password: str | None = attrs.field(
        default=None,
        metadata=setting(
            "saslPassword", StringType(), "SASL password: env:VAR, file:PATH, pass:TEXT or text"
        ),
    )
    policy_vhost: str | None = attrs.field(default=None, metadata=_POLICY_VHOST)
    failover_urls: str | None = attrs.field(
        default=None,
        metadata=setting(
            "failoverUrls",
            StringType("string: comma list of [scheme://]host[:port]", _check_failover_urls),
            "further peers tried in order when the current one is lost or unreachable",
            aliases=("failoverList",),
        ),
    )
    initial_reconnect_delay: int | None = attrs.field(
        default=None,
        metadata=setting(
            "initialReconnectDelay", IntegerType(0, INT32_MAX),
            "ms before the first retry (10 when any reconnect option is set; none set: "
            f"qdrouterd's fixed {RETRY_FAILED_S:g} s after a failed attempt, "
            f"{RETRY_DROPPED_S:g} s after a drop)",
        ),
    )
    max_reconnect_delay: int | None = attrs.field(
        default=None,
        metadata=setting("maxReconnectDelay", IntegerType(1, INT32_MAX),
                         "longest wait between attempts, ms (30000)"),
    )
    use_exponential_back_off: bool | None = attrs.field(
        default=None,
        metadata=setting("useExponentialBackOff", BooleanType(),
                         "multiply the delay after each failure (yes)"),
    )
    back_off_multiplier: float | None = attrs.field(
        default=None,
        metadata=setting("backOffMultiplier", FloatType(1.0, 1000.0),
                         "factor of the exponential back-off (2)"),
    )
    max_reconnect_attempts: int | None = attrs.field(
        default=None,
        metadata=setting("maxReconnectAttempts", IntegerType(0, INT32_MAX),
                         "attempts in a row before the connector is marked failed "
                         "(0: unlimited)"),
    )

    def problems(self) -> list[Problem]:
        return _check_open_properties(self.role, self.open_properties)
