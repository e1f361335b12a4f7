"""Snapshots of the router's Python heap on request, to find what grows
(docs/reliability.md#what-grows).

With ``HOP_TRACEMALLOC=DIR`` in its environment, hopd traces Python's
allocations from its start (``tracemalloc``, ``HOP_TRACEMALLOC_FRAMES``
frames kept of each allocation's stack, 1 unless set) and, on each
SIGUSR2, writes a snapshot of what is allocated to
``DIR/hopd-PID-N.tracemalloc`` (N counting from 1), written whole before it
takes its name, and logs where.  A forked child takes and writes each
snapshot, so the router's loop is held only for the fork.  ``tracemalloc.Snapshot.load`` reads it;
two of them compared (``Snapshot.compare_to``) give the allocation sites
that grew between them.  Tracing slows every allocation, so it is for
soaks and investigations, not for a router in service.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import tracemalloc
from collections.abc import Mapping
from pathlib import Path

from router import logs

log = logging.getLogger(__name__)

ENV_DIRECTORY = "HOP_TRACEMALLOC"
ENV_FRAMES = "HOP_TRACEMALLOC_FRAMES"
SUFFIX = ".tracemalloc"
# How long a snapshot child may take before SIGALRM ends it.
_CHILD_LIMIT_S = 600


class HeapSnapshots:
    """Tracing started, and snapshots written to ``directory`` on request."""

    def __init__(self, directory: Path, frames: int = 1) -> None:
        self.directory = directory
        self.frames = frames
        self.written = 0
        self._children: list[int] = []

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> HeapSnapshots | None:
        """The snapshots ``HOP_TRACEMALLOC`` asks for, or None.

        Raises:
            ValueError: ``HOP_TRACEMALLOC_FRAMES`` is not a whole number from 1.
        """
        directory = env.get(ENV_DIRECTORY)
        if not directory:
            return None
        text = env.get(ENV_FRAMES, "1")
        if not text.isdigit() or int(text) < 1:
            raise ValueError(f"{ENV_FRAMES} must be a whole number from 1, got {text!r}")
        return cls(Path(directory), int(text))

    def start(self) -> None:
        tracemalloc.start(self.frames)
        log.log(logs.NOTICE, "Tracing Python's allocations (%d frame%s each); SIGUSR2 writes "
                "a snapshot to %s", self.frames, "" if self.frames == 1 else "s",
                self.directory)

    def write(self) -> Path | None:
        """Start writing one snapshot (tracemalloc's own allocations left out)
        and return where it will be; None, with the reason logged, where it
        cannot be written.

        The snapshot is taken and written by a forked child, which holds a
        copy of the traced heap as it was at the fork, so the router's loop
        is held only for the fork: taking a snapshot of a large heap holds
        a thread for seconds, long enough for the neighbours of an interior
        router to give it up (helloMaxAgeSeconds).  The child logs when the
        file is whole, or why it could not be written.
        """
        self._reap()
        self.written += 1
        path = self.directory / f"hopd-{os.getpid()}-{self.written}{SUFFIX}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if not os.access(self.directory, os.W_OK | os.X_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
            pid = os.fork()
        except OSError as exc:
            log.error("Cannot write the memory snapshot %s: %s", path, exc.strerror or exc)
            return None
        if pid == 0:  # pragma: no cover - the child; its result is in the log
            os._exit(_write_snapshot(path))
        self._children.append(pid)
        return path

    def _reap(self) -> None:
        """Collect the children that have finished writing."""
        for pid in list(self._children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                self._children.remove(pid)


def _write_snapshot(path: Path) -> int:
    """In the forked child: take the snapshot, write it whole under its name,
    log the outcome; the exit status (0 written, 1 not)."""
    signal.alarm(_CHILD_LIMIT_S)  # a child that cannot finish must not linger
    partial = path.with_name(path.name + ".partial")
    try:
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)])
        snapshot.dump(str(partial))
        partial.replace(path)
    except OSError as exc:
        log.error("Cannot write the memory snapshot %s: %s", path, exc.strerror or exc)
        logging.shutdown()
        return 1
    size = sum(stat.size for stat in snapshot.statistics("filename"))
    log.log(logs.NOTICE, "Memory snapshot written to %s (%.1f MB traced)", path,
            size / 2**20)
    logging.shutdown()  # os._exit follows: flush every handler first
    return 0
