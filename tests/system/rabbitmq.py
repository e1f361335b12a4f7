"""A real RabbitMQ broker with its AMQP 1.0 plugin, started for system tests.

Each broker runs as the Debian ``rabbitmq-server`` under a private home,
database and log directory, on free loopback ports for AMQP, Erlang
distribution and its own epmd, so that several brokers (sharding) and test
runs never share state. It is started without systemd and stopped with
``rabbitmqctl shutdown``; ``restart`` keeps its database, so durable queues
and their messages survive it, as they would a broker restart in production.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.waiting import free_port

RABBITMQ_SERVER = "/usr/sbin/rabbitmq-server"
RABBITMQCTL = "/usr/sbin/rabbitmqctl"
START_TIMEOUT_S = 60.0


def available() -> bool:
    return os.path.exists(RABBITMQ_SERVER) and os.path.exists(RABBITMQCTL)


class RabbitMQ:
    """One RabbitMQ node listening for AMQP 1.0 on 127.0.0.1:``port``.

    Its home, database, logs and config live in a fresh directory of its
    own under the system's temporary directory (pytest's are private to root,
    and the node runs as the ``rabbitmq`` user); ``remove`` deletes it.

    Args:
        name: names the node and its directory.
    """

    def __init__(self, name: str = "rabbit", tls: tuple[Path, Path, Path] | None = None) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix=f"hop-{name}-"))
        self.name = name
        self.port = free_port()
        #: With ``tls`` (certificate, key, CA): a TLS listener on this port too.
        self.tls_port = free_port() if tls is not None else None
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.node = f"{name}{self.port}@localhost"
        self.proc: subprocess.Popen[bytes] | None = None
        home = self.directory / "home"
        for sub in ("home", "mnesia", "log"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        config = self.directory / "rabbitmq"
        config.with_suffix(".conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.port}\n"
            "amqp1_0.default_user = guest\n"
            "loopback_users = none\n"
            # The test machines are small and shared: never block publishers
            # because the disk or memory looks short.
            "disk_free_limit.absolute = 1\n"
            "vm_memory_high_watermark.relative = 0.9\n"
            + self._tls_config(tls)
        )
        self.env = dict(
            os.environ,
            HOME=str(home),
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port),
            ERL_EPMD_PORT=str(self.epmd_port),
            RABBITMQ_MNESIA_BASE=str(self.directory / "mnesia"),
            RABBITMQ_LOG_BASE=str(self.directory / "log"),
            RABBITMQ_CONFIG_FILE=str(config),
            RABBITMQ_ENABLED_PLUGINS="rabbitmq_amqp1_0",
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.directory / "enabled_plugins"),
            RABBITMQ_PID_FILE=str(self.directory / "rabbit.pid"),
            ERL_CRASH_DUMP=str(self.directory / "erl_crash.dump"),
        )
        # Run as root, Debian's scripts switch to the rabbitmq user, which must
        # own everything the node writes.
        if os.geteuid() == 0:
            for path in [self.directory, *self.directory.rglob("*")]:
                shutil.chown(path, user="rabbitmq", group="rabbitmq")

    def _tls_config(self, tls: tuple[Path, Path, Path] | None) -> str:
        if tls is None:
            return ""
        names = ("cert.pem", "key.pem", "ca.pem")
        for source, target in zip(tls, names, strict=True):
            shutil.copyfile(source, self.directory / target)
        return (f"listeners.ssl.1 = 127.0.0.1:{self.tls_port}\n"
                f"ssl_options.certfile = {self.directory / 'cert.pem'}\n"
                f"ssl_options.keyfile = {self.directory / 'key.pem'}\n"
                f"ssl_options.cacertfile = {self.directory / 'ca.pem'}\n"
                "ssl_options.verify = verify_none\n"
                "ssl_options.fail_if_no_peer_cert = false\n")

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    def _ctl(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([RABBITMQCTL, "-n", self.node, *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the node and wait until it serves AMQP, up to ``timeout``
        seconds (a node booting on a machine busy with other work can take
        much longer than the default)."""
        log = (self.directory / "server.out").open("ab")
        self.proc = subprocess.Popen([RABBITMQ_SERVER], env=self.env, stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=self.directory)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"rabbitmq-server exited with {self.proc.returncode}:\n"
                                     f"{self.server_output()}")
            try:
                done = self._ctl("-q", "await_startup", "--timeout", "5", timeout=30)
            except subprocess.TimeoutExpired:
                # rabbitmqctl itself did not answer in time (a machine busy
                # with other work): ask again until the deadline.
                continue
            if done.returncode == 0 and self._accepts():
                return
            time.sleep(0.5)
        self.stop()
        raise AssertionError(f"rabbitmq did not start within {timeout:.0f} s:\n"
                             f"{self.server_output()}")

    def _accepts(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
            return True
        return False

    def stop(self) -> None:
        """Shut the node down and its epmd with it."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self._ctl("shutdown", timeout=60)
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
                return
        self.proc = None
        subprocess.run(["epmd", "-port", str(self.epmd_port), "-kill"], env=self.env,
                       capture_output=True, check=False, timeout=10)

    def kill(self) -> None:
        """Kill the node at once (no goodbye to its connections), as a crash would.

        The Erlang VM runs in a session of its own (Debian's script switches
        user), so it is killed by the pid it wrote, not by process group.
        """
        pid_file = self.directory / "rabbit.pid"
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text().strip()), 9)
        if self.proc is not None:
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, 9)
                self.proc.wait(10)
        self.proc = None
        subprocess.run(["epmd", "-port", str(self.epmd_port), "-kill"], env=self.env,
                       capture_output=True, check=False, timeout=10)

    def restart(self, timeout: float = START_TIMEOUT_S) -> None:
        """Stop and start again on the same ports, keeping the database."""
        self.stop()
        self.start(timeout)

    def declare_durable_queue(self, queue: str) -> None:
        """Declare a durable queue on the default vhost.  The AMQP 1.0 plugin
        of RabbitMQ 3.x declares the queues it is asked for by name as
        transient (gone with their messages on a restart); a durable one,
        addressed as ``/amq/queue/NAME``, keeps what it holds."""
        done = self._ctl("eval", f'rabbit_amqqueue:declare(rabbit_misc:r(<<"/">>, queue, '
                                 f'<<"{queue}">>), true, false, [], none, <<"hop">>).')
        if done.returncode != 0 or "amqqueue" not in done.stdout:
            raise AssertionError(f"declaring {queue}: {done.stdout} {done.stderr}")

    def queue_depth(self, queue: str) -> int | None:
        """Messages ready in ``queue`` as ``rabbitmqctl`` reports them (None: no queue)."""
        counts = self.queue_counts(queue)
        return None if counts is None else counts[0]

    def queue_counts(self, queue: str) -> tuple[int, int] | None:
        """Messages of ``queue`` ready and delivered but unacknowledged."""
        done = self._ctl("-q", "list_queues", "name", "messages_ready",
                         "messages_unacknowledged", "--no-table-headers")
        for line in done.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == queue:
                return int(parts[1]), int(parts[2])
        return None

    def server_output(self) -> str:
        text = ""
        for path in [self.directory / "server.out", *sorted((self.directory / "log").glob("*"))]:
            if path.is_file():
                text += f"--- {path.name}\n{path.read_text(errors='replace')[-4000:]}\n"
        return text

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


@contextlib.contextmanager
def running(name: str, tls: tuple[Path, Path, Path] | None = None) -> Iterator[RabbitMQ]:
    """A started broker (with a TLS listener too when given ``tls``), stopped
    and removed afterwards."""
    broker = RabbitMQ(name, tls)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()
        broker.remove()


__all__ = ["RabbitMQ", "available", "free_port", "running"]
