"""The ``hopd`` command: options, configuration loading, logging, exit codes.

Owns turning a conf file into running objects (routing core, listeners,
logging) and the process's life: start-up errors, signals, exit status.
Exit 0 on a clean shutdown, 1 when the router cannot start (a listener
cannot listen), 2 for a bad configuration.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import string
import sys
import time
from pathlib import Path

import click

import conf
import router
from addressing import AddressTable
from router import logs
from router.adapter import Engine, connector_settings, listener_settings
from router.core import Router

log = logging.getLogger(__name__)

DEFAULT_CONF_PATH = Path("/etc/hop/hopd.conf")
_TOKEN_ALPHABET = string.ascii_letters + string.digits + "+_"


def random_token(length: int = 15) -> str:
    """Random suffix for generated addresses and ids (as qdrouterd's)."""
    return "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(length))


def _load(path: str | None) -> tuple[conf.RouterConf, str]:
    if path is not None:
        return conf.load(path), path
    if DEFAULT_CONF_PATH.exists():
        return conf.load(str(DEFAULT_CONF_PATH)), str(DEFAULT_CONF_PATH)
    return conf.parse(conf.DEFAULT_CONF_TEXT, "<embedded default>"), "<embedded default>"


def _report(error: conf.ConfError) -> None:
    for diagnostic in error.diagnostics:
        click.echo(str(diagnostic), err=True)
    n = len(error.diagnostics)
    click.echo(f"hopd: configuration rejected ({n} error{'s' if n != 1 else ''})", err=True)


def _configure_logging(cfg: conf.RouterConf) -> None:
    logs.configure(
        logs.LogSpec(
            module=s.module.value,
            enable=s.enable,
            include_timestamp=s.include_timestamp,
            include_source=s.include_source,
            output=s.output_file,
        )
        for s in cfg.logs
    )


def serve(cfg: conf.RouterConf, source: str) -> int:
    """Run the router described by ``cfg`` until SIGTERM/SIGINT."""
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
    engine = Engine(router=core, router_id=router_id,
                    listeners=[listener_settings(s) for s in cfg.listeners],
                    connectors=[connector_settings(s) for s in cfg.connectors])
    engine.enable_management(cfg.router, cfg.ssl_profiles)
    log.info("Router started in %s mode, id=%s (configuration: %s)",
             cfg.router.mode.value.capitalize(), router_id, source)
    try:
        bound = engine.bind()
    except OSError as exc:
        log.critical("Shutting down, required listener failed: %s", exc)
        return 1
    for listener in bound:
        name = f" ({listener.settings.name})" if listener.settings.name else ""
        log.log(logs.NOTICE, "Listening on %s:%d%s", listener.host, listener.port, name)
    engine.start_connectors()
    signal.set_wakeup_fd(engine.wakeup_fd(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda *_: engine.stop())
    signal.signal(signal.SIGINT, lambda *_: engine.stop())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    log.log(logs.NOTICE, "Operational, 1 Threads Running (process ID %d)", os.getpid())
    engine.run()
    log.log(logs.NOTICE, "Shut Down")
    return 0


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False),
              help=f"Configuration file (default {DEFAULT_CONF_PATH}; when that does not "
                   "exist, an embedded standalone configuration listening on "
                   "127.0.0.1:5672).")
@click.option("--check-conf", "check_path", type=click.Path(dir_okay=False),
              help="Validate a configuration file, report every error and exit "
                   "(0 valid, 2 invalid).")
@click.version_option(router.__version__, "-v", "--version", prog_name="hopd")
def hopd(config_path: str | None, check_path: str | None) -> None:
    """Hop, an AMQP 1.0 message router."""
    if check_path is not None:
        try:
            conf.load(check_path)
        except conf.ConfError as exc:
            _report(exc)
            sys.exit(2)
        click.echo(f"{check_path}: configuration is valid")
        sys.exit(0)
    try:
        cfg, source = _load(config_path)
    except conf.ConfError as exc:
        _report(exc)
        sys.exit(2)
    try:
        _configure_logging(cfg)
    except (ValueError, OSError) as exc:
        click.echo(f"hopd: cannot set up logging: {exc}", err=True)
        sys.exit(2)
    router.RAISE_INTERNAL_ERRORS = os.environ.get("HOP_RAISE_INTERNAL_ERRORS") == "1"
    sys.exit(serve(cfg, source))
