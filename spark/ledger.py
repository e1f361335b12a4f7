"""Which received messages belong to which micro-batch, and when each is settled.

The streaming reader holds every message it received, unaccepted, until
Spark commits the micro-batch that contains it; only then is it accepted at
the router. Offsets are ``{"seq": n}``, ``n`` counting the messages that
went into batches over the query's whole life.

With a journal (the ``checkpointLocation`` option), each batch is written
to disk before its offset is returned to Spark, so a batch that Spark runs
again after a restart has the same rows. The messages of that batch were
never accepted, so the router or the broker behind it delivers them again
to the new reader; when they carry a message-id, those second copies are
recognised and accepted without being emitted again (``deduplicate``).

A committed batch leaves a small mark in the journal, its message-ids, until
the next commit: its messages are accepted once Spark has committed it, and
a reader killed between the two (as Spark kills its source process when a
query stops) has them come back from the router after the restart. The mark
tells they were processed, so they are accepted at once, not emitted again.

The ledger does no I/O on the network: it is given received messages and
says which to accept or release; ``token`` is the receiver's handle.
"""

from __future__ import annotations

import itertools
import logging
import os
import pickle
import re
import threading
from collections import deque
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import attrs

Token = Hashable

log = logging.getLogger(__name__)


@attrs.define(kw_only=True, eq=False)
class Record:
    """One received message: its encoded bytes and where it came from."""

    data: bytes
    address: str | None
    received_at_s: float
    message_id: str | None
    token: Token | None = None  # None for a record read back from the journal


@attrs.define(kw_only=True, eq=False)
class Batch:
    start: int
    end: int
    records: list[Record]
    recovered: bool = False  # read back from the journal after a restart
    committed: bool = False  # a mark of a batch Spark committed (ids only)
    duplicates: list[Record] = attrs.Factory(list)  # second copies held until commit


class Journal:
    """Batches on disk, one file each, written whole before Spark learns their offsets.

    ``S-E.batch`` holds a batch Spark may run (again); ``S-E.done`` the
    message-ids of a batch Spark committed, kept until the next commit.
    """

    _NAME = re.compile(r"^(\d+)-(\d+)\.(batch|done)$")

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def _path(self, batch: Batch, kind: str) -> Path:
        return self.directory / f"{batch.start}-{batch.end}.{kind}"

    @staticmethod
    def _dump(path: Path, value: Any) -> None:
        """Write ``value`` to ``path`` whole or not at all."""
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def write(self, batch: Batch) -> None:
        self._dump(self._path(batch, "batch"),
                   [(r.data, r.address, r.received_at_s, r.message_id) for r in batch.records])

    def done(self, batch: Batch) -> None:
        """Spark committed ``batch``: keep only its message-ids (if it has any)."""
        ids = [r.message_id for r in batch.records if r.message_id is not None]
        if ids:
            self._dump(self._path(batch, "done"), ids)
        self._path(batch, "batch").unlink(missing_ok=True)

    def remove(self, batch: Batch) -> None:
        self._path(batch, "batch").unlink(missing_ok=True)
        self._path(batch, "done").unlink(missing_ok=True)

    def load(self) -> tuple[list[Batch], list[Batch]]:
        """The batches Spark may run, and the marks of committed ones (by start)."""
        found: dict[tuple[int, int], Batch] = {}
        for path in sorted(self.directory.iterdir(), key=lambda p: p.suffix == ".done"):
            match = self._NAME.match(path.name)
            if not match:
                continue
            with open(path, "rb") as f:
                rows = pickle.load(f)
            start, end = int(match[1]), int(match[2])
            if match[3] == "done":  # a crash between writing it and removing the batch
                records = [Record(data=b"", address=None, received_at_s=0.0, message_id=m)
                           for m in rows]
            else:
                records = [Record(data=d, address=a, received_at_s=t, message_id=m)
                           for d, a, t, m in rows]
            found[start, end] = Batch(start=start, end=end, records=records, recovered=True,
                                      committed=match[3] == "done")
        batches = sorted(found.values(), key=lambda b: b.start)
        return ([b for b in batches if not b.committed], [b for b in batches if b.committed])


