"""One router on several cores: a supervisor and its worker processes
(docs/scaling.md#workers).

Owns the supervisor's side: binding every listener of the conf file once
(the workers inherit the listening sockets and accept from them, so each
listener is one port whoever serves it), the Unix sockets that join the
workers as a local router network, starting the workers (``os.fork``,
each running a whole router through the ``run`` callable it is given),
waiting until each is operational, passing SIGTERM, SIGINT and SIGHUP on,
and starting a worker again after it died.  It runs no event loop and
touches no connection: what a worker does is ``router.cli.serve`` with a
``WorkerPlan``.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pwd
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable

import attrs

import conf
from router import logs
from router.adapter.connections.listeners import listening_socket
from router.core import Router
from router.service import ServiceError

__all__ = ["Joined", "Supervisor", "WorkerPlan", "reachable", "worker_id"]

log = logging.getLogger(__name__)

#: The signals the supervisor waits for (blocked, then taken with sigwaitinfo).
_SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
#: A worker that ran this long before it died is started again at once;
#: one that died sooner waits twice as long as the last time, up to
#: ``MAX_RESTART_DELAY_S``.
STEADY_S = 30.0
FIRST_RESTART_DELAY_S = 0.5
MAX_RESTART_DELAY_S = 30.0
#: A worker that raised out of ``run``.
_CRASHED = 70
#: The longest the supervisor waits before it looks for dead workers.
_POLL_S = 0.5
#: How long a worker waits for routes to its siblings before it says it
#: is ready all the same.
JOIN_TIMEOUT_S = 15.0


def worker_count(cfg: conf.RouterConf, workers: int | None) -> tuple[int, str]:
    """How many workers the router runs on: ``hopd --workers``, else the
    conf file's ``workerThreads`` (1 when it does not say), and why a
    ``workerThreads`` above 1 runs one worker, if it does: a peer group
    (``discovery``) or an edge router, whose workers would each be an edge
    of its own, not one router (docs/scaling.md#workers)."""
    if workers is not None:
        return workers, ""
    asked = cfg.router.worker_threads or 1
    if asked == 1:
        return 1, ""
    if cfg.discovery is not None:
        return 1, f"workerThreads: {asked} is not run with a discovery group: one worker"
    if cfg.router.mode.value == "edge":
        return 1, (f"workerThreads: {asked} is not run by an edge router: one worker "
                   "(hopd --workers runs an edge router's workers as edges of their own)")
    return asked, ""


def worker_id(router_id: str, index: int) -> str:
    """Worker ``index``'s node id: the router's own for the first, then
    ``<id>.w<index>`` (docs/scaling.md#workers)."""
    return router_id if index == 0 else f"{router_id}.w{index}"


@attrs.frozen(kw_only=True)
class WorkerPlan:
    """What one worker is given: which it is, its node id, the listening
    sockets of the conf file's listeners (in their order), and its place in
    the mesh (None: the workers are not joined, as edge routers)."""

    index: int
    count: int
    #: The router's id (worker 0's node id).
    group: str
    #: This worker's node id.
    router_id: str
    sockets: tuple[socket.socket, ...]
    mesh_dir: str | None = None
    mesh_socket: socket.socket | None = None
    #: Written to once the worker is operational.
    ready_fd: int | None = None

    def siblings(self) -> tuple[str, ...]:
        """The node ids of the other workers (joined to this one, or for an
        edge router's workers, reached through the interior)."""
        return tuple(worker_id(self.group, i) for i in range(self.count) if i != self.index)

    def mesh_path(self, index: int) -> str:
        """The Unix socket worker ``index`` accepts its siblings on."""
        assert self.mesh_dir is not None
        return _mesh_path(self.mesh_dir, index)


def _mesh_path(folder: str, index: int) -> str:
    return os.path.join(folder, f"w{index}")


def reachable(core: Router, nodes: tuple[str, ...]) -> bool:
    """Whether ``core`` has a route to each of ``nodes``."""
    network = core.network
    if network is None:
        return not nodes
    routed = {n.id for n in network.protocol.node_table() if not n.is_self and n.cost is not None}
    return set(nodes) <= routed


class Joined:
    """A part of a worker's loop until the worker has routes to all its
    siblings: then it tells the supervisor it is ready (after
    ``JOIN_TIMEOUT_S`` it does so anyway, with a warning), so that the
    router is operational only once its workers are one."""

    def __init__(self, core: Router, plan: WorkerPlan, clock: Callable[[], float]) -> None:
        self.core = core
        # An edge router's workers are not joined: each is ready at once.
        self.siblings = () if core.edge_mode else plan.siblings()
        self.fd = plan.ready_fd
        self.clock = clock
        self.give_up_at = clock() + JOIN_TIMEOUT_S
        self.check_at = clock()

    def next_deadline(self) -> float | None:
        return None if self.fd is None else self.check_at

    def tick(self, now: float) -> None:
        if self.fd is None or now < self.check_at:
            return
        if not reachable(self.core, self.siblings):
            if now < self.give_up_at:
                self.check_at = now + 0.05
                return
            log.warning("No route to every other worker after %g s; ready all the same",
                        JOIN_TIMEOUT_S)
        os.write(self.fd, b"1")
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


@attrs.define
class _Worker:
    index: int
    pid: int = 0
    started: float = 0.0
    #: While dead and waiting to start again: when.
    restart_at: float | None = None
    delay_s: float = FIRST_RESTART_DELAY_S


class Supervisor:
    """N workers of the router ``cfg`` describes.

    Args:
        cfg: the conf file.
        count: how many workers.
        router_id: the router's id (the conf's, or one made up once for all).
        run: runs a worker's router in the child process until it stops;
            returns its exit status.
    """

    def __init__(self, cfg: conf.RouterConf, count: int, router_id: str,
                 run: Callable[[WorkerPlan], int]) -> None:
        self.cfg = cfg
        self.count = count
        self.router_id = router_id
        self.run_worker = run
        self.sockets: list[socket.socket] = []
        self.mesh_dir: str | None = None
        self.mesh: list[socket.socket] = []
        self.workers = [_Worker(i) for i in range(count)]
        self.stopping = False
        self.status = 0

    # -- before the workers ------------------------------------------------------------

    def bind(self) -> None:
        """Open every listener of the conf file and the mesh's sockets.

        Raises:
            ServiceError: a listener cannot listen (status 1).
        """
        try:
            for section in self.cfg.listeners:
                host = section.host or "0.0.0.0"
                sock = listening_socket(host, conf.port_number(section.port))
                self.sockets.append(sock)
        except OSError as exc:
            self.close()
            raise ServiceError(f"Shutting down, required listener failed: {exc}") from None
        if self.cfg.router.mode.value == "edge":
            return  # each worker is an edge router of its own uplink
        self.mesh_dir = tempfile.mkdtemp(prefix="hopd-workers-")
        for index in range(self.count):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(_mesh_path(self.mesh_dir, index))
            sock.listen(128)
            self.mesh.append(sock)

    def give_to(self, user: str) -> None:
        """The mesh's folder and sockets to ``user``, whom the workers will run as."""
        if self.mesh_dir is None:
            return
        entry = pwd.getpwnam(user)
        for path in [self.mesh_dir, *(_mesh_path(self.mesh_dir, i) for i in range(self.count))]:
            os.chown(path, entry.pw_uid, entry.pw_gid)

    def start(self) -> int:
        """Start every worker and wait until each is operational: 0, or the
        exit status of the first that could not start (the others are
        stopped)."""
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        pipes = {self._spawn(worker, ready=True): worker for worker in self.workers}
        failed = 0
        while pipes and not failed:
            got = signal.sigtimedwait({signal.SIGTERM, signal.SIGINT}, 0)
            if got is not None:
                failed = 128 + got.si_signo  # stopped before it was operational
                break
            readable, _, _ = select.select(list(pipes), [], [], 0.05)
            for fd in readable:
                worker = pipes.pop(fd)
                if os.read(fd, 1) == b"":  # it ended before it was operational
                    _, status = os.waitpid(worker.pid, 0)
                    worker.pid = 0
                    failed = _exit_status(status) or 1
                os.close(fd)
        for fd in pipes:
            os.close(fd)
        if failed:
            self.stop()
            while any(w.pid for w in self.workers):
                self._reap(os.wait())
            self.close()
        return failed

    # -- running -----------------------------------------------------------------------

    def run(self) -> int:
        """Wait for signals and dead workers until every worker has stopped
        after SIGTERM or SIGINT; the exit status (0: each stopped cleanly)."""
        while True:
            now = time.monotonic()
            wake = min(self._next_restart() or now + _POLL_S, now + _POLL_S)
            got = signal.sigtimedwait(_SIGNALS, max(0.0, wake - now))
            signo = got.si_signo if got is not None else 0
            if signo in (signal.SIGTERM, signal.SIGINT):
                self.stop()
            elif signo == signal.SIGHUP:
                self._signal_all(signal.SIGHUP)
            # Reaped on every wake-up, not on SIGCHLD alone: in a process
            # with other threads, another thread may take the SIGCHLD.
            self._reap_all()
            if not self.stopping:
                self._restart_due()
            elif not any(w.pid for w in self.workers):
                self.close()
                return self.status

    def stop(self) -> None:
        """SIGTERM to every worker (a second call: each ends at once, as a
        second signal to one router does)."""
        if not self.stopping:
            log.log(logs.NOTICE, "Stopping %d workers", self.count)
        self.stopping = True
        for worker in self.workers:
            worker.restart_at = None
        self._signal_all(signal.SIGTERM)

    def close(self) -> None:
        """Close the listening sockets and remove the mesh's folder."""
        for sock in [*self.sockets, *self.mesh]:
            sock.close()
        self.sockets.clear()
        self.mesh.clear()
        if self.mesh_dir is not None:
            shutil.rmtree(self.mesh_dir, ignore_errors=True)
            self.mesh_dir = None

    def pids(self) -> list[int]:
        """The live workers' process ids, in worker order (0: not running)."""
        return [w.pid for w in self.workers]

    # -- workers -----------------------------------------------------------------------

    def _plan(self, index: int, ready_fd: int | None = None) -> WorkerPlan:
        return WorkerPlan(index=index, count=self.count, group=self.router_id,
                          router_id=worker_id(self.router_id, index),
                          sockets=tuple(self.sockets), mesh_dir=self.mesh_dir,
                          mesh_socket=self.mesh[index] if self.mesh else None,
                          ready_fd=ready_fd)

    def _spawn(self, worker: _Worker, ready: bool) -> int:
        """Fork ``worker``; with ``ready``, the read end of the pipe it
        writes to once operational."""
        read_fd, write_fd = os.pipe() if ready else (-1, -1)
        supervisor = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker
            status = _CRASHED
            try:
                if read_fd >= 0:
                    os.close(read_fd)
                for signo in _SIGNALS:
                    signal.signal(signo, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
                # Out of the terminal's process group: ^C reaches the
                # supervisor alone, which passes it on once.
                os.setpgid(0, 0)
                _end_with(supervisor)
                os.environ.pop("NOTIFY_SOCKET", None)  # the supervisor speaks to systemd
                status = self.run_worker(self._plan(worker.index,
                                                    write_fd if write_fd >= 0 else None))
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # the child ends here, whatever happened
                log.exception("Worker %d failed", worker.index)
            finally:
                logging.shutdown()
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(status)
        if write_fd >= 0:
            os.close(write_fd)
        worker.pid = pid
        worker.started = time.monotonic()
        log.info("Worker %d started (process ID %d)", worker.index, pid)
        return read_fd

    def _signal_all(self, signo: int) -> None:
        for worker in self.workers:
            if worker.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.pid, signo)

    def _reap_all(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._reap((pid, status))

    def _reap(self, waited: tuple[int, int]) -> None:
        pid, status = waited
        worker = next((w for w in self.workers if w.pid == pid), None)
        if worker is None:
            return
        worker.pid = 0
        code = _exit_status(status)
        if self.stopping:
            self.status = self.status or code
            return
        lived = time.monotonic() - worker.started
        worker.delay_s = FIRST_RESTART_DELAY_S if lived >= STEADY_S \
            else min(MAX_RESTART_DELAY_S, worker.delay_s * 2)
        delay = 0.0 if lived >= STEADY_S else worker.delay_s
        worker.restart_at = time.monotonic() + delay
        log.error("Worker %d (process ID %d) %s; starting it again in %.1f s",
                  worker.index, pid, _describe(status), delay)

    def _next_restart(self) -> float | None:
        due = [w.restart_at for w in self.workers if w.restart_at is not None]
        return min(due) if due else None

    def _restart_due(self) -> None:
        now = time.monotonic()
        for worker in self.workers:
            if worker.restart_at is not None and worker.restart_at <= now:
                worker.restart_at = None
                self._spawn(worker, ready=False)


def _end_with(supervisor: int) -> None:
    """Have the kernel send this worker SIGTERM when the supervisor dies
    (SIGKILLed, say), so that no worker goes on serving the ports alone."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        log.warning("Worker cannot ask to end with its supervisor: %s",
                    os.strerror(ctypes.get_errno()))
    if os.getppid() != supervisor:  # it died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


#: prctl(2): the signal a process gets when its parent dies.
_PR_SET_PDEATHSIG = 1


def _exit_status(status: int) -> int:
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else 1


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {_exit_status(status)}"
