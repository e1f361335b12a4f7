"""The ``hopd`` command: options, configuration loading, logging, exit codes.

Owns turning a conf file into running objects (routing core, listeners,
logging) and the process's life: start-up errors, signals, exit status.
Exit 0 on a clean shutdown, 1 when the router cannot start (a listener
cannot listen), 2 for a bad configuration.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import click

import conf
import router
from router import logs, service
from router.adapter import Engine
from router.assembly import assemble, random_token
from router.heap import HeapSnapshots
from router.workers import Joined, Supervisor, WorkerPlan, worker_count

log = logging.getLogger(__name__)

DEFAULT_CONF_PATH = Path("/etc/hop/hopd.conf")
DEFAULT_GRACE_S = 5.0


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


@attrs.frozen(kw_only=True)
class ServiceOptions:
    """How the process runs: detached, its pidfile, its user, its shutdown grace."""

    daemon: bool = False
    pidfile: str | None = None
    user: str | None = None
    shutdown_grace_s: float = DEFAULT_GRACE_S
    #: True: an sslProfile that does not load stops the start; False (hopd's
    #: default, as qdrouterd): it is logged, and what names it refuses.
    tls_errors_stop: bool = False
    #: qdrouterd's ``-T``: stuck deliveries and blocked links after 3 s.
    test_hooks: bool = False
    #: Tests (HOP_RAISE_INTERNAL_ERRORS=1): an unexpected exception handling
    #: an event stops the router instead of being logged.
    raise_internal_errors: bool = False
    #: ``HOP_TRACEMALLOC``: Python's allocations traced, a snapshot on SIGUSR2.
    heap: HeapSnapshots | None = None


class _Begun:
    """A hopd process under way: detached when it runs as a daemon, which
    is told of a failure to start."""

    def __init__(self, daemon: service.Daemon | None) -> None:
        self.daemon = daemon

    def fail(self, message: str, status: int = 1) -> int:
        log.critical("%s", message)
        if self.daemon is not None:
            self.daemon.failed(status, f"hopd: {message}")
        return status

    def run(self, options: ServiceOptions, serving: Callable[[], int]) -> int:
        """Operational: tell the daemon's parent, serve until stopped, remove
        the pidfile; the exit status ``serving`` returns."""
        if self.daemon is not None:
            self.daemon.ready()
        try:
            status = serving()
        finally:
            if options.pidfile is not None:
                problem = service.remove_pidfile(options.pidfile)
                if problem:
                    log.warning("%s", problem)
        log.log(logs.NOTICE, "Shut Down")
        return status


def _begin(options: ServiceOptions) -> _Begun | int:
    """Check the pidfile and detach (``--daemon``); or the exit status when
    a running hopd holds the pidfile."""
    try:
        if options.pidfile is not None:
            service.check_pidfile(options.pidfile)
    except service.ServiceError as exc:
        click.echo(f"hopd: {exc}", err=True)
        return exc.status
    daemon = service.Daemon() if options.daemon else None
    if daemon is not None:
        daemon.detach()
    return _Begun(daemon)


def serve(cfg: conf.RouterConf, source: str,
          options: ServiceOptions | None = None, worker: WorkerPlan | None = None) -> int:
    """Run the router described by ``cfg`` until SIGTERM/SIGINT; with
    ``worker``, as one worker of several (the supervisor owns the pidfile,
    the daemon and the user: ``options`` has none).

    Returns the exit status: 0 after a clean stop, 1 when the router cannot
    start (a listener cannot listen, the pidfile is taken), 2 for a user it
    cannot become.
    """
    options = options or ServiceOptions()
    begun = _begin(options)
    if isinstance(begun, int):
        return begun
    fail = begun.fail
    try:
        assembled = assemble(cfg, source, shutdown_grace_s=options.shutdown_grace_s,
                             tls_errors_stop=options.tls_errors_stop,
                             test_hooks=options.test_hooks,
                             raise_internal_errors=options.raise_internal_errors,
                             worker=worker)
    except service.ServiceError as exc:
        return fail(str(exc), exc.status)
    engine, router_id, bound = assembled.engine, assembled.router_id, assembled.bound
    try:
        if options.pidfile is not None:
            service.write_pidfile(options.pidfile)
        if options.user is not None:
            service.drop_privileges(options.user)
    except service.ServiceError as exc:
        if options.pidfile is not None:
            service.remove_pidfile(options.pidfile)
        return fail(str(exc), exc.status)
    engine.start_connectors()
    signal.set_wakeup_fd(engine.wakeup_fd(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda *_: engine.stop())
    signal.signal(signal.SIGINT, lambda *_: engine.stop())
    signal.signal(signal.SIGHUP, lambda *_: engine.defer(_on_sighup(engine)))
    if options.heap is not None:
        signal.signal(signal.SIGUSR2, lambda *_: engine.defer(_on_sigusr2(options.heap)))
    if worker is not None:
        log.log(logs.NOTICE, "Operational, worker %d of %d, node %s (process ID %d)",
                worker.index, worker.count, router_id, os.getpid())
        engine.loop.add_part(Joined(engine.router, worker, time.monotonic))
    else:
        log.log(logs.NOTICE, "Operational, 1 Threads Running (process ID %d)", os.getpid())
    service.notify("READY=1", f"STATUS=Operational, router {router_id}, "
                              f"{len(bound)} listener{'s' if len(bound) != 1 else ''}",
                   f"MAINPID={os.getpid()}")
    def serving() -> int:
        engine.run(on_drain=_notify_stopping)
        return 0

    return begun.run(options, serving)


def serve_workers(cfg: conf.RouterConf, source: str, count: int,
                  options: ServiceOptions | None = None) -> int:
    """Run the router described by ``cfg`` as ``count`` worker processes
    joined as one router (docs/scaling.md#workers) until SIGTERM/SIGINT.

    This process is the supervisor: it owns the pidfile, the daemon and
    the user, opens every listener once for all workers, and starts a
    worker that dies again.  The exit status is ``serve``'s.
    """
    options = options or ServiceOptions()
    begun = _begin(options)
    if isinstance(begun, int):
        return begun
    fail = begun.fail
    mode = cfg.router.mode.value
    router_id = cfg.router.id or f"{mode.capitalize()}_{random_token()}"
    worker_options = attrs.evolve(options, daemon=False, pidfile=None, user=None)
    supervisor = Supervisor(cfg, count, router_id,
                            lambda plan: serve(cfg, source, worker_options, plan))
    try:
        supervisor.bind()
        if options.user is not None:
            supervisor.give_to(options.user)
            service.drop_privileges(options.user)
    except service.ServiceError as exc:
        supervisor.close()
        return fail(str(exc), exc.status)
    except OSError as exc:
        supervisor.close()
        return fail(f"cannot set up the workers: {exc}")
    failed = supervisor.start()
    if failed:
        return fail(f"a worker could not start (exit status {failed})", failed)
    try:
        if options.pidfile is not None:
            service.write_pidfile(options.pidfile)
    except service.ServiceError as exc:
        supervisor.stop()
        supervisor.run()
        return fail(str(exc), exc.status)
    # qdrouterd's line, which tools that read its logs wait for.
    log.log(logs.NOTICE, "Operational, %d Threads Running (process ID %d)", count, os.getpid())
    log.info("Router %s runs on %d workers", router_id, count)
    service.notify("READY=1", f"STATUS=Operational, router {router_id}, {count} workers",
                   f"MAINPID={os.getpid()}")
    return begun.run(options, supervisor.run)


def _notify_stopping() -> None:
    service.notify("STOPPING=1", "STATUS=Shutting down")


def _on_sighup(engine: Engine) -> Callable[[], None]:
    """SIGHUP: reopen the log files, read the TLS certificates and keys again."""
    def reload() -> None:
        _reopen_logs()
        engine.reload_tls()
    return reload


def _on_sigusr2(heap: HeapSnapshots | None) -> Callable[[], None]:
    """SIGUSR2 with ``HOP_TRACEMALLOC`` set: a snapshot of the heap (router/heap.py)."""
    def snapshot() -> None:
        if heap is not None:
            heap.write()
    return snapshot


def _reopen_logs() -> None:
    """SIGHUP: reopen every log file (after logrotate moved it)."""
    try:
        logs.reopen()
    except OSError as exc:
        log.error("Cannot reopen the log files: %s", exc)
        return
    log.log(logs.NOTICE, "Log files reopened")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False),
              help=f"Configuration file (default {DEFAULT_CONF_PATH}; when that does not "
                   "exist, an embedded standalone configuration listening on "
                   "127.0.0.1:5672).")
@click.option("--check-conf", "check_path", type=click.Path(dir_okay=False),
              help="Validate a configuration file, report every error and exit "
                   "(0 valid, 1 invalid).")
@click.option("-d", "--daemon", is_flag=True,
              help="Run in the background; exit 0 once the router is operational (every "
                   "listener open), or with the error and its status when it cannot start.")
@click.option("-P", "--pidfile", type=click.Path(dir_okay=False),
              help="Write the router's process id to this file once operational; removed "
                   "at exit. A pidfile naming a running hopd refuses the start.")
@click.option("-U", "--user", help="Run as this user (and its group) once the listeners "
                                   "are open; hopd must be started as root.")
@click.option("-I", "--include", "include", multiple=True, metavar="DIR",
              help="Accepted for compatibility with qdrouterd; has no effect.")
@click.option("-T", "--test-hooks", "test_hooks", is_flag=True,
              help="qdrouterd's test hooks: stuck deliveries and blocked links are "
                   "flagged after 3 s instead of 10, and 2 idle streaming links are kept "
                   "per connection instead of 4.")
@click.option("--shutdown-grace", "shutdown_grace_s", type=click.FloatRange(min=0),
              default=DEFAULT_GRACE_S, show_default=True, metavar="SECONDS",
              help="On SIGTERM or SIGINT, how long in-flight deliveries may take to "
                   "settle before the rest are released; a second signal ends it at once.")
@click.option("--tls-errors", "tls_errors", type=click.Choice(["stop", "log"]), default="log",
              show_default=True,
              help="An sslProfile that does not load (a missing file, a wrong password, "
                   "protocols or ciphers OpenSSL refuses): log it and start, as qdrouterd "
                   "does (a listener naming it closes every connection, a connector naming "
                   "it fails every attempt), or stop the start-up with status 1.")
@click.option("--workers", "workers", type=click.IntRange(min=1, max=1024), default=None,
              metavar="N",
              help="Run the router on N cores: N worker processes seen from outside as one "
                   "router (docs/scaling.md#workers). Default: the conf file's "
                   "workerThreads, else 1.")
@click.version_option(router.__version__, "-v", "--version", prog_name="hopd",
                      message=f"%(prog)s, version %(version)s ({router.installed_build()} build)")
def hopd(config_path: str | None, check_path: str | None, daemon: bool,
         pidfile: str | None, user: str | None, include: tuple[str, ...],
         test_hooks: bool, shutdown_grace_s: float, tls_errors: str,
         workers: int | None) -> None:
    """Hop, an AMQP 1.0 message router."""
    if check_path is not None:
        try:
            conf.load(check_path)
        except conf.ConfError as exc:
            _report(exc)
            sys.exit(1)
        click.echo(f"{check_path}: configuration is valid")
        sys.exit(0)
    try:
        cfg, source = _load(config_path)
    except conf.ConfError as exc:
        _report(exc)
        sys.exit(1)
    if cfg.discovery is not None and cfg.router.mode.value != "interior":
        click.echo("hopd: a discovery group needs router mode: interior", err=True)
        sys.exit(1)
    if user is not None and os.geteuid() != 0:
        click.echo(f"hopd: -U {user} needs hopd to be started as root", err=True)
        sys.exit(1)
    try:
        _configure_logging(cfg)
    except (ValueError, OSError) as exc:
        click.echo(f"hopd: cannot set up logging: {exc}", err=True)
        sys.exit(1)
    try:
        heap = HeapSnapshots.from_environment(os.environ)
    except ValueError as exc:
        click.echo(f"hopd: {exc}", err=True)
        sys.exit(1)
    if heap is not None:
        heap.start()
        # Until the router serves and takes SIGUSR2 for a snapshot, one that
        # comes early is ignored rather than ending the process.
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    options = ServiceOptions(daemon=daemon,
                             pidfile=os.path.abspath(pidfile) if pidfile else None,
                             user=user, shutdown_grace_s=shutdown_grace_s,
                             tls_errors_stop=tls_errors == "stop", test_hooks=test_hooks,
                             raise_internal_errors=os.environ.get(
                                 "HOP_RAISE_INTERNAL_ERRORS") == "1", heap=heap)
    if workers is not None and workers > 1 and cfg.discovery is not None:
        click.echo("hopd: --workers does not go with a discovery group yet", err=True)
        sys.exit(1)
    count, why_one = worker_count(cfg, workers)
    if why_one:
        log.log(logs.NOTICE, "%s", why_one)
    if count > 1:
        sys.exit(serve_workers(cfg, source, count, options))
    sys.exit(serve(cfg, source, options))