@attrs.define
class Settle:
    """What the receiver must do now: accept these, release those."""

    accept: list[Token] = attrs.Factory(list)
    release: list[Token] = attrs.Factory(list)


class Ledger:
    def __init__(self, journal: Journal | None = None, *, deduplicate: bool = True) -> None:
        self.journal = journal
        self.deduplicate = deduplicate and journal is not None
        self.buffer: deque[Record] = deque()
        self.batches: dict[int, Batch] = {}  # by start, not yet committed
        self.duplicates_dropped = 0
        # message-id -> the recovered batch that holds it (None once committed)
        self._seen: dict[str, Batch | None] = {}
        self._resolved = journal is None
        # Committed batches whose marks stay in the journal until the next commit,
        # and those committed since the last call from Spark.
        self._marked: list[Batch] = []
        self._marking: list[Batch] = []
        if journal is not None:
            pending, committed = journal.load()
            for batch in pending:
                self.batches[batch.start] = batch
                for rec in batch.records:
                    if rec.message_id is not None:
                        self._seen[rec.message_id] = batch
            for batch in committed:
                self._marked.append(batch)
                for rec in batch.records:
                    if rec.message_id is not None:
                        self._seen[rec.message_id] = None

    # -- input from the receiver ------------------------------------------------

    def received(self, record: Record) -> Settle:
        """A message arrived; a second copy of a journaled one is not emitted again."""
        if self.deduplicate and record.message_id is not None \
                and record.message_id in self._seen:
            batch = self._seen[record.message_id]
            self.duplicates_dropped += 1
            if batch is None:  # its batch was processed: accept the copy at once
                return Settle(accept=[record.token])
            batch.duplicates.append(record)
            return Settle()
        self.buffer.append(record)
        return Settle()

    @property
    def buffered(self) -> int:
        return len(self.buffer)

    @property
    def held(self) -> int:
        """Messages received and not yet accepted or released."""
        return len(self.buffer) + sum(
            len(b.duplicates) + (0 if b.recovered else len(b.records))
            for b in self.batches.values())

    # -- input from Spark -------------------------------------------------------

    def _resolve(self, start: int) -> Settle:
        """Spark's first call after a restart says where it stands: ``start``.

        Recovered batches that end at or before ``start`` were processed (only
        their commit was lost). Batches from ``start`` on that Spark never
        planned are dropped; their messages come back from the router as new.
        """
        settle = Settle()
        if self._resolved:
            return settle
        self._resolved = True
        for batch in sorted(self.batches.values(), key=lambda b: b.start):
            if not batch.recovered:
                continue
            if batch.end <= start:
                settle.accept.extend(self._finish(batch))
        return settle

    def _drop_unplanned(self, start: int) -> None:
        for batch in [b for b in self.batches.values() if b.recovered and b.start >= start]:
            del self.batches[batch.start]
            if self.journal is not None:
                self.journal.remove(batch)
            for rec in batch.records:
                if rec.message_id is not None and self._seen.get(rec.message_id) is batch:
                    del self._seen[rec.message_id]
            # their second copies are first deliveries after all
            self.duplicates_dropped -= len(batch.duplicates)
            self.buffer.extend(batch.duplicates)
            batch.duplicates = []

    def _finish(self, batch: Batch) -> list[Token]:
        self.batches.pop(batch.start, None)
        if self.journal is not None:
            self.journal.done(batch)
            self._marking.append(batch)
        for rec in batch.records:
            if rec.message_id is None or self._seen.get(rec.message_id) is not batch:
                continue
            if batch.recovered:  # copies may still come back from before the restart
                self._seen[rec.message_id] = None
            else:
                del self._seen[rec.message_id]
        tokens = [r.token for r in batch.records if r.token is not None]
        tokens.extend(r.token for r in batch.duplicates)
        batch.duplicates = []
        return tokens

    def plan(self, start: int, limit: int | None) -> tuple[int, Settle]:
        """The end offset of the next batch from ``start``, of at most ``limit`` messages."""
        settle = self._resolve(start)
        self._unmark()
        pending = self.batches.get(start)
        if pending is not None and not pending.recovered:
            return pending.end, settle
        if pending is not None:  # recovered and about to be replanned: its rows are known
            return pending.end, settle
        self._drop_unplanned(start)
        count = len(self.buffer) if limit is None else min(limit, len(self.buffer))
        if count == 0:
            return start, settle
        records = [self.buffer.popleft() for _ in range(count)]
        batch = Batch(start=start, end=start + count, records=records)
        if self.journal is not None:
            self.journal.write(batch)
        self.batches[start] = batch
        if self.deduplicate:
            for rec in records:
                if rec.message_id is not None:
                    self._seen.setdefault(rec.message_id, batch)
        return batch.end, settle

    def records(self, start: int, end: int) -> tuple[list[Record], Settle]:
        """The records of offsets [start, end): those of the batches planned in that range."""
        settle = self._resolve(start)
        self._unmark()
        out: list[Record] = []
        for batch in sorted(self.batches.values(), key=lambda b: b.start):
            if batch.start >= start and batch.end <= end:
                out.extend(batch.records)
        return out, settle

    def commit(self, end: int) -> Settle:
        """Spark committed everything up to ``end``: accept those messages."""
        settle = self._resolve(end)
        for batch in sorted(self.batches.values(), key=lambda b: b.start):
            if batch.end <= end:
                settle.accept.extend(self._finish(batch))
        self._unmark()
        return settle

    def _unmark(self) -> None:
        """Batches were committed by this call: the marks of those committed
        before are no longer needed, their accepts went out with the last call.

        Marks read back after a restart go too. Their messages came back from
        the broker right after the crash, in practice before this commit; a
        second crash before a copy came back would have it emitted again.
        """
        if not self._marking:
            return
        if self.journal is not None:
            for batch in self._marked:
                self.journal.remove(batch)
        self._marked, self._marking = self._marking, []

    def release_all(self) -> Settle:
        """The query stops: give back every message not accepted yet."""
        tokens: list[Token] = [r.token for r in self.buffer if r.token is not None]
        self.buffer.clear()
        for batch in self.batches.values():
            tokens.extend(r.token for r in batch.records if r.token is not None)
            tokens.extend(r.token for r in batch.duplicates)
            batch.duplicates = []
        return Settle(release=tokens)


