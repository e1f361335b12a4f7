"""The composition root: a configuration turned into a running-ready router.

Owns building the routing core and every part of the adapter from a
``conf.RouterConf`` and wiring them, in ``build_engine``: the loop, the
AMQP connections and the per-message path, the parts that open
connections and attach links, management, the listeners, connectors,
HTTP endpoints and peer group; then opening the listeners and joining the
peer group (``assemble``).  That is what ``hopd`` and an embedded peer
router (``router.embedded``) both do before running the loop.  The caller
owns the process (signals, pidfile, threads) and runs ``engine.run()``.
"""

from __future__ import annotations

import logging
import secrets
import socket
import string
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

import conf
from addressing import AddressTable
from router import __version__, installed_build, logs
from router.adapter import (
    ConnectorSettings,
    Engine,
    Listener,
    ListenerSettings,
    SaslError,
    connector_settings,
    listener_settings,
    vhost_from_section,
)
from router.adapter.admin.entities import build_agent
from router.adapter.admin.node import ManagementNode
from router.adapter.admin.stats import RouterStats
from router.adapter.connections.authservice import AuthRelays
from router.adapter.connections.certificates import Certificates
from router.adapter.connections.connectors import Connectors
from router.adapter.connections.listeners import HttpHandoff, Listeners, Upgrades
from router.adapter.connections.peergroup import DiscoverySettings, PeerGroup
from router.adapter.connections.settings import MESH_NAME, TCP_ADAPTOR_NAME, internal
from router.adapter.connections.tls import TlsError, TlsProfile, load_profiles
from router.adapter.connections.transports import Transports
from router.adapter.effects import Effects
from router.adapter.endpoints.attaching import Attaching
from router.adapter.endpoints.lifecycle import EndpointEvents, Teardown
from router.adapter.endpoints.links import Departures, Links
from router.adapter.endpoints.opening import Opening
from router.adapter.endpoints.ownlinks import OwnLinks
from router.adapter.endpoints.reaping import Reaper
from router.adapter.endpoints.sessions import Sessions
from router.adapter.endpoints.trunks import IDLE_KEPT, Trunks
from router.adapter.events import Events
from router.adapter.forwarding.exchanges import ExchangeForwarding
from router.adapter.forwarding.forwarder import Forwarder
from router.adapter.forwarding.relay import Relay
from router.adapter.http.console import Console
from router.adapter.http.gathered import GatheredMetrics
from router.adapter.http.metrics import CONTENT_TYPE, Exposition
from router.adapter.http.server import HttpServer
from router.adapter.loop.eventloop import EventLoop
from router.adapter.loop.timers import CoreTimers
from router.adapter.loop.trim import HeapTrim
from router.adapter.pending import Pending
from router.adapter.sweep import Sweep
from router.adapter.tcp.bridges import TcpBridges, bridge_of
from router.core import Connection, Role, Router
from router.core.policy import Policy
from router.core.routing import ProtocolTimers
from router.core.tcp import TcpServices
from router.core.watch import Watch
from router.service import ServiceError
from router.workers import WorkerPlan

__all__ = ["Assembled", "assemble", "bind", "build_engine", "discovery_settings",
           "random_token"]

log = logging.getLogger(__name__)

_TOKEN_ALPHABET = string.ascii_letters + string.digits + "+_"


def random_token(length: int = 15) -> str:
    """Random suffix for generated addresses and ids (as qdrouterd's)."""
    return "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(length))


@attrs.frozen
class Assembled:
    """A router with its listeners open, ready for ``engine.run()``."""

    engine: Engine
    router_id: str
    bound: list[Listener]


