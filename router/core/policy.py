"""Connection and link policy: who may connect, how many, and what they may attach.

Owns qdrouterd's policy decisions (docs/security.md#policy): the global
connection cap; with vhost policy enabled, matching a connection to a vhost
(its OPEN hostname, else the default vhost) and its user to a user group,
the per-vhost, per-user and per-host connection limits, the group's
``remoteHosts``, and on each attach the group's sender and receiver counts,
allowed sources and targets, anonymous senders and dynamic sources; the
addresses an authentication service allows a user (its ``address-authz``,
docs/security.md#delegated-authentication), on top of the group's; and the
target of each message on an anonymous link where either restricts targets.
It keeps the denial counters management shows.  Pure: the adapter asks and
carries out the answer.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections import Counter
from collections.abc import Iterable, Mapping

import attrs

from addressing.errors import AddressError
from addressing.patterns import SEPARATORS, PatternTable, normalize_pattern

__all__ = [
    "DEFAULT_GROUP",
    "TARGET_DENIED",
    "UNLIMITED",
    "AddressAuthz",
    "Denied",
    "Grant",
    "GroupSettings",
    "Policy",
    "Vhost",
    "VhostCounts",
]

DEFAULT_GROUP = "$default"
CONNECTOR_GROUP = "$connector"
UNLIMITED = 2**31 - 1
RESOURCE_LIMIT = "amqp:resource-limit-exceeded"
UNAUTHORIZED = "amqp:unauthorized-access"
CONNECTION_DENIED = "connection disallowed by local policy"
LINK_DENIED = "link disallowed by local policy"
USER_ID_PROXY = "user_id proxy violation"
#: The description of a message refused for its target (qdrouterd's words).
TARGET_DENIED = "policy violation on target"
WAYPOINT_PREFIX = "qd.waypoint"
FALLBACK = "qd.fallback"
WRITE_OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE"})


@attrs.frozen
class Denied:
    """A refusal: the AMQP error condition and description the peer gets."""

    condition: str
    description: str
    #: Why, for the log.
    reason: str


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


USER_TOKEN = "${user}"


def _group_denial(grant: Grant, group: GroupSettings, *, sender: bool, address: str | None,
                  dynamic: bool, capabilities: Iterable[str]) -> Denied | None:
    """What a user group's rules say of an attach (``Policy.attach``).  With
    an authentication service's permissions, those rule the addresses
    instead of the group's sources and targets, and allow dynamic sources
    and anonymous senders, as in qdrouterd; the group's limits hold."""
    by_service = grant.authz is not None
    claimed = _claimed(capabilities) if address else ""
    if claimed == WAYPOINT_PREFIX and not group.allow_waypoint_links:
        return Denied(UNAUTHORIZED, LINK_DENIED, "waypoint capability not permitted")
    if claimed == FALLBACK and not group.allow_fallback_links:
        return Denied(UNAUTHORIZED, LINK_DENIED, "fallback capability not permitted")
    if sender:
        if grant.senders >= group.max_senders:
            return Denied(RESOURCE_LIMIT, LINK_DENIED,
                          f"{grant.senders} senders, maxSenders {group.max_senders}")
        if not address:
            if not group.allow_anonymous_sender and not by_service:
                return Denied(UNAUTHORIZED, LINK_DENIED, "anonymous sender not allowed")
        elif not by_service and not _allowed(group.targets, group.target_patterns, address,
                                             grant.user):
            return Denied(UNAUTHORIZED, LINK_DENIED, f"target {address!r} not allowed")
        return None
    if grant.receivers >= group.max_receivers:
        return Denied(RESOURCE_LIMIT, LINK_DENIED,
                      f"{grant.receivers} receivers, maxReceivers {group.max_receivers}")
    if dynamic:
        if not group.allow_dynamic_source and not by_service:
            return Denied(UNAUTHORIZED, LINK_DENIED, "dynamic source not allowed")
    elif not by_service and not _allowed(group.sources, group.source_patterns, address or "",
                                         grant.user):
        return Denied(UNAUTHORIZED, LINK_DENIED, f"source {address!r} not allowed")
    return None


