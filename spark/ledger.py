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

The ledger does no I/O on the network: it is given received messages and
says which to accept or release; ``token`` is the receiver's handle.
"""

from __future__ import annotations

import os
import pickle
import re
from collections import deque
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import attrs

Token = Hashable


@attrs.define(kw_only=True, eq=False)
class Record:
    """One received message: its encoded bytes and where it came from."""

    data: bytes
    address: str | None
    received_at_s: float
    message_id: str | None
    token: Token | None = None  # None for a record read back from the journal
    row: Any = None  # the decoded row, when the receiver made it


@attrs.define(kw_only=True, eq=False)
class Batch:
    start: int
    end: int
    records: list[Record]
    recovered: bool = False  # read back from the journal after a restart
    duplicates: list[Record] = attrs.Factory(list)  # second copies held until commit


class Journal:
    """Batches on disk, one file each, written whole before Spark learns their offsets."""

    _NAME = re.compile(r"^(\d+)-(\d+)\.batch$")

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def write(self, batch: Batch) -> None:
        rows = [(r.data, r.address, r.received_at_s, r.message_id) for r in batch.records]
        path = self.directory / f"{batch.start}-{batch.end}.batch"
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(rows, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def remove(self, batch: Batch) -> None:
        (self.directory / f"{batch.start}-{batch.end}.batch").unlink(missing_ok=True)

    def load(self) -> list[Batch]:
        batches = []
        for path in self.directory.iterdir():
            match = self._NAME.match(path.name)
            if not match:
                continue
            with open(path, "rb") as f:
                rows = pickle.load(f)
            records = [Record(data=d, address=a, received_at_s=t, message_id=m)
                       for d, a, t, m in rows]
            batches.append(Batch(start=int(match[1]), end=int(match[2]), records=records,
                                 recovered=True))
        return sorted(batches, key=lambda b: b.start)


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
        if journal is not None:
            for batch in journal.load():
                self.batches[batch.start] = batch
                for rec in batch.records:
                    if rec.message_id is not None:
                        self._seen[rec.message_id] = batch

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
            self.journal.remove(batch)
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
        return settle

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