def build_engine(*, core: Router, router_id: str,
                 connectors: Iterable[ConnectorSettings] = (),
                 section: conf.RouterSection | None = None,
                 policy: Policy | None = None,
                 policy_section: conf.PolicySection | None = None,
                 vhost_sections: dict[str, conf.VhostSection] | None = None,
                 tls_profiles: dict[str, TlsProfile] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 shutdown_grace_s: float = 0.0, management: bool = True,
                 stuck_s: float | None = None, idle_streaming_links: int = IDLE_KEPT,
                 raise_internal_errors: bool = False,
                 worker: WorkerPlan | None = None,
                 auth_service_plugins: Iterable[conf.AuthServicePluginSection] = ()) -> Engine:
    """Build every part of the adapter around ``core`` and wire them.

    Listeners are opened afterwards (``bind``), and a peer group joined
    (``engine.group.join``).  Without ``management`` the router serves no
    ``$management`` node (in-process tests and measurements).  ``worker``:
    the router is one worker of several (docs/scaling.md#workers).
    """
    index, count = (worker.index, worker.count) if worker is not None else (0, 1)
    section = section if section is not None else conf.RouterSection()
    policy = policy if policy is not None else Policy()
    profiles = tls_profiles if tls_profiles is not None else {}
    loop = EventLoop(clock)
    pending = Pending()
    links = Links()
    sessions = Sessions()
    trunks = Trunks(core, links, sessions, pending, idle_streaming_links)
    forwarder = Forwarder(core, router_id, pending, clock, trunks)
    relay = Relay(pending, forwarder.buffer)
    departures = Departures(links, forwarder, relay)
    relays = AuthRelays(loop, pending.output, router_id, clock)
    transports = Transports(loop, pending, router_id, first_id=index + 1, id_step=count,
                            relays=relays)
    logs.on_change(transports, transports.trace_all)
    own = OwnLinks(core, links, departures, sessions, relay, pending, transports.by_connection,
                   clock)
    opening = Opening(core, router_id, policy, profiles, transports.by_connection,
                      transports.by_transport, clock)
    attaching = Attaching(core, links, departures, own, policy, pending,
                          transports.by_connection, clock, forwarder.flow)
    effects = Effects(own, forwarder, lambda conn, why: _close(transports, conn, why),
                      attaching.lookup_answered)
    services = TcpServices()
    stats = RouterStats(core=core, router_id=router_id, section=section,
                        connections=transports, links=links, counters=forwarder.counters,
                        clock=clock, workers=count,
                        siblings=frozenset(worker.siblings() if worker is not None else ()),
                        tcp=services)
    handoff: HttpHandoff = deque()
    listeners = Listeners(loop, transports, policy, handoff)
    # One router to the network: its inter-router connections are the
    # first worker's; the others reach other routers through it.
    held = None if worker is None or worker.index == 0 or core.edge_mode else _inter_router
    connector_part = Connectors(loop, transports, list(connectors), held)
    group = PeerGroup(loop, connector_part)
    certificates = Certificates(profiles, listeners, connector_part, section,
                                plugins={p.name or "": p for p in auth_service_plugins})
    adaptor = listener_settings(conf.ListenerSection(
        name=TCP_ADAPTOR_NAME, port="0", idle_timeout_seconds=0, max_frame_size=65536,
        strip_annotations=conf.StripAnnotations.OUT))
    tcp = TcpBridges(loop, services,
                     lambda sock: _serve(transports, sock, adaptor), profiles=profiles)
    agent = build_agent(core=core, stats=stats, connections=transports, listeners=listeners,
                        connectors=connector_part, certificates=certificates, policy=policy,
                        policy_section=policy_section or conf.PolicySection(),
                        vhost_sections=vhost_sections if vhost_sections is not None else {},
                        group=group, clock=clock, tcp=tcp)
    node = ManagementNode(
        core, forwarder, agent, effects.apply, policy, raise_internal_errors,
        siblings=worker.siblings() if worker is not None else (),
        group_id=worker.group if worker is not None else router_id,
        clock=clock) if management else None
    console = Console(agent=agent, apply=effects.apply, policy=policy, node=node,
                      router_id=router_id, edge_mode=core.edge_mode, defer=loop.defer,
                      clock=clock)
    exposition = Exposition(stats)
    metrics: Callable[[Callable[[bytes], None]], None] = exposition.scrape
    gathered = None
    if node is not None and node.workers is not None:
        # The whole router's metrics, from every worker (docs/scaling.md#workers).
        metrics = gathered = GatheredMetrics(node, exposition, router_id, clock)
    http = HttpServer(loop, metrics, CONTENT_TYPE, handoff, Upgrades(transports, policy), console)
    endpoints = EndpointEvents(transports, opening, attaching, pending, effects.apply)
    teardown = Teardown(router=core, transports=transports, departures=departures, own=own,
                        policy=policy, connectors=connector_part, pending=pending,
                        apply=effects.apply)
    events = Events(transports=transports, pending=pending, forwarder=forwarder, relay=relay,
                    links=links, endpoints=endpoints, teardown=teardown, effects=effects,
                    management=node,
                    exchanges=ExchangeForwarding(core, forwarder, raise_internal_errors),
                    raise_internal_errors=raise_internal_errors)
    watch = None if stuck_s is None else Watch(stuck_s=stuck_s, blocked_s=stuck_s)
    for part in (Sweep(transports, watch), listeners, connector_part, group, http, trunks,
                 console, relays, tcp, CoreTimers(core, effects.apply),
                 Reaper(transports.conns, lambda: (links.table, own.attaching, attaching.parked),
                        lambda: {*sessions.sessions, *own.shared.values()}, clock),
                 HeapTrim.for_this_process(clock)):
        loop.add_part(part)
    if node is not None and node.workers is not None:
        loop.add_part(node.workers)
    if gathered is not None:
        loop.add_part(gathered)
    return Engine(router=core, loop=loop, transports=transports, events=events,
                  forwarder=forwarder, listeners=listeners, connectors=connector_part,
                  certificates=certificates, group=group,
                  shutdown_grace_s=shutdown_grace_s, tcp=tcp)