@attrs.frozen
class AddressPatterns:
    """A group's ``sourcePattern`` or ``targetPattern``: address patterns
    (docs/routing.md#prefixes-and-patterns), of which the first or last
    token may be ``${user}``, the connection's user (qdrouterd's rules)."""

    table: PatternTable[bool]
    #: Which forms the patterns take: without ``${user}``, with it first,
    #: with it last.
    plain: bool
    user_first: bool
    user_last: bool

    @classmethod
    def of(cls, patterns: Iterable[str]) -> AddressPatterns:
        table: PatternTable[bool] = PatternTable()
        plain = user_first = user_last = False
        for pattern in patterns:
            try:
                table.add(pattern, True)
            except AddressError:
                continue  # no tokens, or given twice
            if pattern.startswith(USER_TOKEN):
                user_first = True
            elif pattern.endswith(USER_TOKEN):
                user_last = True
            else:
                plain = True
        return cls(table, plain, user_first, user_last)

    def allows(self, address: str, user: str) -> bool:
        """Whether a pattern matches ``address``: as it is, or with the
        user's name as its first or last token read as ``${user}``."""
        if not address:
            return False
        match = self.table.match
        if self.plain and match(address) is not None:
            return True
        n = len(user)
        if self.user_first and address.startswith(user) and (
                len(address) == n or address[n] in SEPARATORS) \
                and match(USER_TOKEN + address[n:]) is not None:
            return True
        return (self.user_last and len(address) > n and address.endswith(user)
                and address[-n - 1] in SEPARATORS
                and match(address[:len(address) - n] + USER_TOKEN) is not None)


def _either(group: int | None, vhost: int) -> int:
    return vhost if group is None else group


def _claimed(capabilities: Iterable[str]) -> str:
    """Which router capability a terminus claims: ``qd.waypoint`` (for any
    ``qd.waypoint[.N]``), ``qd.fallback``, or "" for neither.  Every
    capability is looked at; qdrouterd looks at the first only."""
    for capability in capabilities:
        if capability.startswith(WAYPOINT_PREFIX):
            return WAYPOINT_PREFIX
        if capability == FALLBACK:
            return FALLBACK
    return ""


def _allowed(names: tuple[str, ...] | None, patterns: AddressPatterns | None,
             address: str, user: str) -> bool:
    """A group's ``sources`` or ``targets`` (or their pattern form) allow
    ``address`` for ``user``; neither given: any address."""
    if names is not None:
        return _address_allowed(names, address, user)
    return patterns is None or patterns.allows(address, user)


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
class AddressAuthz:
    """What an authentication service allows a user it authenticated: the
    addresses of its ``address-authz`` with ``recv`` (``sources``) and with
    ``send`` (``targets``), each an exact address, ``prefix*`` or ``*``.  A
    user so authorized may also attach dynamic sources and anonymous
    senders; with vhost policy these replace the group's sources and
    targets and its two flags, and the group's limits hold, as in
    qdrouterd."""

    sources: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class GroupSettings:
    """A vhost's user group, as the policy applies it.

    Built from the conf's declaration of the group settings (qdrouterd's
    ``vhostUserGroupSettings``), which holds their defaults; every field is
    given.
    """

    users: frozenset[str]
    #: Patterns of the hosts the users may connect from; empty: any host.
    remote_hosts: tuple[str, ...]
    #: Instead of the vhost's (higher or lower, as in qdrouterd); None: the vhost's.
    max_connections_per_user: int | None
    max_connections_per_host: int | None
    #: None: the vhost's limit; 0: no limit.
    max_message_size: int | None
    max_sessions: int
    max_senders: int
    max_receivers: int
    #: The OPEN's max-frame-size and each session's incoming window in bytes
    #: for the group's connections (None: the listener's).
    max_frame_size: int | None
    max_session_window: int | None
    allow_dynamic_source: bool
    allow_anonymous_sender: bool
    allow_admin_status_update: bool
    #: Whether messages may carry a ``user-id`` other than the connection's user.
    allow_user_id_proxy: bool
    #: Whether links may claim ``qd.waypoint[.N]`` or ``qd.fallback``.
    allow_waypoint_links: bool
    allow_fallback_links: bool
    #: Whether the group's connections may make ``connection.linkRoute``s.
    allow_dynamic_link_routes: bool = True
    #: None: any address; else the allowed names and ``prefix*`` patterns.
    sources: tuple[str, ...] | None
    targets: tuple[str, ...] | None
    #: ``sourcePattern`` and ``targetPattern``, given instead of the lists.
    source_patterns: AddressPatterns | None = None
    target_patterns: AddressPatterns | None = None
    #: Management requests the group may make (a Hop setting): ``none``,
    #: ``read`` (every operation but CREATE, UPDATE, DELETE) or ``write``
    #: (by authenticated users); None: every request, as in qdrouterd.
    management: str | None = None


