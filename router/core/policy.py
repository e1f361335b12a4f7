"""Connection and link policy: who may connect, how many, and what they may attach.

Owns qdrouterd's policy decisions (reference 3.10, 3.11, 12.7): the global
connection cap; with vhost policy enabled, matching a connection to a vhost
(its OPEN hostname, else the default vhost) and its user to a user group,
the per-vhost, per-user and per-host connection limits, the group's
``remoteHosts``, and on each attach the group's sender and receiver counts,
allowed sources and targets, anonymous senders and dynamic sources.  It
keeps the denial counters management shows.  Pure: the adapter asks and
carries out the answer.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Iterable, Mapping

import attrs

__all__ = ["DEFAULT_GROUP", "Denied", "Grant", "GroupSettings", "Policy", "Vhost"]

DEFAULT_GROUP = "$default"
UNLIMITED = 2**31 - 1
RESOURCE_LIMIT = "amqp:resource-limit-exceeded"
UNAUTHORIZED = "amqp:unauthorized-access"
CONNECTION_DENIED = "connection disallowed by local policy"
LINK_DENIED = "link disallowed by local policy"
MANAGEMENT_ACCESS = ("none", "read", "write")
WRITE_OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE"})


@attrs.frozen
class Denied:
    """A refusal: the AMQP error condition and description the peer gets."""

    condition: str
    description: str
    #: Why, for the log.
    reason: str


def _as_list(value: object) -> list[str]:
    """qdrouterd takes lists or comma-separated strings."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        return [str(part).strip() for part in value if str(part).strip()]
    raise ValueError(f"expected a list or a comma-separated string, got {value!r}")


def _host_allowed(patterns: tuple[str, ...], host: str) -> bool:
    """``remoteHosts``: ``*``, addresses, and ``low,high`` or ``a-b`` ranges
    of IP addresses (qdrouterd's forms), or CIDR networks."""
    if not patterns:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "*" in patterns or host in patterns
    for pattern in patterns:
        if pattern == "*":
            return True
        try:
            if "/" in pattern:
                if address in ipaddress.ip_network(pattern, strict=False):
                    return True
            elif "-" in pattern:
                low, high = (ipaddress.ip_address(p.strip()) for p in pattern.split("-", 1))
                if low.version == address.version and low <= address <= high:  # type: ignore[operator]
                    return True
            elif address == ipaddress.ip_address(pattern):
                return True
        except ValueError:
            continue
    return False


def _address_allowed(patterns: tuple[str, ...], address: str, user: str) -> bool:
    """``sources``/``targets``: exact names or ``prefix*``, ``${user}`` replaced
    by the user's name; ``*`` alone allows everything."""
    for pattern in patterns:
        pattern = pattern.replace("${user}", user)
        if pattern == "*" or pattern == address:
            return True
        if pattern.endswith("*") and address.startswith(pattern[:-1]):
            return True
    return False


@attrs.frozen(kw_only=True)
class GroupSettings:
    """A vhost's user group."""

    users: frozenset[str] = frozenset()
    remote_hosts: tuple[str, ...] = ()
    max_connections_per_user: int = UNLIMITED
    max_connections_per_host: int = UNLIMITED
    max_message_size: int | None = None
    max_sessions: int = UNLIMITED
    max_senders: int = UNLIMITED
    max_receivers: int = UNLIMITED
    allow_dynamic_source: bool = False
    allow_anonymous_sender: bool = False
    allow_admin_status_update: bool = True
    #: None: any address; else the allowed names and ``prefix*`` patterns.
    sources: tuple[str, ...] | None = None
    targets: tuple[str, ...] | None = None
    #: Management requests the group may make (a Hop setting): ``none``,
    #: ``read`` (every operation but CREATE, UPDATE, DELETE) or ``write``.
    management: str = "read"

    @classmethod
    def from_conf(cls, settings: Mapping[str, object]) -> GroupSettings:
        """A group from the conf's ``groups`` JSON (qdrouterd's attribute names).

        Raises:
            ValueError: a value of the wrong kind.
        """
        def number(key: str, default: int) -> int:
            value = settings.get(key, default)
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ValueError(f"{key}: expected an integer, got {value!r}")
            return int(value)

        def flag(key: str, default: bool) -> bool:
            value = settings.get(key, default)
            if isinstance(value, str):
                return value.strip().lower() in ("true", "yes", "on", "1")
            return bool(value)

        def names(key: str, pattern_key: str) -> tuple[str, ...] | None:
            if key in settings:
                return tuple(_as_list(settings[key]))
            if pattern_key in settings:
                return tuple(_as_list(settings[pattern_key]))
            return None

        size = settings.get("maxMessageSize")
        management = str(settings.get("management", "read")).strip().lower()
        if management not in MANAGEMENT_ACCESS:
            raise ValueError(f"management: expected one of {', '.join(MANAGEMENT_ACCESS)}, "
                             f"got {settings.get('management')!r}")
        return cls(
            management=management,
            users=frozenset(_as_list(settings.get("users"))),
            remote_hosts=tuple(_as_list(settings.get("remoteHosts"))),
            max_connections_per_user=number("maxConnectionsPerUser", UNLIMITED),
            max_connections_per_host=number("maxConnectionsPerHost", UNLIMITED),
            max_message_size=None if size is None else number("maxMessageSize", 0),
            max_sessions=number("maxSessions", UNLIMITED),
            max_senders=number("maxSenders", UNLIMITED),
            max_receivers=number("maxReceivers", UNLIMITED),
            allow_dynamic_source=flag("allowDynamicSource", False),
            allow_anonymous_sender=flag("allowAnonymousSender", False),
            allow_admin_status_update=flag("allowAdminStatusUpdate", True),
            sources=names("sources", "sourcePattern"),
            targets=names("targets", "targetPattern"),
        )