def _serve(transports: Transports, sock: socket.socket, settings: ListenerSettings) -> None:
    """Serve one end of a socket pair as an accepted AMQP connection."""
    transports.start(sock, settings, TCP_ADAPTOR_NAME)


def _close(transports: Transports, conn: Connection, why: str) -> None:
    """Close ``conn`` from this side (the core asked: an edge went silent)."""
    if conn.handle is not None:
        transports.close_connection(conn.handle, why)


def bind(engine: Engine, listeners: Iterable[ListenerSettings],
         worker: WorkerPlan | None = None,
         section: conf.RouterSection | None = None) -> list[Listener]:
    """Open every listening socket, or take a worker's (already listening,
    in the same order); raises OSError if one cannot listen.  ``section``:
    the router's, whose SASL configuration the workers' own listener uses
    too (proton sets Cyrus SASL up once per process, from the first
    listener whose connection authenticates)."""
    if worker is None:
        return [engine.listeners.listen(settings) for settings in listeners]
    bound = [engine.listeners.listen(settings, sock)
             for settings, sock in zip(listeners, worker.sockets, strict=True)]
    if worker.mesh_socket is not None:
        mesh = listener_settings(conf.ListenerSection(
            name=MESH_NAME, host=worker.mesh_path(worker.index), port="0",
            role=Role.INTER_ROUTER), router=section)
        engine.listeners.listen(mesh, worker.mesh_socket)
    return bound



#: How soon a worker's siblings hear of its new and gone addresses (one
#: router's threads know at once; other routers at the next second's tick).
MOBILE_BATCH_S = 0.01


def _inter_router(settings: ConnectorSettings) -> bool:
    """Whether a connector joins this router to another (not to a sibling
    worker)."""
    return settings.role is Role.INTER_ROUTER and not internal(settings.name)


