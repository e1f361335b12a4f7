"""Entity sources for what the adapter owns: connections, listeners, connectors,
sslProfiles, vhosts, policy, the peer group, the router entity, log modules;
and building the agent over every source.

Owns reading the adapter's state as management rows (peer host, SASL
outcome, connector status) when a request asks for it, through the narrow
views of ``router.adapter.connections.ports``.  It must not decide what a request means
(``router.management.Agent`` does).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import conf
from router import logs
from router.adapter.admin.stats import RouterStats
from router.adapter.connections import tracing
from router.adapter.connections.certificates import Certificates
from router.adapter.connections.peergroup import PeerGroup
from router.adapter.connections.ports import ConnectionControl, ConnectorControl, ListenerControl
from router.adapter.connections.settings import (
    SaslError,
    connector_settings,
    internal,
    listener_settings,
    vhost_from_section,
)
from router.adapter.connections.state import Conn, Connector, Listener, remote_properties
from router.adapter.connections.tls import TlsError
from router.adapter.endpoints.links import sample_credit
from router.adapter.pn import lib, to_str
from router.adapter.tcp.bridges import TcpBridges, bridge_of
from router.core import Connection, Role, Router
from router.core.policy import Policy
from router.core.tcp import BridgeKind, TcpBridge
from router.management import (
    Agent,
    Changed,
    ConfigAddresses,
    ConfigAutoLinks,
    ConfigBindings,
    ConfigExchanges,
    ConfigLinkRoutes,
    ConnectionLinkRoutes,
    EntitySource,
    ManagementError,
    ReadOnly,
    Requester,
    RouterAddresses,
    RouterLinks,
    RouterNodes,
    Row,
    SslProfiles,
)
from router.management.sources import bridge_statistics, section_from
from router.management.statistics import (
    ConnectionStatistics,
    ConnectorStatus,
    DiscoveryStatus,
    LogStatistics,
    PolicyStatistics,
    TcpConnectionStatistics,
    VhostStatistics,
    as_row,
)

__all__ = ["build_agent"]

log = logging.getLogger(__name__)
policy_log = log.getChild("policy")


class ConnectionEntities(ReadOnly):
    """``connection``: every open connection."""

    def __init__(self, connections: ConnectionControl, clock: Callable[[], float],
                 core: Router | None = None) -> None:
        self._connections = connections
        self._clock = clock
        self._core = core

    def _active(self, conn: Connection) -> bool:
        """False only for an edge router's edge connection that is not its
        active uplink (docs/networks.md#edge-routers)."""
        uplink = self._core.uplink if self._core is not None else None
        return uplink is None or conn.role is not Role.EDGE or uplink.active is conn

    def rows(self) -> Iterable[Row]:
        now = self._clock()
        rows: list[Row] = []
        for conn in self._connections.listed():
            if conn.closed or conn.deadline:
                # Gone, or closed by this side and waiting for the peer's
                # answer: as in qdrouterd, no longer listed.
                continue
            cptr = conn.cptr
            mech = to_str(lib.pn_sasl_get_mech(lib.pn_sasl(conn.tptr))) if conn.opened else None
            user = conn.user if conn.opened else None
            container = to_str(lib.pn_connection_remote_container(cptr)) if conn.opened else None
            encrypted = bool(conn.opened and lib.pn_transport_is_encrypted(conn.tptr))
            ssl = conn.ssl if encrypted else None
            proto = None if ssl is None else ssl.protocol_name()
            cipher = None if ssl is None else ssl.cipher_name()
            ws_tls = conn.ws.tls if conn.ws is not None else None
            if ws_tls is not None and conn.opened:
                # WebSockets over TLS: the TLS is the channel's, not proton's.
                encrypted, proto = True, ws_tls.obj.version()
                cipher = (ws_tls.obj.cipher() or (None,))[0]
            stats = ConnectionStatistics(
                adminStatus="enabled",
                operStatus="up",
                protocol="amqp",
                container=container,
                opened=conn.opened,
                host=conn.peer,
                dir="out" if conn.connector is not None else "in",
                role=conn.core.role.value,
                isAuthenticated=bool(user) and mech not in (None, "ANONYMOUS"),
                isEncrypted=encrypted,
                enableProtocolTrace=conn.tracing,
                sasl=mech,
                user=user,
                ssl=encrypted,
                sslProto=proto,
                sslCipher=cipher,
                sslSsf=None,
                tenant=conn.core.tenant,
                uptimeSeconds=int(now - conn.started),
                lastDlvSeconds=conn.core.last_delivery_seconds(now),
                properties=_remote_properties(conn) if conn.opened else {},
                active=self._active(conn.core),
            )
            rows.append({"identity": str(conn.core.conn_id), "name": f"connection/{conn.peer}",
                         **as_row(stats)})
        return rows

    def update(self, row: Row, attributes: dict[str, object]) -> Changed:
        """``adminStatus: deleted`` closes a client or route-container connection;
        ``enableProtocolTrace`` turns its frame trace on or off."""
        if "enableProtocolTrace" in attributes:
            value = attributes["enableProtocolTrace"]
            if isinstance(value, str) and value.lower() in ("true", "false"):
                value = value.lower() == "true"  # as qdmanage sends it
            if not isinstance(value, bool):
                raise ManagementError(400, "enableProtocolTrace must be a boolean")
            for conn in self._connections.listed():
                if str(conn.core.conn_id) == row["identity"]:
                    conn.protocol_trace = value
                    tracing.apply(conn)
                    row = {**row, "enableProtocolTrace": value}
                    break
            if "adminStatus" not in attributes:
                return Changed(row=row)
        status = attributes.get("adminStatus", "enabled")
        if status not in ("enabled", "deleted"):
            raise ManagementError(400, f"adminStatus must be 'enabled' or 'deleted', "
                                       f"not {status!r}")
        if status == "enabled":
            return Changed(row=row)
        for conn in self._connections.listed():
            if str(conn.core.conn_id) == row["identity"]:
                if conn.core.role in (Role.INTER_ROUTER, Role.EDGE):
                    raise ManagementError(
                        403, f"Cannot close an {conn.core.role.value} connection")
                self._connections.close_connection(conn, "Connection closed by management")
                return Changed(row={**row, "adminStatus": "deleted", "operStatus": "closing"})
        raise ManagementError(404, f"No entity with identity={row['identity']}")


def _refuse_role(conf_name: str, mode: conf.RouterMode, attributes: dict[str, object]) -> None:
    """A role that does not fit the router's mode is refused before the other
    attributes are checked, as qdrouterd's agent refuses it (its clients
    look for that reason)."""
    role = attributes.get("role")
    if role is None:
        return
    try:
        probe = conf.build_section(conf_name, {"role": role})
    except conf.ConfError:
        return  # a bad role: the whole section's check says so
    assert isinstance(probe, conf.ListenerSection | conf.ConnectorSection)
    problem = conf.role_problem(mode, probe)
    if problem is not None:
        raise ManagementError(400, problem)


def _remote_properties(conn: Conn) -> dict[str, object]:
    """The peer's OPEN properties, keys as text (a management row holds no symbols)."""
    props = remote_properties(conn)
    return {str(k): v if isinstance(v, str | int | float | bool) or v is None else str(v)
            for k, v in props.items()}


class ListenerEntities(ReadOnly):
    """``listener``: the listening sockets and their settings.  CREATE opens a
    socket at once (port 0 binds a free one, shown in the answer); DELETE
    closes it, and the connections it accepted stay up."""

    def __init__(self, listeners: ListenerControl, certificates: Certificates) -> None:
        self._listeners = listeners
        self._certificates = certificates

    def _rows(self) -> list[tuple[Row, Listener]]:
        rows = []
        for listener in self._listeners.listeners.values():
            if internal(listener.settings.name):
                continue
            section = listener.settings.section
            row: Row = conf.section_attributes(section) if section is not None else {}
            identity = f"listener/{listener.host}:{listener.port}"
            if listener.settings.name:
                identity += f":{listener.settings.name}"
            # ``host`` as given ("" for every interface), as qdrouterd shows it.
            row.update(identity=identity, name=listener.settings.name or identity,
                       host=section.host or "" if section is not None else listener.host,
                       port=str(listener.port))
            rows.append((row, listener))
        return rows

    def rows(self) -> Iterable[Row]:
        return [row for row, _ in self._rows()]

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        certificates = self._certificates
        _refuse_role("listener", certificates.router_section.mode, attributes)
        section = section_from("listener", name, attributes)
        assert isinstance(section, conf.ListenerSection)
        try:
            settings = listener_settings(section, certificates.profiles,
                                         certificates.router_section, certificates.plugins)
        except (TlsError, SaslError) as error:
            raise ManagementError(400, str(error)) from None
        try:
            listener = self._listeners.listen(settings)
        except OSError as error:
            raise ManagementError(
                400, f"Cannot listen on {settings.host}:{settings.port}: {error.strerror}"
            ) from None
        return Changed(row=next(r for r, li in self._rows() if li is listener))

    def delete(self, row: Row) -> tuple[()]:
        for candidate, listener in self._rows():
            if candidate["identity"] == row["identity"]:
                self._listeners.close_listener(listener)
                return ()
        raise ManagementError(404, f"No entity with identity={row['identity']}")


class ConnectorEntities(ReadOnly):
    """``connector``: the connectors and the state of their connection.  CREATE
    starts connecting at once; DELETE stops retrying and closes its connection."""

    def __init__(self, connectors: ConnectorControl, certificates: Certificates,
                 clock: Callable[[], float]) -> None:
        self._connectors = connectors
        self._certificates = certificates
        self._clock = clock

    def _rows(self) -> list[tuple[Row, Connector]]:
        rows = []
        now = self._clock()
        for connector in self._connectors.connectors:
            if internal(connector.settings.name):
                continue
            s = connector.settings
            # A connector made at run time for a discovered peer has no section.
            section = s.section or conf.ConnectorSection(
                name=s.name, host=s.host, port=str(s.port), role=s.role)
            row: Row = conf.section_attributes(section)
            identity = f"connector/{connector.address}"
            if s.name:
                identity += f":{s.name}"
            if connector.conn is not None:
                status = "SUCCESS"
            elif connector.failed:
                status = "FAILED"
            elif connector.retry_at is not None and connector.retry_at > 0:
                status = "CONNECTING"
            else:
                status = "INITIALIZING"
            retry = None if connector.retry_at is None or connector.conn is not None \
                else max(0, round(connector.retry_at - now))
            row.update(identity=identity, name=s.name or identity,
                       failoverUrls=connector.failover.listing())
            row.update(as_row(ConnectorStatus(
                connectionStatus=status, connectionMsg=connector.message,
                reconnectAttempts=connector.failures, nextRetrySeconds=retry)))
            rows.append((row, connector))
        return rows

    def rows(self) -> Iterable[Row]:
        return [row for row, _ in self._rows()]

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        _refuse_role("connector", self._certificates.router_section.mode, attributes)
        section = section_from("connector", name, attributes)
        assert isinstance(section, conf.ConnectorSection)
        try:
            settings = connector_settings(section, self._certificates.profiles)
        except (TlsError, SaslError) as error:
            raise ManagementError(400, str(error)) from None
        connector = self._connectors.add(settings)
        return Changed(row=next(r for r, c in self._rows() if c is connector))

    def delete(self, row: Row) -> tuple[()]:
        for candidate, connector in self._rows():
            if candidate["identity"] == row["identity"]:
                self._connectors.remove(connector)
                return ()
        raise ManagementError(404, f"No entity with identity={row['identity']}")


class Vhosts(ReadOnly):
    """``vhost``: the vhost policies.  CREATE, UPDATE and DELETE take effect
    for connections admitted from then on; open connections keep the settings
    they were admitted with.  A vhost's counts carry on through an UPDATE."""

    def __init__(self, policy: Policy, sections: dict[str, conf.VhostSection]) -> None:
        self._policy = policy
        self._sections = sections

    @staticmethod
    def _row(section: conf.VhostSection) -> Row:
        row: Row = conf.section_attributes(section)
        row["identity"] = f"vhost/{section.hostname}"
        row["name"] = section.name or row["identity"]  # qdrouterd's default name
        return row

    def rows(self) -> Iterable[Row]:
        return [self._row(s) for s in self._sections.values()]

    def _install(self, section: conf.VhostSection) -> Changed:
        try:
            vhost = vhost_from_section(section, policy_log.warning)
        except conf.ConfError as error:
            raise ManagementError(400, "; ".join(d.message for d in error.diagnostics)) from None
        try:
            self._policy.set_vhost(vhost)
        except ValueError as error:
            raise ManagementError(400, str(error)) from None
        self._sections[section.hostname] = section
        return Changed(row=self._row(section))

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        attributes = dict(attributes)
        if attributes.get("hostname") is None and attributes.get("id") is None \
                and name is not None:
            attributes["hostname"] = name  # qdrouterd names a vhost by its hostname
        section = section_from("vhost", name, attributes)
        assert isinstance(section, conf.VhostSection)
        if section.hostname in self._sections:
            raise ManagementError(400, f"vhost {section.hostname!r} exists already")
        return self._install(section)

    def update(self, row: Row, attributes: dict[str, object]) -> Changed:
        current = self._sections.get(str(row.get("hostname")))
        if current is None:
            raise ManagementError(404, f"No entity with identity={row['identity']}")
        merged = {k: v for k, v in conf.section_attributes(current).items() if v is not None}
        for key, value in attributes.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        if merged.get("hostname") != current.hostname:
            raise ManagementError(400, "a vhost's hostname cannot change; create another")
        section = section_from("vhost", None, merged)
        assert isinstance(section, conf.VhostSection)
        return self._install(section)

    def delete(self, row: Row) -> tuple[()]:
        hostname = str(row.get("hostname"))
        if self._sections.pop(hostname, None) is None:
            raise ManagementError(404, f"No entity with identity={row['identity']}")
        self._policy.remove_vhost(hostname)
        return ()


class VhostStats(ReadOnly):
    """``vhostStats``: each vhost's connections now and what it refused."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy

    def rows(self) -> Iterable[Row]:
        return [{
            "identity": f"vhostStats/{hostname}", "name": f"vhostStats/{hostname}",
            **as_row(VhostStatistics(
                hostname=hostname, id=hostname, connectionsApproved=c.connections_approved,
                connectionsDenied=c.connections_denied, connectionsCurrent=c.connections,
                perUserState=dict(c.per_user), perHostState=dict(c.per_host),
                sessionDenied=c.sessions_denied, senderDenied=c.senders_denied,
                receiverDenied=c.receivers_denied,
                maxMessageSizeDenied=c.max_message_size_denied)),
        } for hostname, c in self._policy.counts.items()]


class Discovery(ReadOnly):
    """``discovery``: the peer group, its live peers and what was ignored."""

    def __init__(self, group: PeerGroup) -> None:
        self._group = group

    def rows(self) -> Iterable[Row]:
        discovery = self._group.joined
        if discovery is None:
            return []
        s = discovery.settings
        row: Row = conf.section_attributes(s.section or conf.DiscoverySection(group=s.group))
        row.update(identity=f"discovery/{s.group}", name=f"discovery/{s.group}",
                   group=s.group, address=s.address, port=s.port, interface=s.interface,
                   ttl=s.ttl, announceInterval=int(s.interval_s * 1000),
                   expiry=int(s.expiry_s * 1000), secret=None)
        row.update(as_row(DiscoveryStatus(
            peers=sorted(discovery.table.peers), beaconsSent=discovery.sent,
            beaconsIgnored={reason.value: n for reason, n in discovery.table.ignored.items()})))
        return [row]


class PolicyEntity(ReadOnly):
    """``policy``: the global policy's settings and its denial counters."""

    def __init__(self, policy: Policy, section: conf.PolicySection) -> None:
        self._policy = policy
        self._section = section

    def rows(self) -> Iterable[Row]:
        p = self._policy
        s = self._section
        return [{
            "identity": "policy/0", "name": s.name or "policy/0",
            "maxConnections": p.max_connections, "maxMessageSize": s.max_message_size,
            "enableVhostPolicy": p.enabled, "enableVhostNamePatterns":
            s.enable_vhost_name_patterns, "policyDir": s.policy_dir,
            "defaultVhost": p.default_vhost,
            **as_row(PolicyStatistics(
                connectionsProcessed=p.connections_processed,
                connectionsDenied=p.connections_denied, connectionsCurrent=p.current,
                linksDenied=p.links_denied, sessionsDenied=p.sessions_denied,
                maxMessageSizeDenied=p.max_message_size_denied,
                totalDenials=p.total_denials)),
        }]


class RouterEntity(ReadOnly):
    """``router``: the router's settings and router-wide counters."""

    def __init__(self, stats: RouterStats) -> None:
        self._stats = stats

    def rows(self) -> Iterable[Row]:
        return [dict(self._stats.router_row())]


class Logs(ReadOnly):
    """``log``: one entity per module; UPDATE changes its settings at once."""

    def rows(self) -> Iterable[Row]:
        current = logs.current()
        rows: list[Row] = []
        for module in logs.MODULES:
            spec = current.get(module) or logs.LogSpec(module=module)
            row: Row = {
                "identity": f"log/{module}",
                "name": f"log/{module}",
                "module": module,
                "enable": spec.enable,
                "includeTimestamp": spec.include_timestamp,
                "includeSource": spec.include_source,
                "outputFile": spec.output,
            }
            if module == "DEFAULT":
                # What the other modules inherit: the defaults where unset,
                # as qdrouterd shows them.
                for key, value in (("enable", conf.DEFAULT_LOG_ENABLE),
                                   ("includeTimestamp", conf.DEFAULT_LOG_TIMESTAMP),
                                   ("includeSource", conf.DEFAULT_LOG_SOURCE),
                                   ("outputFile", conf.DEFAULT_LOG_OUTPUT)):
                    if row[key] is None:
                        row[key] = value
            rows.append(row)
        return rows

    def update(self, row: Row, attributes: dict[str, object]) -> Changed:
        module = str(row["module"])
        spec = logs.current().get(module) or logs.LogSpec(module=module)
        fields = {"enable": "enable", "includeTimestamp": "include_timestamp",
                  "includeSource": "include_source", "outputFile": "output"}
        changes: dict[str, object] = {}
        for key, value in attributes.items():
            if key in ("includeTimestamp", "includeSource") and not isinstance(value, bool):
                raise ManagementError(400, f"{key} must be a boolean")
            if key in ("enable", "outputFile") and not isinstance(value, str):
                raise ManagementError(400, f"{key} must be a string")
            changes[fields[key]] = value
        try:
            logs.update(logs.LogSpec(**{**_spec_fields(spec), **changes}))  # type: ignore[arg-type]
        except ValueError as error:
            raise ManagementError(400, str(error)) from None
        except OSError as error:
            raise ManagementError(400, f"Failed to open log file: {error}") from None
        return Changed(row=next(r for r in self.rows() if r["module"] == module))


def _spec_fields(spec: logs.LogSpec) -> dict[str, object]:
    return {"module": spec.module, "enable": spec.enable,
            "include_timestamp": spec.include_timestamp,
            "include_source": spec.include_source, "output": spec.output}


class LogStats(ReadOnly):
    """``logStats``: records per level of each module."""

    def rows(self) -> Iterable[Row]:
        return [{"identity": f"logStats/{module}", "name": f"logStats/{module}",
                 **as_row(LogStatistics(
                     traceCount=counts["trace"], debugCount=counts["debug"],
                     infoCount=counts["info"], noticeCount=counts["notice"],
                     warningCount=counts["warning"], errorCount=counts["error"],
                     criticalCount=counts["critical"]))}
                for module, counts in logs.RECORDER.counts.items()]


class TcpBridgeEntities(ReadOnly):
    """``tcpListener`` or ``tcpConnector`` (docs/tcp.md): the bridges with
    what they carried.  CREATE starts one at once (a listener binds its port:
    0 picks a free one, shown in the answer; a connector starts the
    connections held for its address); DELETE stops one, and the
    connections it carries go on until they end."""

    def __init__(self, tcp: TcpBridges, kind: BridgeKind) -> None:
        self._tcp = tcp
        self._kind = kind

    def _bridges(self) -> list[TcpBridge]:
        services = self._tcp.services
        return list(services.listeners if self._kind is BridgeKind.LISTENER
                    else services.connectors)

    @staticmethod
    def _row(bridge: TcpBridge) -> Row:
        row: Row = {"identity": bridge.identity, "name": bridge.name,
                    "address": bridge.address, "host": bridge.host, "port": bridge.port,
                    "siteId": bridge.site_id, "sslProfile": bridge.ssl_profile}
        row.update(as_row(bridge_statistics(bridge)))
        return row

    def rows(self) -> Iterable[Row]:
        return [self._row(b) for b in self._bridges()]

    def create(self, name: str | None, attributes: dict[str, object]) -> Changed:
        section = section_from(self._kind.value, name, attributes)
        assert isinstance(section, conf.TcpListenerSection | conf.TcpConnectorSection)
        bridge = bridge_of(section)
        if bridge.name and any(b.name == bridge.name for b in self._bridges()):
            raise ManagementError(400, f"a {self._kind.value} named {bridge.name!r} exists")
        try:
            tls = self._tcp.tls_context(section)
        except TlsError as error:
            raise ManagementError(400, str(error)) from None
        if self._kind is BridgeKind.LISTENER:
            try:
                self._tcp.add_listener(bridge, tls)
            except OSError as error:
                raise ManagementError(
                    400, f"Cannot listen on {bridge.host}:{bridge.port}: {error.strerror}"
                ) from None
        else:
            self._tcp.add_connector(bridge, tls)
        return Changed(row=self._row(bridge))

    def delete(self, row: Row) -> tuple[()]:
        for bridge in self._bridges():
            if bridge.identity == row["identity"]:
                self._tcp.remove(bridge)
                return ()
        raise ManagementError(404, f"No entity with identity={row['identity']}")


class TcpConnections(ReadOnly):
    """``tcpConnection``: each carried TCP connection, a row for its client's
    side (in) and, once connected, one for its service's (out)."""

    def __init__(self, tcp: TcpBridges, clock: Callable[[], float]) -> None:
        self._tcp = tcp
        self._clock = clock

    def rows(self) -> Iterable[Row]:
        now = self._clock()
        rows: list[Row] = []
        for conn in self._tcp.services.connections.values():
            sides = [("in", conn.peer)] if conn.listener is not None else []
            if conn.service:
                sides.append(("out", conn.service))
            for direction, host in sides:
                row: Row = {"identity": f"tcpConnection/{conn.id}:{direction}",
                            "name": f"tcpConnection/{conn.id}:{direction}"}
                row.update(as_row(TcpConnectionStatistics(
                    address=conn.address, host=host, direction=direction,
                    bytesIn=conn.bytes_in, bytesOut=conn.bytes_out,
                    uptimeSeconds=round(now - conn.started),
                    lastInSeconds=round(now - conn.last_in),
                    lastOutSeconds=round(now - conn.last_out))))
                rows.append(row)
        return rows


def build_agent(*, core: Router, stats: RouterStats, connections: ConnectionControl,
                listeners: ListenerControl, connectors: ConnectorControl,
                certificates: Certificates, policy: Policy, policy_section: conf.PolicySection,
                vhost_sections: dict[str, conf.VhostSection],
                group: PeerGroup, clock: Callable[[], float],
                tcp: TcpBridges | None = None) -> Agent:
    """The agent over every entity source of this router."""
    requester = Requester()
    sources: dict[str, EntitySource] = {
        "router": RouterEntity(stats),
        "listener": ListenerEntities(listeners, certificates),
        "connector": ConnectorEntities(connectors, certificates, clock),
        "connection": ConnectionEntities(connections, clock, core),
        "router.link": RouterLinks(
            lambda: sample_credit(c.core for c in connections.listed()), clock, core),
        "router.address": RouterAddresses(core, stats.siblings),
        "router.node": RouterNodes(core, lambda t: time.time() - (clock() - t)),
        "router.config.address": ConfigAddresses(core),
        "router.config.linkRoute": ConfigLinkRoutes(core, clock),
        "router.connection.linkRoute": ConnectionLinkRoutes(core, requester, clock),
        "router.config.autoLink": ConfigAutoLinks(core),
        "router.config.exchange": ConfigExchanges(core),
        "router.config.binding": ConfigBindings(core),
        "sslProfile": SslProfiles(certificates),
        "discovery": Discovery(group),
        "policy": PolicyEntity(policy, policy_section),
        "vhost": Vhosts(policy, vhost_sections),
        "vhostStats": VhostStats(policy),
        "log": Logs(),
        "logStats": LogStats(),
    }
    if tcp is not None:
        sources["tcpListener"] = TcpBridgeEntities(tcp, BridgeKind.LISTENER)
        sources["tcpConnector"] = TcpBridgeEntities(tcp, BridgeKind.CONNECTOR)
        sources["tcpConnection"] = TcpConnections(tcp, clock)

    def mgmt_nodes() -> list[str]:
        if core.network is None:
            return []
        # Every router of the network, this one included, as qdrouterd answers
        # (qdstat --all-routers walks them).
        return [f"amqp:/_topo/0/{node.id}/$management"
                for node in core.network.protocol.node_table()]

    return Agent(sources, mgmt_nodes=mgmt_nodes, log_records=lambda: list(logs.RECORDER.records),
                 requester=requester)