@attrs.frozen(kw_only=True)
class Vhost:
    """A vhost: its limits and user groups."""

    hostname: str
    max_connections: int = UNLIMITED
    max_connections_per_user: int = UNLIMITED
    max_connections_per_host: int = UNLIMITED
    allow_unknown_user: bool = False
    max_message_size: int | None = None
    groups: Mapping[str, GroupSettings] = attrs.field(factory=dict)

    def group_of(self, user: str) -> str | None:
        for name, group in self.groups.items():
            if user in group.users:
                return name
        if self.allow_unknown_user and DEFAULT_GROUP in self.groups:
            return DEFAULT_GROUP
        return None


@attrs.define
class Grant:
    """An admitted connection: its vhost and group (None: no vhost policy)."""

    user: str
    host: str
    vhost: Vhost | None = None
    #: Whether the user proved who it is (SASL other than ANONYMOUS).
    authenticated: bool = False
    group: GroupSettings | None = None
    senders: int = 0
    receivers: int = 0


@attrs.define
class _VhostCounts:
    connections: int = 0
    per_user: Counter[str] = attrs.field(factory=Counter)
    per_host: Counter[str] = attrs.field(factory=Counter)
    # Denials, for management's vhostStats.
    connections_denied: int = 0
    senders_denied: int = 0
    receivers_denied: int = 0