def mesh_connectors(worker: WorkerPlan) -> list[ConnectorSettings]:
    """A worker's connectors to the siblings before it (each pair of
    workers is joined once: the later one connects)."""
    if worker.mesh_socket is None:
        return []
    return [connector_settings(conf.ConnectorSection(
        name=f"{MESH_NAME}-{j}", host=worker.mesh_path(j), port="0", role=Role.INTER_ROUTER,
        initial_reconnect_delay=100, max_reconnect_delay=1000))
        for j in range(worker.index)]


#: With qdrouterd's test hooks (``-T``): the age of a stuck delivery and of a
#: blocked link, as qdrouterd's.
TEST_HOOKS_STUCK_S = 3.0
#: With test hooks: idle streaming links kept per connection, as qdrouterd's.
TEST_HOOKS_IDLE_STREAMING = 2

_S = TypeVar("_S", conf.ListenerSection, conf.ConnectorSection)
_T = TypeVar("_T", ListenerSettings, ConnectorSettings)


def _refusing(sections: Iterable[_S], kind: str, settings: Callable[[_S], _T],
              broken: Mapping[str, TlsError]) -> list[_T]:
    """As qdrouterd does, a listener or connector whose sslProfile did not
    load is kept without TLS and ``refused``: it closes every connection it
    accepts, or fails every attempt. One whose settings fail otherwise is
    left out. Each is logged."""
    made = []
    for section in sections:
        error = broken.get(section.ssl_profile or "")
        name = section.name or f"{section.host or ''}:{section.port}"
        try:
            if error is None:
                made.append(settings(section))
                continue
            without: dict[str, Any] = {"ssl_profile": None}
            if isinstance(section, conf.ListenerSection):
                without["require_ssl"] = False
            plain = attrs.evolve(section, **without)
            made.append(attrs.evolve(settings(plain), refused=str(error),
                                     refused_ca=error.attribute == "caCertFile"))
            log.error("%s %s %s: %s", kind, name, "closes every connection"
                      if kind == "listener" else "fails every attempt", error)
        except TlsError as other:
            log.error("%s %s is not opened: %s", kind, name, other)
    return made