def journal_directory(checkpoint_location: str, address: str) -> Path:
    """Where the batches of one address are journaled under a checkpoint location."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", address)
    location = checkpoint_location.removeprefix("file://").removeprefix("file:")
    return Path(location) / "sources-amqp" / safe



class Log:
    """The journal as the stream itself (``accept`` = ``journal``): messages are
    written to disk as they arrive and accepted once written, and a batch is a
    range of their sequence numbers (docs/spark.md#accepted-when-journaled).

    Offsets count the messages written over the query's life, as the
    :class:`Ledger`'s do. ``S-E.log`` holds messages ``S`` to ``E - 1``; a file
    goes once Spark has committed a batch that ends at or after ``E``. A batch
    that Spark runs again after a restart reads its messages back from the
    files, so a message is accepted at the router only once it cannot be lost.
    A second copy of a message still in the journal (its acceptance was lost
    with the process that wrote it) is accepted and not written again, when it
    has a message-id and ``deduplicate`` is on.

    Like the :class:`Ledger`, the log does no network I/O; it is safe to call
    from the thread that writes it and the one that Spark calls.
    """

    _NAME = re.compile(r"^(\d+)-(\d+)\.log$")

    def __init__(self, directory: Path, *, deduplicate: bool = True) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.deduplicate = deduplicate
        self.duplicates_dropped = 0
        self._lock = threading.Lock()
        self._records: deque[Record] = deque()  # sequence numbers self._first ...
        self._first = 0
        self._files: deque[tuple[int, int]] = deque()  # (start, end) on disk, in order
        self._ids: dict[str, int] = {}  # message-id -> its sequence number, while journaled
        self._resolved = False
        for path in sorted(directory.iterdir(), key=lambda p: self._span(p) or (0, 0)):
            span = self._span(path)
            if span is None:
                continue
            with open(path, "rb") as f:
                rows = pickle.load(f)
            if not self._files:
                self._first = span[0]
            elif span[0] != self._files[-1][1]:
                continue  # not contiguous: left by an older query, ignored
            for d, a, t, m in rows:
                self._add(Record(data=d, address=a, received_at_s=t, message_id=m))
            self._files.append(span)

    @classmethod
    def _span(cls, path: Path) -> tuple[int, int] | None:
        match = cls._NAME.match(path.name)
        return (int(match[1]), int(match[2])) if match else None

    @property
    def resolved(self) -> bool:
        """Whether Spark has said where its offsets stand (:meth:`resolve`)."""
        return self._resolved

    @property
    def end(self) -> int:
        """The offset after the last message written."""
        return self._first + len(self._records)

    @property
    def held(self) -> int:
        """Messages written and not yet committed by Spark."""
        return len(self._records)

    def _add(self, record: Record) -> None:
        if record.message_id is not None and self.deduplicate:
            self._ids[record.message_id] = self.end
        self._records.append(record)

    def append(self, records: list[Record]) -> list[Token]:
        """Write newly received messages to disk; the tokens to accept now."""
        with self._lock:
            accept: list[Token] = []
            fresh: list[Record] = []
            ids = self._ids
            here: set[str] = set()
            for rec in records:
                mid = rec.message_id
                if mid is not None and self.deduplicate and (mid in ids or mid in here):
                    self.duplicates_dropped += 1
                else:
                    fresh.append(rec)
                    if mid is not None:
                        here.add(mid)
                if rec.token is not None:
                    accept.append(rec.token)
            if fresh:
                start = self.end
                span = (start, start + len(fresh))
                Journal._dump(self.directory / f"{span[0]}-{span[1]}.log",
                              [(r.data, r.address, r.received_at_s, r.message_id)
                               for r in fresh])
                # The file's name too must survive a crash of the machine
                # before the messages are accepted.
                fd = os.open(self.directory, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                for rec in fresh:
                    self._add(rec)
                self._files.append(span)
            return accept

    def resolve(self, start: int) -> None:
        """Spark's first call says where it stands: messages before ``start``
        were committed (only the files' removal was lost). A log that ends
        before ``start`` lost its files: new messages are numbered from there."""
        with self._lock:
            if self._resolved:
                return
            self._resolved = True
            if self.end < start:  # every file was committed and removed
                if self._records:
                    log.warning("amqp: the journal ends at %d, before Spark's offset %d: "
                                "it was not this query's; starting after it", self.end, start)
                    for first, stop in self._files:
                        (self.directory / f"{first}-{stop}.log").unlink(missing_ok=True)
                    self._files.clear()
                self._records.clear()
                self._ids.clear()
                self._first = start
            self._commit(start)

    def plan(self, start: int, limit: int | None) -> int:
        """The end offset of the next batch from ``start``, of at most ``limit`` messages."""
        self.resolve(start)
        with self._lock:
            return self.end if limit is None else min(self.end, start + limit)

    def records(self, start: int, end: int) -> list[Record]:
        """The messages of offsets [start, end)."""
        self.resolve(start)
        with self._lock:
            lo = max(start - self._first, 0)
            hi = max(min(end - self._first, len(self._records)), lo)
            return list(itertools.islice(self._records, lo, hi))

    def commit(self, end: int) -> None:
        """Spark committed everything before ``end``."""
        self.resolve(end)
        with self._lock:
            self._commit(end)

    def _commit(self, end: int) -> None:
        while self._records and self._first < end:
            rec = self._records.popleft()
            if rec.message_id is not None and self._ids.get(rec.message_id) == self._first:
                del self._ids[rec.message_id]
            self._first += 1
        while self._files and self._files[0][1] <= end:
            start, stop = self._files.popleft()
            (self.directory / f"{start}-{stop}.log").unlink(missing_ok=True)