@attrs.frozen(kw_only=True)
class Vhost:
    """A vhost: its limits and user groups, built from a conf ``vhost``
    section (which holds the defaults); every field is given."""

    hostname: str
    #: Further hostnames matched to this vhost.
    aliases: tuple[str, ...]
    max_connections: int
    max_connections_per_user: int
    max_connections_per_host: int
    allow_unknown_user: bool
    #: None: the policy's limit; 0: no limit.
    max_message_size: int | None
    groups: Mapping[str, GroupSettings]

    def group_of(self, user: str) -> str | None:
        for name, group in self.groups.items():
            if user in group.users:
                return name
        if self.allow_unknown_user and DEFAULT_GROUP in self.groups:
            return DEFAULT_GROUP
        return None


@attrs.define
class VhostCounts:
    """A vhost's connections and denials (management's ``vhostStats``)."""

    connections: int = 0
    per_user: Counter[str] = attrs.field(factory=Counter)
    per_host: Counter[str] = attrs.field(factory=Counter)
    connections_approved: int = 0
    connections_denied: int = 0
    sessions_denied: int = 0
    senders_denied: int = 0
    receivers_denied: int = 0
    max_message_size_denied: int = 0


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
    #: The counts of the vhost it was admitted to.
    counts: VhostCounts | None = None
    #: What an authentication service allows the user (None: none was asked).
    authz: AddressAuthz | None = None

    @property
    def restricted(self) -> bool:
        """Whether anything rules the connection's links: a group, or an
        authentication service's permissions."""
        return self.group is not None or self.authz is not None

    @property
    def user_id(self) -> bytes | None:
        """The only non-empty ``user-id`` the connection's messages may carry
        (docs/routing.md#receiving-a-message), or None when any may (no vhost
        policy, or the
        group allows proxying)."""
        if self.group is None or self.group.allow_user_id_proxy:
            return None
        return self.user.encode()


