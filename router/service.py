"""Running ``hopd`` as a system service: daemonising, the pidfile, dropping
privileges, and systemd's readiness notifications.

Owns the process-level steps around the event loop, each a small function
the command (``router.cli``) calls in order: check the pidfile, detach,
listen, write the pidfile, drop to the service user, report readiness.  No
proton and no routing here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import socket
import sys
from pathlib import Path

__all__ = [
    "Daemon",
    "ServiceError",
    "check_pidfile",
    "drop_privileges",
    "notify",
    "remove_pidfile",
    "write_pidfile",
]


class ServiceError(Exception):
    """A step of starting the service failed; ``status`` is the exit status."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


# -- pidfile ---------------------------------------------------------------------------


def _running_hopd(pid: int) -> bool:
    """Whether ``pid`` is a live process that is a Hop router."""
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by someone else
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # alive; cannot tell what it is, so do not take its place
    return any(part.endswith(b"hopd") or part == b"router" for part in cmdline)


def check_pidfile(path: str) -> None:
    """Refuse to start when ``path`` names a running hopd; a stale one is fine.

    Raises:
        ServiceError: another hopd runs with this pidfile (status 1).
    """
    try:
        text = Path(path).read_text().strip()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ServiceError(f"cannot read pidfile {path}: {exc.strerror}") from None
    if text.isascii() and text.isdigit() and _running_hopd(int(text)):
        raise ServiceError(f"pidfile {path} names a running hopd (pid {text}); "
                           "stop it first or use another pidfile")


def write_pidfile(path: str) -> None:
    """Write this process's pid to ``path`` (replacing a stale file)."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{os.getpid()}")
    try:
        temporary.write_text(f"{os.getpid()}\n")
        temporary.replace(target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise ServiceError(f"cannot write pidfile {path}: {exc.strerror}") from None


def remove_pidfile(path: str) -> str | None:
    """Remove ``path`` if it still holds this process's pid; an error text if not possible."""
    target = Path(path)
    try:
        if target.read_text().strip() != str(os.getpid()):
            return None
        target.unlink()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot remove pidfile {path}: {exc.strerror}"
    return None


# -- privileges ---------------------------------------------------------------------------


def drop_privileges(user: str) -> None:
    """Become ``user`` and its group (after the listeners are open).

    Raises:
        ServiceError: not running as root, or no such user (status 1).
    """
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise ServiceError(f"no such user: {user!r}", status=1) from None
    if os.geteuid() != 0:
        if os.geteuid() == entry.pw_uid:
            return
        raise ServiceError(f"-U {user} needs hopd to be started as root", status=1)
    try:
        os.initgroups(entry.pw_name, entry.pw_gid)
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
    except OSError as exc:
        raise ServiceError(f"cannot become {user}: {exc.strerror}") from None


# -- systemd ---------------------------------------------------------------------------


def notify(*lines: str) -> bool:
    """Send ``lines`` (``READY=1``, ``STATUS=...``) to systemd's ``NOTIFY_SOCKET``;
    False when the variable is not set or the socket cannot be reached."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        try:
            sock.sendto("\n".join(lines).encode(), address)
        except OSError:
            return False
    return True


# -- detaching ---------------------------------------------------------------------------


class Daemon:
    """Detach from the terminal, reporting start-up to the waiting parent.

    ``detach()`` returns only in the daemon (a grandchild in a session of its
    own); the original process waits until ``ready()`` or ``failed()`` is
    called there, or the daemon dies, and exits with the matching status.
    """

    def __init__(self) -> None:
        self._report: int | None = None

    def detach(self) -> None:
        read_end, write_end = os.pipe()
        first = os.fork()
        if first > 0:
            os.close(write_end)
            os.waitpid(first, 0)
            sys.exit(self._wait(read_end))
        os.close(read_end)
        os.setsid()
        if os.fork() > 0:
            os._exit(0)
        os.umask(0o022)
        self._report = write_end

    @staticmethod
    def _wait(read_end: int) -> int:
        chunks = []
        while True:
            try:
                chunk = os.read(read_end, 4096)
            except InterruptedError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
        os.close(read_end)
        text = b"".join(chunks).decode(errors="replace")
        if not text:
            print("hopd: the router exited during start-up", file=sys.stderr)
            return 1
        status, _, message = text.partition(":")
        if message:
            print(message, file=sys.stderr)
        return int(status) if status.isascii() and status.isdigit() else 1

    def ready(self) -> None:
        """The router is operational: let the parent exit 0, and let go of the
        terminal's standard streams."""
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        self._send("0:")

    def failed(self, status: int, message: str) -> None:
        """Start-up failed: the parent prints ``message`` and exits ``status``."""
        self._send(f"{status}:{message}")

    def _send(self, text: str) -> None:
        fd, self._report = self._report, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            data = text.encode()
            while data:
                try:
                    data = data[os.write(fd, data):]
                except OSError as exc:
                    if exc.errno != errno.EINTR:
                        raise
        os.close(fd)