def assemble(cfg: conf.RouterConf, source: str, *, shutdown_grace_s: float,
             tls_errors_stop: bool = True, test_hooks: bool = False,
             raise_internal_errors: bool = False,
             worker: WorkerPlan | None = None) -> Assembled:
    """Build the router ``cfg`` describes, open its listeners, join its group.

    ``tls_errors_stop`` False is qdrouterd's way with TLS: an sslProfile that
    does not load is logged instead of stopping the start-up; a listener
    naming it closes every connection, a connector naming it fails every attempt
    (docs/security.md#tls). ``test_hooks`` (hopd's ``-T``, as qdrouterd's)
    flags stuck deliveries and blocked links after 3 s instead of 10.
    ``raise_internal_errors`` (tests) lets an unexpected exception handling
    an event stop the router instead of being logged.  ``worker``: the
    router is one worker of several (docs/scaling.md): its id, listening
    sockets and siblings come from the plan.

    Raises:
        ServiceError: a listener cannot listen (status 1), the peer group cannot
            be joined (1) or is misconfigured (2).  Whatever was opened is closed.
    """
    mode = cfg.router.mode.value
    router_id = cfg.router.id or f"{mode.capitalize()}_{random_token()}"
    interior = mode == "interior"
    joined = worker is not None and worker.mesh_socket is not None
    if worker is not None:
        router_id = worker.router_id
        # Workers joined as a local network speak the routing protocol.
        interior = interior or joined
    table = AddressTable()
    for spec in cfg.addresses:
        table.add(spec)
    r = cfg.router
    instance = int(time.time())
    core = Router(router_id=router_id, addresses=table,
                  default_distribution=r.default_distribution, token=random_token,
                  interior=interior, edge=mode == "edge", instance=instance,
                  timers=ProtocolTimers(hello_interval_s=r.hello_interval_seconds,
                                        hello_max_age_s=r.hello_max_age_seconds,
                                        ra_interval_s=r.ra_interval_seconds,
                                        ra_interval_flux_s=r.ra_interval_flux_seconds,
                                        remote_ls_max_age_s=r.remote_ls_max_age_seconds,
                                        mobile_batch_s=MOBILE_BATCH_S if joined else None),
                  auto_links=cfg.auto_links, link_routes=cfg.link_routes,
                  exchanges=cfg.exchanges, bindings=cfg.bindings,
                  allow_resumable_link_route=r.allow_resumable_link_route,
                  redelivery_limit=r.redelivery_limit)
    plugins = {p.name or "": p for p in cfg.auth_service_plugins}
    try:
        if tls_errors_stop:
            profiles = load_profiles(cfg.ssl_profiles)
            listeners = [listener_settings(s, profiles, cfg.router, plugins)
                         for s in cfg.listeners]
            connectors = [connector_settings(s, profiles) for s in cfg.connectors]
        else:
            broken: dict[str, TlsError] = {}

            def failed(section: conf.SslProfileSection, error: TlsError) -> None:
                log.error("%s; listeners naming it close every connection, connectors "
                          "naming it fail every attempt", error)
                broken[section.name or ""] = error

            profiles = load_profiles(cfg.ssl_profiles, failed=failed)
            listeners = _refusing(cfg.listeners, "listener",
                                  lambda s: listener_settings(s, profiles, cfg.router, plugins),
                                  broken)
            connectors = _refusing(cfg.connectors, "connector",
                                   lambda s: connector_settings(s, profiles), broken)
        if worker is not None:
            connectors += mesh_connectors(worker)
        sections = vhost_sections(cfg)
        policy = build_policy(cfg, sections)
    except (TlsError, SaslError, ValueError, conf.ConfError) as exc:
        raise ServiceError(str(exc), status=1) from None
    engine = build_engine(core=core, router_id=router_id, connectors=connectors,
                          section=cfg.router, policy=policy, policy_section=cfg.policy,
                          vhost_sections=sections, tls_profiles=profiles,
                          shutdown_grace_s=shutdown_grace_s,
                          stuck_s=TEST_HOOKS_STUCK_S if test_hooks else None,
                          idle_streaming_links=TEST_HOOKS_IDLE_STREAMING if test_hooks
                          else IDLE_KEPT, raise_internal_errors=raise_internal_errors,
                          worker=worker, auth_service_plugins=cfg.auth_service_plugins)
    # qdrouterd's first lines, which tools that read its logs look for.
    log.info("Container Name: %s", router_id)
    log.getChild("router").info("Version: %s", __version__)
    if installed_build() == "pure":
        log.log(logs.NOTICE, "The pure build: the per-message modules are not compiled, so each "
                "message costs about 1.7x the CPU (docs/performance.md#the-compiled-build)")
    log.info("Router started in %s mode, id=%s (configuration: %s)",
             mode.capitalize(), router_id, source)
    try:
        bound = bind(engine, listeners, worker, cfg.router)
    except OSError as exc:
        engine.close()
        raise ServiceError(f"Shutting down, required listener failed: {exc}") from None
    try:
        _tcp_bridges(engine, cfg, worker)
    except OSError as exc:
        engine.close()
        raise ServiceError(f"Shutting down, required TCP listener failed: {exc}") from None
    except TlsError as exc:
        engine.close()
        raise ServiceError(f"Shutting down, a TCP bridge's TLS cannot be used: {exc}") from None
    if cfg.discovery is not None:
        try:
            engine.group.join(discovery_settings(cfg.discovery, bound), router_id, instance)
        except ServiceError:
            engine.close()
            raise
        except OSError as exc:
            engine.close()
            raise ServiceError(
                f"cannot join peer group {cfg.discovery.group!r}: {exc}") from None
    return Assembled(engine, router_id, bound)


