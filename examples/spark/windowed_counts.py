#!/usr/bin/env python3
"""Windowed counts: a Spark Structured Streaming job from one router address to another.

The job reads JSON events such as::

    {"key": "sensor-a", "value": 3.5, "time": "2026-11-25T10:00:07Z"}

from an input address (``events``), groups them per key in event-time windows (10 seconds,
with a watermark), and sends the count, sum and average of ``value`` of each (window, key) to
an output address (``event-counts``). Each result is one message whose body is an AMQP map
``{window_start, window_end, key, count, sum, avg}`` (the window's bounds as AMQP
timestamps) and whose subject is the key.

The query runs in "update" output mode: every micro-batch sends the (window, key) totals it
changed, so a consumer sees a total grow until the window closes, and the latest one for a
(window, key) is the final one. Spark lets a streaming sink written in Python, as the amqp
one is, take only append mode; so each micro-batch's totals are sent by the amqp batch
writer, from foreachBatch.

Run it with a demo against a local router, from the root of the repository::

    hopd -c examples/hopd.conf &
    python examples/spark/windowed_counts.py --url amqp://127.0.0.1:5672 --demo 300

With ``--demo N`` the script also sends N sample events itself (keys sensor-a, sensor-b and
sensor-c in turn, values 1.0, 1.5, ... 4.0 repeating, times spread evenly over four
windows), receives the results, waits until every (window, key) total it expects has come
with its final count, prints them, and exits 0; or exits 1 if they do not come in time
(``--timeout``). Without ``--demo`` the job runs until Ctrl-C, which stops the query cleanly.

The messages are read and written with Hop's ``amqp`` data source (the ``spark`` package at
the root of the repository); the demo's own producer and consumer are plain proton clients.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

try:
    from spark import session
except ImportError:  # run from a checkout: the package is at the root of the repository
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from spark import session

# The fields of an input event, as a Spark DDL schema for from_json.
EVENT_SCHEMA = "key STRING, value DOUBLE, time TIMESTAMP"

DEMO_KEYS = ("sensor-a", "sensor-b", "sensor-c")
DEMO_VALUES = (1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)
DEMO_WINDOWS = 4
DEMO_START = dt.datetime(2026, 11, 25, 10, 0, 0, tzinfo=dt.UTC)


# ----------------------------------------------------------------------------
# The pipeline


def windowed_counts(events: DataFrame, window_s: int, watermark_s: int) -> DataFrame:
    """Count, sum and average ``value`` per key per event-time window.

    ``events`` has the columns of the amqp source; the result has one row per (window, key)
    in the columns the amqp sink sends: ``body`` (a struct, sent as an AMQP map) and
    ``subject``.
    """
    parsed = (
        events
        .select(F.from_json(F.expr("CAST(body AS STRING)"), EVENT_SCHEMA).alias("event"))
        .select("event.*")
        # A message that is not such an event parses to nulls: leave it out.
        .where(F.col("key").isNotNull() & F.col("time").isNotNull())
    )
    totals = (
        parsed
        # Events more than watermark_s older than the newest one seen are too late to count,
        # and a window's state is dropped once the watermark passes its end.
        .withWatermark("time", f"{watermark_s} seconds")
        .groupBy(F.window("time", f"{window_s} seconds"), "key")
        .agg(F.count("*").alias("count"), F.sum("value").alias("sum"),
             F.avg("value").alias("avg"))
    )
    return totals.select(
        F.struct(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "key", "count", "sum", "avg",
        ).alias("body"),
        F.col("key").alias("subject"),
    )


def start_query(spark: SparkSession, args: argparse.Namespace, checkpoint: str) -> StreamingQuery:
    """Start the streaming query: input address -> windowed totals -> output address."""
    events = (
        spark.readStream.format("amqp")
        .option("url", args.url)
        .option("address", args.input)
        # The source journals each micro-batch here, so that a restarted query replays it.
        .option("checkpointLocation", checkpoint)
        .load()
    )
    results = windowed_counts(events, args.window, args.watermark)

    def send(batch: DataFrame, batch_id: int) -> None:
        # Message ids are WRITEID:PARTITION:ROW: a batch that Spark runs again (after a
        # failure or a restart) sends the same ids, so a consumer can drop the copies.
        (batch.write.format("amqp")
         .option("url", args.url)
         .option("address", args.output)
         .option("writeId", f"windowed-counts:{batch_id}")
         .mode("append")
         .save())

    # Spark's streaming sinks written in Python take only "append" mode, in which a window's
    # total is sent once, when the watermark passes the end of the window. For "update"
    # mode, each micro-batch's changed totals are sent with the amqp batch writer. (A query
    # in append mode writes with .writeStream.format("amqp") and the same options.)
    return (
        results.writeStream
        .outputMode("update")
        .foreachBatch(send)
        .option("checkpointLocation", checkpoint)
        .queryName("windowed_counts")
        .start()
    )


# ----------------------------------------------------------------------------
# The demo: sample events in, results out


@dataclass(frozen=True)
class Total:
    """The aggregate of one (window, key)."""

    window_start: dt.datetime
    key: str
    count: int
    sum: float

    @property
    def avg(self) -> float:
        return self.sum / self.count


GroupKey = tuple[dt.datetime, str]


def demo_events(n: int, window_s: int) -> list[dict[str, Any]]:
    """N events, times spread evenly over DEMO_WINDOWS windows from DEMO_START."""
    span_ms = DEMO_WINDOWS * window_s * 1000
    return [
        {
            "key": DEMO_KEYS[i % len(DEMO_KEYS)],
            "value": DEMO_VALUES[i % len(DEMO_VALUES)],
            "time": (DEMO_START + dt.timedelta(milliseconds=i * span_ms // n))
            .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }
        for i in range(n)
    ]


def window_of(time_text: str, window_s: int) -> dt.datetime:
    """The start of the window of an event time, as Spark's window() computes it."""
    seconds = dt.datetime.fromisoformat(time_text).timestamp()
    return dt.datetime.fromtimestamp(math.floor(seconds / window_s) * window_s, dt.UTC)


