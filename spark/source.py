"""The ``amqp`` PySpark data source: router addresses as tables and streams.

Register it once per session, then use it by name::

    from spark import AmqpDataSource
    spark.dataSource.register(AmqpDataSource)
    spark.readStream.format("amqp").option("address", "events").load()
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from spark.client import Inbox, Outbox
from spark.codec import (
    READ_SCHEMA,
    check_write_columns,
    encoded_of,
    message_id_of,
    record_batch_of,
)
from spark.errors import AmqpOptionError
from spark.ledger import Journal, Ledger, Log, Record, Settle, Token, journal_directory
from spark.options import ReadSettings, WriteSettings, read_settings, write_settings

log = logging.getLogger(__name__)

# Rows of one streaming batch go to the executors in partitions of at most this many.
ROWS_PER_PARTITION = 20_000
# Rows go to Spark in Arrow record batches of at most this many.
ARROW_ROWS = 5_000
# A batch read gathers up to half its credit's worth of messages before it
# hands them to Spark, while no gap between them is longer than this.
GATHER_S = 0.0005
# Accepted on commit: after accepting a batch, the next one waits for the
# producers' refill while it comes, up to REFILL_S: the first message up to
# REFILL_FIRST_S (the round trip through the router), then gaps of at most
# REFILL_GAP_S.
REFILL_S = 0.1
REFILL_FIRST_S = 0.02
REFILL_GAP_S = 0.005
# With accept=journal, the log holds at most this many times ``credit``
# messages that Spark has not committed; then the receiver waits.
JOURNALED_CREDITS = 4


class AmqpDataSource(DataSource):
    """Messages of a router address, read as rows and written from rows."""

    @classmethod
    def name(cls) -> str:
        return "amqp"

    def schema(self) -> str:
        return READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(read_settings(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(read_settings(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        settings, anonymous = self._write_settings(schema, overwrite)
        return BatchWriter(settings, anonymous, write_id=settings.write_id or uuid.uuid4().hex)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return StreamWriter(*self._write_settings(schema, overwrite))

    def _write_settings(self, schema: StructType, overwrite: bool) -> tuple[WriteSettings, bool]:
        """The settings, and whether to send on an anonymous link (a ``to`` column)."""
        if overwrite:
            raise AmqpOptionError("the amqp data source only appends: messages sent cannot "
                                  "be taken back; use mode('append')")
        check_write_columns(schema.fieldNames())
        has_to = "to" in schema.fieldNames()
        settings = write_settings(self.options, has_to_column=has_to)
        return settings, has_to or settings.endpoint.address is None


# ----------------------------------------------------------------------------
# Writing


class _Written(WriterCommitMessage):
    def __init__(self, partition: int, accepted: int) -> None:
        self.partition = partition
        self.accepted = accepted


def _send_partition(settings: WriteSettings, anonymous: bool, rows: Iterator[Any],
                    prefix: str) -> _Written:
    """Send one partition's rows; return when every message was accepted."""
    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    where = settings.endpoint

    def messages() -> Iterator[Any]:
        for index, row in enumerate(rows):
            yield encoded_of(row.asDict(recursive=False), f"{prefix}:{partition}:{index}",
                             where.address, anonymous)
    outbox = Outbox(where, messages(), target=None if anonymous else where.address,
                    window=settings.credit, send_timeout_s=settings.send_timeout_s)
    return _Written(partition, outbox.run())


class BatchWriter(DataSourceWriter):
    """``df.write.format("amqp")``: one sender per partition.

    Message ids are ``WRITEID:PARTITION:ROW``; a task that Spark runs again
    sends the same ids, so consumers can drop the copies.
    """

    def __init__(self, settings: WriteSettings, anonymous: bool, write_id: str) -> None:
        self.settings = settings
        self.anonymous = anonymous
        self.write_id = write_id

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return _send_partition(self.settings, self.anonymous, iterator, self.write_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.accepted for m in messages if isinstance(m, _Written))
        log.info("amqp: %d message(s) accepted on %s", total, self.settings.endpoint.address)