class Policy:
    """The router's policy.

    Args:
        max_connections: the global cap on connections (always enforced).
        vhosts: the vhost policies, by hostname; enforced when ``enabled``.
        default_vhost: the vhost of a connection whose hostname matches none.
    """

    def __init__(self, *, max_connections: int = 65535, enabled: bool = False,
                 vhosts: Iterable[Vhost] = (), default_vhost: str = DEFAULT_GROUP,
                 max_message_size: int = 0) -> None:
        self.max_connections = max_connections
        self.max_message_size = max_message_size
        self.max_message_size_denied = 0
        self.enabled = enabled
        self.vhosts = {v.hostname: v for v in vhosts}
        self.default_vhost = default_vhost
        self.current = 0
        # Management's counters (the policy entity).
        self.connections_processed = 0
        self.connections_denied = 0
        self.links_denied = 0
        self.counts: dict[str, _VhostCounts] = {h: _VhostCounts() for h in self.vhosts}

    @property
    def total_denials(self) -> int:
        return self.connections_denied + self.links_denied + self.max_message_size_denied

    # -- connections -----------------------------------------------------------

    def socket_accepted(self) -> Denied | None:
        """A connection was accepted: refused when over the global cap."""
        self.connections_processed += 1
        if self.current >= self.max_connections:
            self.connections_denied += 1
            return Denied(RESOURCE_LIMIT, CONNECTION_DENIED,
                          f"global connection count. nConnections= {self.current}")
        self.current += 1
        return None

    def socket_closed(self) -> None:
        self.current = max(0, self.current - 1)

    def _vhost(self, hostname: str | None) -> Vhost | None:
        if hostname:
            host = hostname.rsplit(":", 1)[0] if hostname.count(":") == 1 else hostname
            found = self.vhosts.get(host)
            if found is not None:
                return found
        return self.vhosts.get(self.default_vhost)

    def open(self, *, hostname: str | None, user: str | None, host: str,
             authenticated: bool = False) -> Grant | Denied:
        """A client's OPEN: its vhost, group and connection limits (with vhost
        policy enabled; else every connection is granted)."""
        name = user or "anonymous"
        if not self.enabled:
            return Grant(name, host, authenticated=authenticated)
        vhost = self._vhost(hostname)
        if vhost is None:
            self.connections_denied += 1
            return Denied(RESOURCE_LIMIT, CONNECTION_DENIED,
                          f"no vhost for hostname {hostname!r} and no default vhost")
        counts = self.counts[vhost.hostname]
        group_name = vhost.group_of(name)
        group = vhost.groups.get(group_name) if group_name is not None else None
        reason: str | None = None
        if group is None:
            reason = f"user {name!r} is in no group of vhost {vhost.hostname!r}"
        elif not _host_allowed(group.remote_hosts, host):
            reason = f"host {host} not in remoteHosts of group {group_name!r}"
        elif counts.connections >= vhost.max_connections:
            reason = f"vhost {vhost.hostname!r} has {counts.connections} connections"
        elif counts.per_user[name] >= min(vhost.max_connections_per_user,
                                          group.max_connections_per_user):
            reason = f"user {name!r} has {counts.per_user[name]} connections"
        elif counts.per_host[host] >= min(vhost.max_connections_per_host,
                                          group.max_connections_per_host):
            reason = f"host {host} has {counts.per_host[host]} connections"
        if reason is not None:
            self.connections_denied += 1
            counts.connections_denied += 1
            return Denied(RESOURCE_LIMIT, CONNECTION_DENIED, reason)
        counts.connections += 1
        counts.per_user[name] += 1
        counts.per_host[host] += 1
        return Grant(name, host, vhost, authenticated, group)

    def closed(self, grant: Grant) -> None:
        """A granted connection is gone."""
        if grant.vhost is None:
            return
        counts = self.counts[grant.vhost.hostname]
        counts.connections -= 1
        counts.per_user[grant.user] -= 1
        counts.per_host[grant.host] -= 1

    def message_limit(self, grant: Grant | None) -> int | None:
        """The largest message a client connection may send: the group's,
        else the vhost's, else the policy's ``maxMessageSize``; None: none."""
        for limit in (grant.group.max_message_size if grant and grant.group else None,
                      grant.vhost.max_message_size if grant and grant.vhost else None,
                      self.max_message_size):
            if limit is not None:
                return limit or None
        return None

    def may_manage(self, grant: Grant | None, operation: str) -> Denied | None:
        """A management request from a client connection (``grant``; None when
        the router cannot tell which, as for a pre-settled request): with vhost
        policy, writes need an authenticated user whose group has
        ``management: write``; ``none`` refuses reads too."""
        if not self.enabled:
            return None
        access = grant.group.management if grant is not None and grant.group else "read"
        write = operation.upper() in WRITE_OPERATIONS
        if access == "none" or (write and access != "write"):
            return Denied("403", "Forbidden",
                          f"management {operation} not allowed for this user's group")
        if write and (grant is None or not grant.authenticated):
            return Denied("403", "Forbidden",
                          f"management {operation} needs an authenticated user")
        return None

    # -- links -----------------------------------------------------------------

    def attach(self, grant: Grant, *, sender: bool, address: str | None,
               dynamic: bool = False) -> Denied | None:
        """A client attaches a link (``sender``: the client sends, so the
        router receives on it; ``address`` its target, or its source for a
        receiver)."""
        group = grant.group
        if group is None or grant.vhost is None:
            return None
        counts = self.counts[grant.vhost.hostname]
        denial: Denied | None = None
        if sender:
            if grant.senders >= group.max_senders:
                denial = Denied(RESOURCE_LIMIT, LINK_DENIED,
                                f"{grant.senders} senders, maxSenders {group.max_senders}")
            elif not address:
                if not group.allow_anonymous_sender:
                    denial = Denied(UNAUTHORIZED, LINK_DENIED, "anonymous sender not allowed")
            elif group.targets is not None and not _address_allowed(group.targets, address,
                                                                    grant.user):
                denial = Denied(UNAUTHORIZED, LINK_DENIED, f"target {address!r} not allowed")
        else:
            if grant.receivers >= group.max_receivers:
                denial = Denied(RESOURCE_LIMIT, LINK_DENIED,
                                f"{grant.receivers} receivers, maxReceivers "
                                f"{group.max_receivers}")
            elif dynamic:
                if not group.allow_dynamic_source:
                    denial = Denied(UNAUTHORIZED, LINK_DENIED, "dynamic source not allowed")
            elif group.sources is not None and not _address_allowed(group.sources,
                                                                    address or "", grant.user):
                denial = Denied(UNAUTHORIZED, LINK_DENIED, f"source {address!r} not allowed")
        if denial is not None:
            self.links_denied += 1
            if sender:
                counts.senders_denied += 1
            else:
                counts.receivers_denied += 1
            return denial
        if sender:
            grant.senders += 1
        else:
            grant.receivers += 1
        return None

    def detached(self, grant: Grant, *, sender: bool) -> None:
        """A link admitted by ``attach`` is gone."""
        if grant.group is None:
            return
        if sender:
            grant.senders = max(0, grant.senders - 1)
        else:
            grant.receivers = max(0, grant.receivers - 1)