def _tcp_bridges(engine: Engine, cfg: conf.RouterConf, worker: WorkerPlan | None) -> None:
    """Open the TCP bridges (docs/tcp.md); with workers, the first worker
    serves them all.  Raises OSError when a listener cannot listen, TlsError
    when a bridge's sslProfile cannot serve it."""
    if not (cfg.tcp_listeners or cfg.tcp_connectors) or engine.tcp is None:
        return
    if worker is not None and worker.index != 0:
        return
    tcp = engine.tcp
    for connector in cfg.tcp_connectors:
        tcp.add_connector(bridge_of(connector), tcp.tls_context(connector))
    for listener in cfg.tcp_listeners:
        tcp.add_listener(bridge_of(listener), tcp.tls_context(listener))


def build_policy(cfg: conf.RouterConf, sections: dict[str, conf.VhostSection]) -> Policy:
    """The router's policy from its ``policy`` section and its vhosts."""
    p = cfg.policy
    vhosts = [vhost_from_section(section, log.warning) for section in sections.values()]
    return Policy(max_connections=p.max_connections, enabled=p.enable_vhost_policy,
                  vhosts=vhosts, default_vhost=p.default_vhost,
                  max_message_size=p.max_message_size,
                  name_patterns=p.enable_vhost_name_patterns)


def vhost_sections(cfg: conf.RouterConf) -> dict[str, conf.VhostSection]:
    """The conf's vhost sections and those of the files in ``policyDir``, by hostname.

    Raises:
        ValueError: a vhost defined twice.
        conf.ConfError: a policyDir file that cannot be read or is invalid.
    """
    sections = list(cfg.vhosts)
    if cfg.policy.policy_dir:
        sections.extend(conf.load_policy_dir(cfg.policy.policy_dir))
    found: dict[str, conf.VhostSection] = {}
    for section in sections:
        if section.hostname in found:
            raise ValueError(f"vhost {section.hostname!r} is defined twice")
        found[section.hostname] = section
    return found


def _announced_host(listener: Listener, interface: str | None) -> str:
    if listener.host in ("", "0.0.0.0"):
        if interface is None:
            raise ServiceError(
                "discovery: the announced listener listens on every address; set "
                "'interface' to the address peers should connect to", status=1)
        return interface
    return listener.host


def discovery_settings(section: conf.DiscoverySection,
                       bound: list[Listener]) -> DiscoverySettings:
    """The peer group's settings with its announced listeners resolved: the
    inter-router one peers connect to, and every ``normal`` one clients may
    use (client-side discovery, ``router.discover``).

    Raises:
        ServiceError: no listener to announce, or the secret file cannot be read
            (status 1).
    """
    if section.listener is not None:
        chosen = [li for li in bound if li.settings.name == section.listener]
        if not chosen:
            raise ServiceError(f"discovery: no listener named {section.listener!r}", status=1)
    else:
        chosen = [li for li in bound if li.settings.role is Role.INTER_ROUTER]
        if len(chosen) != 1:
            raise ServiceError(
                f"discovery: {len(chosen)} inter-router listeners; name the one to announce "
                "with 'listener'", status=1)
    announced = chosen[0]
    host = _announced_host(announced, section.interface)
    interface = section.interface or host
    clients = tuple((_announced_host(li, section.interface), li.port) for li in bound
                    if li.settings.role is Role.NORMAL and not li.settings.http)
    secret = section.secret
    if secret is None and section.secret_file is not None:
        try:
            with open(section.secret_file, encoding="utf-8") as file:
                secret = file.readline().rstrip("\n")
        except OSError as exc:
            raise ServiceError(
                f"discovery: cannot read secretFile {section.secret_file}: {exc.strerror}",
                status=1) from None
    return DiscoverySettings(
        group=section.group, address=section.address, port=section.port,
        interface=interface, ttl=section.ttl, interval_s=section.announce_interval / 1000.0,
        expiry_s=section.expiry / 1000.0, secret=secret.encode() if secret else None,
        announce_host=host, announce_port=announced.port, clients=clients, section=section)