def expected_totals(events: list[dict[str, Any]], window_s: int) -> dict[GroupKey, Total]:
    totals: dict[GroupKey, Total] = {}
    for event in events:
        group = (window_of(event["time"], window_s), event["key"])
        old = totals.get(group, Total(group[0], group[1], 0, 0.0))
        totals[group] = Total(group[0], group[1], old.count + 1, old.sum + event["value"])
    return totals


def _utc(value: Any) -> dt.datetime:
    """An AMQP timestamp (milliseconds since the epoch) as a datetime in UTC."""
    return dt.datetime.fromtimestamp(int(value) / 1000, dt.UTC)


class DemoClient(MessagingHandler):  # type: ignore[misc]
    """The demo's side of the router, in a thread: sends the events, collects the totals.

    Events are sent unsettled and count as delivered once the router accepts them, which
    it does when the query has taken them into a committed micro-batch.
    """

    def __init__(self, url: str, input_address: str, output_address: str,
                 events: list[dict[str, Any]]) -> None:
        super().__init__(prefetch=100, auto_accept=True)
        self.url = url
        self.input_address = input_address
        self.output_address = output_address
        self.events = events
        self.sent = 0
        self.accepted = 0
        self.failure: str | None = None
        self.receiving = threading.Event()
        self.totals: dict[GroupKey, Total] = {}
        self.lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=Container(self).run, name="demo-client",
                                        daemon=True)

    def start(self, timeout_s: float) -> None:
        """Connect; return once the receiver of the results is attached."""
        self._thread.start()
        if not self.receiving.wait(timeout_s):
            self.failure = f"no receiver on {self.output_address!r} within {timeout_s:g} s"
        if self.failure is not None:
            raise SystemExit(f"demo failed: {self.failure}")

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(10)

    def snapshot(self) -> dict[GroupKey, Total]:
        with self.lock:
            return dict(self.totals)

    # -- in the client's thread -------------------------------------------------

    def on_start(self, event: Any) -> None:
        self.conn = event.container.connect(self.url, reconnect=False)
        event.container.create_receiver(self.conn, self.output_address)
        # The router gives this sender credit once the query's receiver is attached.
        self.sender = event.container.create_sender(self.conn, self.input_address)
        event.container.schedule(0.1, self)

    def on_link_opened(self, event: Any) -> None:
        if event.link.is_receiver:
            self.receiving.set()

    def on_sendable(self, event: Any) -> None:
        while self.sender.credit and self.sent < len(self.events):
            self.sender.send(Message(body=json.dumps(self.events[self.sent])))
            self.sent += 1

    def on_accepted(self, event: Any) -> None:
        self.accepted += 1

    def on_rejected(self, event: Any) -> None:
        self.failure = f"the router rejected an event ({event.delivery.remote.condition})"

    def on_released(self, event: Any) -> None:
        self.failure = "the router released an event: no consumer took it"

    def on_message(self, event: Any) -> None:
        body = event.message.body
        total = Total(_utc(body["window_start"]), body["key"], int(body["count"]),
                      float(body["sum"]))
        if event.message.subject != total.key:
            self.failure = f"a result's subject is {event.message.subject!r}, not its key"
        group = (total.window_start, total.key)
        with self.lock:
            # Update mode sends a total again each time it grows: keep the largest.
            old = self.totals.get(group)
            if old is None or total.count >= old.count:
                self.totals[group] = total

    def on_timer_task(self, event: Any) -> None:
        if self._stopping.is_set():
            self.conn.close()
        else:
            event.container.schedule(0.1, self)

    def on_transport_error(self, event: Any) -> None:
        self.failure = f"connection to {self.url} failed ({event.transport.condition})"
        self.receiving.set()