class StreamWriter(DataSourceStreamWriter):
    """``df.writeStream.format("amqp")``: message ids ``QUERYID:BATCH:PARTITION:ROW``."""

    def __init__(self, settings: WriteSettings, anonymous: bool) -> None:
        self.settings = settings
        self.anonymous = anonymous

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        ctx = TaskContext.get()
        query = batch = None
        if ctx is not None:
            query = ctx.getLocalProperty("sql.streaming.queryId")
            batch = ctx.getLocalProperty("streaming.sql.batchId")
        prefix = f"{query or self.settings.write_id or 'query'}:{batch or 0}"
        return _send_partition(self.settings, self.anonymous, iterator, prefix)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("amqp: batch %d aborted; Spark sends it again with the same message ids",
                    batchId)


# ----------------------------------------------------------------------------
# Reading


class _Rows(InputPartition):
    """Rows already received on the driver, carried to an executor."""

    def __init__(self, records: list[tuple[bytes, str | None, float]]) -> None:
        super().__init__(len(records))
        self.records = records


class _LogWriter:
    """Writes what the inbox receives to the log and accepts it once written, in
    a thread of the source's process, so that a producer's window is given
    back as fast as the disk takes its messages, not once per micro-batch.
    Stops taking messages (and so giving credit) while the log holds
    ``most`` messages Spark has not committed."""

    def __init__(self, inbox: Inbox, journal: Log, most: int) -> None:
        self.inbox = inbox
        self.journal = journal
        self.most = most
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="amqp-journal", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        inbox, journal = self.inbox, self.journal
        while not self._stop.is_set():
            if not journal.resolved:
                # Until Spark's first call numbers the log, nothing is written
                # (and nothing accepted): after a restart whose journal was
                # empty, only that call says where the offsets stand.
                self._stop.wait(0.01)
                continue
            if journal.held >= self.most or not inbox.wait(0.2):
                self._stop.wait(0.005 if journal.held >= self.most else 0)
                continue
            if inbox.failure is not None:
                return
            try:
                inbox.settle(journal.append(inbox.take()))
            except Exception as exc:  # the disk or the receiver: Spark's next call says
                log.error("amqp: writing the journal failed: %s", exc)
                inbox.fail(f"writing the journal failed: {exc}")
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5.0)

    def unwritten(self) -> list[Token]:
        """The deliveries received and not written, to release."""
        return [r.token for r in self.inbox.take() if r.token is not None]


