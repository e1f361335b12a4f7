"""Turning a configuration into a bound, running-ready router.

Owns building the routing core and the engine from a ``conf.RouterConf``,
opening its listeners and joining its peer group: what ``hopd`` and an
embedded peer router (``router.embedded``) both do before running the loop.
The caller owns the process (signals, pidfile, threads) and runs
``engine.run()``.
"""

from __future__ import annotations

import logging
import secrets
import string
import time

import attrs

import conf
from addressing import AddressTable
from router import logs
from router.adapter import Engine, connector_settings, listener_settings
from router.adapter.connections import Listener
from router.adapter.discovery import DiscoverySettings
from router.adapter.settings import SaslError, vhost_from_section
from router.adapter.tls import TlsError, load_profiles
from router.core import Role, Router
from router.core.policy import Policy
from router.service import ServiceError

__all__ = ["Assembled", "assemble", "discovery_settings", "random_token"]

log = logging.getLogger("router.cli")

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


def assemble(cfg: conf.RouterConf, source: str, *, shutdown_grace_s: float) -> Assembled:
    """Build the router ``cfg`` describes, open its listeners, join its group.

    Raises:
        ServiceError: a listener cannot listen (status 1), the peer group cannot
            be joined (1) or is misconfigured (2).  Whatever was opened is closed.
    """
    mode = cfg.router.mode.value
    router_id = cfg.router.id or f"{mode.capitalize()}_{random_token()}"
    table = AddressTable()
    for spec in cfg.addresses:
        table.add(spec)
    r = cfg.router
    core = Router(router_id=router_id, addresses=table,
                  default_distribution=r.default_distribution, token=random_token,
                  interior=mode == "interior", instance=int(time.time()),
                  timers={"hello_interval_s": r.hello_interval_seconds,
                          "hello_max_age_s": r.hello_max_age_seconds,
                          "ra_interval_s": r.ra_interval_seconds,
                          "ra_interval_flux_s": r.ra_interval_flux_seconds,
                          "remote_ls_max_age_s": r.remote_ls_max_age_seconds},
                  auto_links=cfg.auto_links, link_routes=cfg.link_routes,
                  allow_resumable_link_route=r.allow_resumable_link_route)
    try:
        profiles = load_profiles(cfg.ssl_profiles)
        listeners = [listener_settings(s, profiles, cfg.router) for s in cfg.listeners]
        connectors = [connector_settings(s, profiles) for s in cfg.connectors]
    except (TlsError, SaslError) as exc:
        raise ServiceError(str(exc), status=2) from None
    engine = Engine(router=core, router_id=router_id, listeners=listeners,
                    connectors=connectors, shutdown_grace_s=shutdown_grace_s)
    engine.tls_profiles = profiles
    engine.policy_section = cfg.policy
    try:
        engine.policy = build_policy(cfg)
        engine.vhost_sections = vhost_sections(cfg)
    except (ValueError, conf.ConfError) as exc:
        engine.close()
        raise ServiceError(str(exc), status=2) from None
    engine.enable_management(cfg.router)
    log.info("Router started in %s mode, id=%s (configuration: %s)",
             mode.capitalize(), router_id, source)
    try:
        bound = engine.bind()
    except OSError as exc:
        engine.close()
        raise ServiceError(f"Shutting down, required listener failed: {exc}") from None
    for listener in bound:
        name = f" ({listener.settings.name})" if listener.settings.name else ""
        log.log(logs.NOTICE, "Listening on %s:%d%s", listener.host, listener.port, name)
    if cfg.discovery is not None:
        try:
            engine.join_group(discovery_settings(cfg.discovery, bound), int(time.time()))
        except ServiceError:
            engine.close()
            raise
        except OSError as exc:
            engine.close()
            raise ServiceError(
                f"cannot join peer group {cfg.discovery.group!r}: {exc}") from None
    return Assembled(engine, router_id, bound)


def build_policy(cfg: conf.RouterConf) -> Policy:
    """The router's policy from its ``policy`` and ``vhost`` sections, and
    the vhosts of the files in ``policyDir``.

    Raises:
        ValueError: a vhost defined twice.
        conf.ConfError: a policyDir file that cannot be read or is invalid.
    """
    p = cfg.policy
    vhosts = [vhost_from_section(section, log.warning)
              for section in vhost_sections(cfg).values()]
    return Policy(max_connections=p.max_connections, enabled=p.enable_vhost_policy,
                  vhosts=vhosts, default_vhost=p.default_vhost,
                  max_message_size=p.max_message_size)


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
                "'interface' to the address peers should connect to", status=2)
        return interface
    return listener.host


def discovery_settings(section: conf.DiscoverySection,
                       bound: list[Listener]) -> DiscoverySettings:
    """The peer group's settings with its announced listeners resolved: the
    inter-router one peers connect to, and every ``normal`` one clients may
    use (client-side discovery, ``router.discover``).

    Raises:
        ServiceError: no listener to announce, or the secret file cannot be read
            (status 2).
    """
    if section.listener is not None:
        chosen = [li for li in bound if li.settings.name == section.listener]
        if not chosen:
            raise ServiceError(f"discovery: no listener named {section.listener!r}", status=2)
    else:
        chosen = [li for li in bound if li.settings.role is Role.INTER_ROUTER]
        if len(chosen) != 1:
            raise ServiceError(
                f"discovery: {len(chosen)} inter-router listeners; name the one to announce "
                "with 'listener'", status=2)
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
                status=2) from None
    return DiscoverySettings(
        group=section.group, address=section.address, port=section.port,
        interface=interface, ttl=section.ttl, interval_s=section.announce_interval / 1000.0,
        expiry_s=section.expiry / 1000.0, secret=secret.encode() if secret else None,
        announce_host=host, announce_port=announced.port, clients=clients)