def not_final(expected: dict[GroupKey, Total], got: dict[GroupKey, Total]) -> list[str]:
    """Each expected total that has not arrived with its count and sum, as a line of text."""
    out = []
    for group, want in sorted(expected.items()):
        have = got.get(group)
        if have is None or have.count != want.count or not math.isclose(have.sum, want.sum):
            out.append(f"{want.window_start:%H:%M:%S} {want.key}: count "
                       f"{'none' if have is None else have.count} of {want.count}, sum "
                       f"{'none' if have is None else have.sum} of {want.sum}")
    return out


def print_table(totals: Sequence[Total]) -> None:
    print(f"{'window start (UTC)':<21} {'key':<10} {'count':>6} {'sum':>9} {'avg':>7}")
    for t in totals:
        print(f"{t.window_start:%Y-%m-%d %H:%M:%S}   {t.key:<10} {t.count:>6} "
              f"{t.sum:>9.3f} {t.avg:>7.3f}")
    print(f"{sum(t.count for t in totals)} events in {len(totals)} (window, key) totals")


def wait_for_totals(query: StreamingQuery, client: DemoClient,
                    expected: dict[GroupKey, Total], timeout_s: float) -> str | None:
    """Wait until every expected total has arrived final; None, or what went wrong."""
    deadline = time.monotonic() + timeout_s
    while missing := not_final(expected, client.snapshot()):
        if not query.isActive:
            return f"the query stopped: {query.exception()}"
        if client.failure is not None:
            return f"demo failed: {client.failure}"
        if time.monotonic() > deadline:
            return (f"timed out after {timeout_s:g} s: {client.accepted} of "
                    f"{len(client.events)} events accepted, and these totals are not final:"
                    + "".join(f"\n  {line}" for line in missing))
        time.sleep(0.2)
    return None