class Policy:
    """The router's policy.

    Args:
        max_connections: the global cap on connections (always enforced).
        vhosts: the vhost policies, by hostname; enforced when ``enabled``.
        default_vhost: the vhost of a connection whose hostname matches none.
        name_patterns: qdrouterd's ``enableVhostNamePatterns``: vhost names
            and aliases are also patterns of ``.``-separated tokens (``*``
            one token, ``#`` any number), matched as address patterns are
            (docs/security.md#vhost-name-patterns).
    """

    def __init__(self, *, max_connections: int = 65535, enabled: bool = False,
                 vhosts: Iterable[Vhost] = (), default_vhost: str = DEFAULT_GROUP,
                 max_message_size: int = 0, name_patterns: bool = False) -> None:
        self.max_connections = max_connections
        self.max_message_size = max_message_size
        self.max_message_size_denied = 0
        self.enabled = enabled
        self.vhosts: dict[str, Vhost] = {}
        self._aliases: dict[str, str] = {}
        #: Hostname and alias patterns to the hostname of their vhost; None:
        #: names match exactly.
        self._patterns: PatternTable[str] | None = PatternTable() if name_patterns else None
        self.default_vhost = default_vhost
        self.current = 0
        # Management's counters (the policy entity).
        self.connections_processed = 0
        self.connections_denied = 0
        self.links_denied = 0
        self.sessions_denied = 0
        self.counts: dict[str, VhostCounts] = {}
        for vhost in vhosts:
            self.set_vhost(vhost)

    @property
    def total_denials(self) -> int:
        return (self.connections_denied + self.links_denied + self.sessions_denied
                + self.max_message_size_denied)

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
            found = self.vhosts.get(host) or self.vhosts.get(self._aliases.get(host, ""))
            if found is None and self._patterns is not None:
                found = self.vhosts.get(self._patterns.match(host) or "")
            if found is not None:
                return found
        return self.vhosts.get(self.default_vhost)

    def open(self, *, hostname: str | None, user: str | None, host: str,
             authenticated: bool = False, forced_vhost: str | None = None,
             authz: AddressAuthz | None = None) -> Grant | Denied:
        """A client's OPEN: its vhost, group and connection limits (with vhost
        policy enabled; else every connection is granted).  ``forced_vhost``:
        the listener's ``policyVhost``, used instead of the OPEN's hostname;
        ``authz``: what the authentication service that authenticated the
        user allows it (applied besides its group's rules)."""
        name = user or "anonymous"
        if not self.enabled:
            return Grant(name, host, authenticated=authenticated, authz=authz)
        vhost = self._vhost(forced_vhost or hostname)
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
        elif counts.per_user[name] >= _either(group.max_connections_per_user,
                                              vhost.max_connections_per_user):
            reason = f"user {name!r} has {counts.per_user[name]} connections"
        elif counts.per_host[host] >= _either(group.max_connections_per_host,
                                              vhost.max_connections_per_host):
            reason = f"host {host} has {counts.per_host[host]} connections"
        if reason is not None:
            self.connections_denied += 1
            counts.connections_denied += 1
            return Denied(RESOURCE_LIMIT, CONNECTION_DENIED, reason)
        counts.connections += 1
        counts.connections_approved += 1
        counts.per_user[name] += 1
        counts.per_host[host] += 1
        return Grant(name, host, vhost, authenticated, group, counts=counts, authz=authz)

    def visitor(self, *, user: str, host: str, forced_vhost: str | None = None) -> Grant | None:
        """What an authenticated user of an HTTP listener (the web console)
        holds: the group policy puts it in, in the listener's ``policyVhost``
        or else the default vhost; nothing is counted, as no AMQP connection
        is made.  None: policy admits the user nowhere."""
        if not self.enabled:
            return Grant(user, host, authenticated=True)
        vhost = self._vhost(forced_vhost)
        if vhost is None:
            return None
        group_name = vhost.group_of(user)
        group = vhost.groups.get(group_name) if group_name is not None else None
        if group is None or not _host_allowed(group.remote_hosts, host):
            return None
        return Grant(user, host, vhost, True, group)

    def connector(self, vhost_name: str, host: str) -> Grant | Denied:
        """An outgoing connection whose connector names ``policyVhost``: the
        peer may attach what that vhost's ``$connector`` group allows.  A
        missing vhost or group refuses the connection."""
        if not self.enabled:
            return Grant(CONNECTOR_GROUP, host, authenticated=True)
        vhost = self.vhosts.get(vhost_name)
        group = vhost.groups.get(CONNECTOR_GROUP) if vhost is not None else None
        if vhost is None or group is None:
            self.connections_denied += 1
            what = f"vhost {vhost_name!r}" if vhost is None \
                else f"group {CONNECTOR_GROUP!r} in vhost {vhost_name!r}"
            return Denied(RESOURCE_LIMIT, CONNECTION_DENIED, f"connector policy: no {what}")
        counts = self.counts[vhost.hostname]
        counts.connections += 1
        counts.connections_approved += 1
        counts.per_user[CONNECTOR_GROUP] += 1
        counts.per_host[host] += 1
        return Grant(CONNECTOR_GROUP, host, vhost, True, group, counts=counts)

    def closed(self, grant: Grant) -> None:
        """A granted connection is gone."""
        counts = grant.counts
        if counts is None:
            return
        counts.connections -= 1
        for tally, key in ((counts.per_user, grant.user), (counts.per_host, grant.host)):
            tally[key] -= 1
            if tally[key] <= 0:
                del tally[key]

    def message_limit(self, grant: Grant | None) -> int | None:
        """The largest message a client connection may send: the group's,
        else the vhost's, else the policy's ``maxMessageSize``; None: none."""
        for limit in (grant.group.max_message_size if grant and grant.group else None,
                      grant.vhost.max_message_size if grant and grant.vhost else None,
                      self.max_message_size):
            if limit is not None:
                return limit or None
        return None

    def may_manage(self, grant: Grant | None, operation: str,
                   entity_type: str = "") -> Denied | None:
        """A management request from a client connection (``grant``; None when
        the router cannot tell which, as for a pre-settled request): with vhost
        policy, a group that says nothing of ``management`` may make every
        request, as in qdrouterd, except closing connections without
        ``allowAdminStatusUpdate``; one that does is held to it: ``read``
        refuses writes, ``none`` reads too, and ``write`` takes writes from
        authenticated users only.  Writes over a connection the router cannot
        tell are refused."""
        if not self.enabled:
            return None
        if entity_type.endswith("connection.linkRoute"):
            # A link route made over the connection itself (how an edge offers
            # its brokers): qdrouterd's allowDynamicLinkRoutes decides, not the
            # management rights (docs/networks.md#link-routes-through-an-edge).
            group = grant.group if grant is not None else None
            if group is not None and not group.allow_dynamic_link_routes:
                return Denied("403", "Forbidden", "connection link routes are not allowed "
                              "for this connection's group (allowDynamicLinkRoutes)")
            return None
        write = operation.upper() in WRITE_OPERATIONS
        if grant is None or grant.group is None:
            access: str | None = "read"
        else:
            access = grant.group.management
        if access is None:
            pass
        elif access == "none" or (write and access != "write"):
            return Denied("403", "Forbidden",
                          f"management {operation} not allowed for this user's group")
        elif write and (grant is None or not grant.authenticated):
            return Denied("403", "Forbidden",
                          f"management {operation} needs an authenticated user")
        if write and entity_type.rsplit(".", 1)[-1] == "connection" and grant is not None \
                and grant.group is not None and not grant.group.allow_admin_status_update:
            return Denied("403", "Forbidden", "closing connections is not allowed for this "
                          "user's group (allowAdminStatusUpdate)")
        return None

    # -- vhosts changed through management -----------------------------------

    def _check_patterns(self, vhost: Vhost) -> None:
        assert self._patterns is not None
        seen: dict[str, str] = {}
        for name in (vhost.hostname, *vhost.aliases):
            try:
                stored = normalize_pattern(name)
            except AddressError:
                continue
            owner = self._patterns.get(name)
            if owner is not None and owner != vhost.hostname:
                raise ValueError(f"vhost {vhost.hostname!r}: name {name!r} is the pattern "
                                 f"{stored!r}; that pattern conflicts with vhost {owner!r}")
            if stored in seen:
                raise ValueError(f"vhost {vhost.hostname!r}: names {seen[stored]!r} and "
                                 f"{name!r} are both the pattern {stored!r}; that pattern "
                                 "conflicts with itself")
            seen[stored] = name

    def set_vhost(self, vhost: Vhost) -> None:
        """Add or replace a vhost: new connections get its settings; those
        already open keep what they were admitted with.  Its counts carry on.

        Raises:
            ValueError: with name patterns, a name or alias of ``vhost`` is,
                once normalised, the pattern of another vhost (or of another
                of its own names); nothing is changed.
        """
        if self._patterns is not None:
            self._check_patterns(vhost)
        self.remove_vhost(vhost.hostname, keep_counts=True)
        self.vhosts[vhost.hostname] = vhost
        for alias in vhost.aliases:
            self._aliases[alias] = vhost.hostname
        if self._patterns is not None:
            for name in (vhost.hostname, *vhost.aliases):
                # A name without tokens (the empty one) is matched exactly only.
                with contextlib.suppress(AddressError):
                    self._patterns.add(name, vhost.hostname)
        self.counts.setdefault(vhost.hostname, VhostCounts())

    def remove_vhost(self, hostname: str, *, keep_counts: bool = False) -> None:
        """Forget a vhost; its open connections keep their settings."""
        old = self.vhosts.pop(hostname, None)
        if old is not None:
            for alias in old.aliases:
                if self._aliases.get(alias) == hostname:
                    del self._aliases[alias]
            if self._patterns is not None:
                for name in (old.hostname, *old.aliases):
                    if self._patterns.get(name) == hostname:
                        self._patterns.remove(name)
        if not keep_counts:
            self.counts.pop(hostname, None)

    # -- sessions and messages -------------------------------------------------

    def session_refused(self, grant: Grant) -> None:
        """A client began a session beyond the channel-max its group's
        ``maxSessions`` set, and its connection was closed (counted)."""
        self.sessions_denied += 1
        if grant.counts is not None:
            grant.counts.sessions_denied += 1

    def oversized(self, grant: Grant | None) -> None:
        """A message above the size limit was refused (counted)."""
        self.max_message_size_denied += 1
        counts = grant.counts if grant is not None else None
        if counts is not None:
            counts.max_message_size_denied += 1

    # -- links -----------------------------------------------------------------

    def attach(self, grant: Grant, *, sender: bool, address: str | None,
               dynamic: bool = False, capabilities: Iterable[str] = ()) -> Denied | None:
        """A client attaches a link (``sender``: the client sends, so the
        router receives on it; ``address`` its target, or its source for a
        receiver; ``capabilities`` that terminus's)."""
        group = grant.group
        if group is None and grant.authz is None:
            return None
        denial = None if group is None else _group_denial(grant, group, sender=sender,
                                                          address=address, dynamic=dynamic,
                                                          capabilities=capabilities)
        authz = grant.authz
        if denial is None and authz is not None and address and not dynamic:
            names = authz.targets if sender else authz.sources
            if not _address_allowed(names, address, grant.user):
                what = "target" if sender else "source"
                denial = Denied(UNAUTHORIZED, LINK_DENIED,
                                f"{what} {address!r} not allowed by the authentication service")
        if denial is not None:
            self.links_denied += 1
            counts = grant.counts
            if counts is not None:
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

    @staticmethod
    def restricts_targets(grant: Grant) -> bool:
        """Whether the targets of the messages ``grant``'s anonymous senders
        send are checked (``message_target_allowed``)."""
        group = grant.group
        return grant.authz is not None or (group is not None and (
            group.targets is not None or group.target_patterns is not None))

    @staticmethod
    def message_target_allowed(grant: Grant, address: str) -> bool:
        """Whether a message on an anonymous link of ``grant``'s connection
        may go to ``address``: the authentication service's permissions
        allow it, or else its group's targets (qdrouterd checks every such
        message)."""
        authz = grant.authz
        if authz is not None:
            return _address_allowed(authz.targets, address, grant.user)
        group = grant.group
        return group is None or _allowed(group.targets, group.target_patterns, address,
                                         grant.user)

    def detached(self, grant: Grant, *, sender: bool) -> None:
        """A link admitted by ``attach`` is gone."""
        if grant.group is None:
            return
        if sender:
            grant.senders = max(0, grant.senders - 1)
        else:
            grant.receivers = max(0, grant.receivers - 1)