class StreamReader(DataSourceStreamReader):
    """``spark.readStream.format("amqp")``: at least once, accepted on commit."""

    def __init__(self, settings: ReadSettings) -> None:
        self.settings = settings
        self._inbox: Inbox | None = None
        self._ledger: Ledger | None = None
        self._log: Log | None = None
        self._writer: _LogWriter | None = None
        self._last_batch = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "_inbox": None, "_ledger": None, "_log": None,
                "_writer": None, "_last_batch": self._last_batch}

    def _logged(self) -> tuple[Inbox, Log] | None:
        """The inbox and the log when messages are accepted once journaled."""
        s = self.settings
        if not s.accept_on_journal:
            return None
        if self._inbox is None or self._log is None:
            assert s.checkpoint_location is not None and s.endpoint.address is not None
            self._log = Log(journal_directory(s.checkpoint_location, s.endpoint.address),
                            deduplicate=s.deduplicate)
            self._inbox = self._receiver(s.deduplicate)
            self._writer = _LogWriter(self._inbox, self._log, JOURNALED_CREDITS * s.credit)
        return self._inbox, self._log

    def _started(self) -> tuple[Inbox, Ledger]:
        if self._inbox is None or self._ledger is None:
            s = self.settings
            journal = None
            if s.checkpoint_location:
                assert s.endpoint.address is not None
                journal = Journal(journal_directory(s.checkpoint_location, s.endpoint.address))
            self._ledger = Ledger(journal, deduplicate=s.deduplicate)
            self._inbox = self._receiver(self._ledger.deduplicate)
        return self._inbox, self._ledger

    def _receiver(self, dedupe: bool) -> Inbox:
        """The stream's receiver; with ``dedupe``, it reads each message-id."""
        s = self.settings

        def decode(record: Record) -> None:
            if dedupe:
                record.message_id = message_id_of(record.data)
        name = s.subscription or (f"spark-{s.endpoint.address}" if s.durable else None)
        return Inbox(s.endpoint, credit=s.credit, durable=s.durable, name=name,
                     decode=decode).start()

    def _absorb(self, inbox: Inbox, ledger: Ledger) -> None:
        inbox.check()
        settle = Settle()
        for record in inbox.take():
            got = ledger.received(record)
            settle.accept.extend(got.accept)
        inbox.settle(settle.accept)

    def initialOffset(self) -> dict[str, int]:
        logged = self._logged()
        if logged is None:
            self._started()
        else:
            # A new query: messages a process that died before Spark logged
            # its first batch had journaled (and accepted) are its first.
            logged[1].resolve(0)
        return {"seq": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.settings.max_messages_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        """Plan the next batch from ``start``; what comes before ``start`` is committed.

        Spark asks for the offsets after a batch only once that batch is in its
        commit log, while it calls :meth:`commit` only when a later batch has
        data: so the messages of a batch are accepted here, and a producer
        waiting for its outcome is not held until more messages come.
        """
        logged = self._logged()
        begin = int(start["seq"])
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if logged is not None:
            inbox, journal = logged
            inbox.check()
            journal.commit(begin)
            end = journal.plan(begin, max_rows)
            if self._held_back(end - begin):
                return {"seq": begin}
        else:
            inbox, ledger = self._started()
            accepted = ledger.commit(begin).accept
            inbox.settle(accepted)
            self._absorb(inbox, ledger)
            if accepted and begin not in ledger.batches:
                self._refill(inbox, ledger, max_rows)
            if begin not in ledger.batches and self._held_back(ledger.buffered):
                return {"seq": begin}
            end, settle = ledger.plan(begin, max_rows)
            inbox.settle(settle.accept, settle.release)
        if end > begin:
            self._last_batch = time.monotonic()
        return {"seq": end}

    def _refill(self, inbox: Inbox, ledger: Ledger, max_rows: int | None) -> None:
        """Messages were just accepted: their producers' windows open again and
        what they send next comes within milliseconds. Wait for it while it
        keeps coming (a gap of ``REFILL_GAP_S``, ``REFILL_S`` at most), so
        that the next batch holds a window's worth, not the few that came
        while the last one ran: Spark's cost is as much per batch as per row
        (docs/spark.md#micro-batch-size-and-the-routers-window)."""
        want = min(self.settings.credit, max_rows or self.settings.credit)
        deadline = time.monotonic() + REFILL_S
        gap = REFILL_FIRST_S
        while ledger.buffered < want and time.monotonic() < deadline:
            if not inbox.wait(gap):
                return
            self._absorb(inbox, ledger)
            gap = REFILL_GAP_S

    def _held_back(self, available: int) -> bool:
        """``minMessagesPerTrigger``: fewer messages than that wait for more,
        until ``maxTriggerDelay`` has passed since the last batch (as the
        Kafka source's ``minOffsetsPerTrigger`` and ``maxTriggerDelay``)."""
        least = self.settings.min_messages_per_trigger
        if least is None or available >= least or available == 0:
            return False
        return time.monotonic() - self._last_batch < self.settings.max_trigger_delay_s

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        logged = self._logged()
        if logged is not None:
            records = logged[1].records(int(start["seq"]), int(end["seq"]))
        else:
            inbox, ledger = self._started()
            records, settle = ledger.records(int(start["seq"]), int(end["seq"]))
            inbox.settle(settle.accept, settle.release)
        rows = [(r.data, r.address, r.received_at_s) for r in records]
        if len(rows) != int(end["seq"]) - int(start["seq"]):
            log.warning("amqp: batch [%s, %s) has %d of its messages: the others were not "
                        "journaled (no checkpointLocation option) and come again from the "
                        "router", start["seq"], end["seq"], len(rows))
        return [_Rows(rows[i:i + ROWS_PER_PARTITION])
                for i in range(0, len(rows), ROWS_PER_PARTITION)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, _Rows)
        records = partition.records
        for i in range(0, len(records), ARROW_ROWS):
            yield record_batch_of(records[i:i + ARROW_ROWS])

    def commit(self, end: dict[str, int]) -> None:
        logged = self._logged()
        if logged is not None:
            logged[1].commit(int(end["seq"]))
            return
        inbox, ledger = self._started()
        inbox.settle(ledger.commit(int(end["seq"])).accept)

    def stop(self) -> None:
        if self._writer is not None:
            self._writer.stop()
        if self._inbox is not None and self._writer is not None:
            self._inbox.close(self._writer.unwritten())
        elif self._inbox is not None and self._ledger is not None:
            self._inbox.close(self._ledger.release_all().release)
        self._inbox = None


class _Share(InputPartition):
    """One receiver of a batch read: its part of ``maxMessages`` (None: no limit)."""

    def __init__(self, index: int, max_messages: int | None) -> None:
        super().__init__(index)
        self.max_messages = max_messages


def shares(max_messages: int | None, partitions: int) -> list[int | None]:
    """``maxMessages`` split over ``partitions`` receivers as evenly as it goes
    (a receiver with no share is left out); every receiver unlimited when
    there is no ``maxMessages``."""
    if max_messages is None:
        return [None] * partitions
    base, extra = divmod(max_messages, partitions)
    return [base + (i < extra) for i in range(partitions) if base + (i < extra) > 0]


class BatchReader(DataSourceReader):
    """``spark.read.format("amqp")``: up to maxMessages, or until idleTimeout passes idle.

    Each of the ``partitions`` tasks attaches its own receiver to the address
    (the router balances the address's messages over them) and
    reads its share of ``maxMessages``. Messages are accepted as Spark takes
    their rows (a batch job has no later commit to wait for, and the router
    lets a producer have only so many messages unsettled); a task that fails
    releases the messages whose rows it had not handed over, and the router
    gives them to another consumer.
    """

    def __init__(self, settings: ReadSettings) -> None:
        self.settings = settings

    def partitions(self) -> Sequence[InputPartition]:
        s = self.settings
        return [_Share(i, n) for i, n in enumerate(shares(s.max_messages, s.partitions))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        s = self.settings
        limit = partition.max_messages if isinstance(partition, _Share) else s.max_messages
        granted = s.credit if limit is None else min(s.credit, limit)
        inbox = Inbox(s.endpoint, credit=granted, durable=s.durable,
                      name=s.subscription).start()
        taken: list[Any] = []  # handed to Spark, to accept
        late: list[Any] = []  # beyond maxMessages: released
        count = 0
        batch_rows = min(ARROW_ROWS, max(1, s.credit // 2))
        try:
            idle_since = time.monotonic()
            while limit is None or count < limit:
                if taken:
                    # In the receiver's thread, in order: the next rows are
                    # decoded there meanwhile.
                    inbox.settle(taken, replenish=False, wait=False)
                    more = len(taken) if limit is None else min(len(taken), limit - granted)
                    if more > 0:
                        inbox.flow(more)
                        granted += more
                    taken = []
                records = inbox.take()
                want = min(batch_rows, granted - count)
                while records and len(records) < want:
                    # While messages keep coming, a larger Arrow batch: Spark's
                    # cost is as much per batch as per row.
                    inbox.wait_for(want - len(records), GATHER_S)
                    extra = inbox.take()
                    if not extra:
                        break
                    records += extra
                if not records:
                    inbox.check()
                    remaining = s.idle_timeout_s - (time.monotonic() - idle_since)
                    if remaining <= 0 or not inbox.wait(remaining):
                        break
                    continue
                idle_since = time.monotonic()
                if limit is not None and count + len(records) > limit:
                    late.extend(r.token for r in records[limit - count:])
                    records = records[:limit - count]
                for i in range(0, len(records), ARROW_ROWS):
                    chunk = records[i:i + ARROW_ROWS]
                    yield record_batch_of((r.data, r.address, r.received_at_s) for r in chunk)
                    taken.extend(r.token for r in chunk)
                    count += len(chunk)
            inbox.settle(taken, replenish=False)
            taken = []
        finally:
            late.extend(r.token for r in inbox.take())
            inbox.close(taken + late)