def run_demo(spark: SparkSession, args: argparse.Namespace, checkpoint: str) -> int:
    events = demo_events(args.demo, args.window)
    expected = expected_totals(events, args.window)
    client = DemoClient(args.url, args.input, args.output, events)
    # Receive before the query starts, so that its first results have somewhere to go.
    client.start(timeout_s=30)
    query = start_query(spark, args, checkpoint)
    print(f"sending {len(events)} events to {args.input!r}; expecting {len(expected)} "
          f"(window, key) totals on {args.output!r}", flush=True)
    try:
        problem = wait_for_totals(query, client, expected, args.timeout)
        if problem is None:
            stop_between_batches(query)
    finally:
        query.stop()  # at once if the totals did not come; nothing if stopped already
        client.stop()
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    got = client.snapshot()
    print_table([got[group] for group in sorted(expected)])
    return 0


def stop_between_batches(query: StreamingQuery, timeout_s: float = 10.0) -> None:
    """Stop the query between two micro-batches, so that none is cut short.

    The batch in progress gets at most timeout_s to finish: a batch waits while the
    output address has no consumer.
    """
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def run_until_interrupted(spark: SparkSession, args: argparse.Namespace,
                          checkpoint: str) -> int:
    query = start_query(spark, args, checkpoint)
    print(f"reading {args.input!r}, sending totals to {args.output!r} at {args.url}; "
          "Ctrl-C stops", flush=True)
    # Ctrl-C only sets a flag: PySpark's own handler would cancel the running jobs from
    # inside whatever call to the JVM the main thread is in.
    interrupted = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.set())
    try:
        while query.isActive and not interrupted.wait(0.5):
            pass
    finally:
        signal.signal(signal.SIGINT, previous)
    if not query.isActive:
        print(f"the query stopped: {query.exception()}", file=sys.stderr)
        return 1
    print("stopping the query", file=sys.stderr, flush=True)
    stop_between_batches(query)
    return 0


# ----------------------------------------------------------------------------
# Command line


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Count, sum and average JSON events per key in event-time windows: read "
                    "them from one router address, send the totals to another. Runs until "
                    "Ctrl-C, or with --demo until the demo's totals have come.",
        epilog="example: %(prog)s --url amqp://127.0.0.1:5672 --demo 300")
    parser.add_argument("--url", default="amqp://127.0.0.1:5672",
                        help="the router to connect to (default: %(default)s)")
    parser.add_argument("--input", default="events", metavar="ADDRESS",
                        help="the address to read JSON events from (default: %(default)s)")
    parser.add_argument("--output", default="event-counts", metavar="ADDRESS",
                        help="the address to send the totals to (default: %(default)s)")
    parser.add_argument("--window", type=int, default=10, metavar="SECONDS",
                        help="the length of an event-time window (default: %(default)s)")
    parser.add_argument("--watermark", type=int, default=30, metavar="SECONDS",
                        help="how far behind the newest event time seen an event may be and "
                             "still be counted (default: %(default)s)")
    parser.add_argument("--checkpoint", metavar="DIR",
                        help="the query's checkpoint directory, to resume from after a "
                             "restart (default: a new temporary directory, removed on exit)")
    parser.add_argument("--demo", type=int, metavar="N",
                        help="also send N sample events, wait for their totals, print them "
                             "and exit")
    parser.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                        help="with --demo: how long to wait for the totals, before exiting "
                             "with status 1 (default: %(default)g)")
    args = parser.parse_args(argv)
    if args.window < 1 or args.watermark < 0:
        parser.error("--window must be at least 1 and --watermark at least 0")
    if args.demo is not None and args.demo < 1:
        parser.error("--demo needs at least 1 event")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="windowed-counts-")
    spark = session("windowed-counts", spark__ui__showConsoleProgress="false")
    spark.sparkContext.setLogLevel("WARN")
    try:
        if args.demo is not None:
            return run_demo(spark, args, checkpoint)
        return run_until_interrupted(spark, args, checkpoint)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        spark.stop()
        if args.checkpoint is None:
            shutil.rmtree(checkpoint, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
