"""Rows per second through the amqp Spark data source, against one hopd.

    python -m bench.spark [--rows N] [--link-capacity C]

One local SparkSession (``local[2,4]``) and one Hop router; the C load
generators (hop-send, hop-recv) are the other end of each run, so that the
figure is the data source's and Spark's, not a Python client's:

- batch write: ``spark.range(N)`` as 100-byte string bodies, 2 partitions,
  written to an address that hop-recv consumes;
- batch read: hop-send puts N 100-byte messages on an address,
  ``spark.read.format("amqp")`` with ``maxMessages`` N counts them, on one
  partition (one receiver) and on two;
- streaming read: hop-send N messages, a streaming query (noop sink) runs
  until it has processed N rows; the clock starts when hop-send starts.
  Messages accepted when Spark has committed their batch (the default), and
  with ``accept`` = ``journal`` (accepted once written under the checkpoint).

Each figure is the median of ``--rounds`` runs after one warm-up run. A
micro-batch holds at most the router's window of unsettled messages per
producer (``linkCapacity``, 250 by default, as in qdrouterd), and the
router gives a producer that many credits: every scenario is measured with
the default and with ``--link-capacity``.

``--only TEXT`` runs the scenarios whose names hold TEXT (``streaming``,
``linkCapacity 5000``). ``--parts`` says where the time goes instead
(docs/spark.md#where-the-time-goes):
the data source's per-row conversions alone, its AMQP sender and receiver
alone against the router (no Spark), and Spark alone with data sources that
only hand rows over (rows and Arrow record batches), each in rows/s or
microseconds a row.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from bench.build import build
from bench.processes import HOP, RouterProcess, finish, listener, start


def _conf(link_capacity: int | None) -> str:
    text = listener(HOP)
    if link_capacity:
        text = text.replace("}\n", f"    linkCapacity: {link_capacity}\n}}\n", 1)
    # A batch read on two partitions: what the router had queued for a
    # receiver that has read its share goes to the other (docs/spark.md#reading-a-batch).
    return ("router {\n    mode: standalone\n    id: BenchSpark\n}\n" + text
            + "address {\n    prefix: r\n    distribution: balanced\n"
            "    redeliveryLimit: 1\n}\n"
            + "log {\n    module: DEFAULT\n    enable: notice+\n}\n")


def batch_write(spark: Any, bins: Any, url: str, rows: int, address: str) -> float:
    recv = start([str(bins["hop-recv"]), url, address, "--count", str(rows),
                  "--timeout", "300"])
    time.sleep(0.3)
    df = spark.range(rows, numPartitions=2).selectExpr("lpad(cast(id as string), 100, 'x') "
                                                       "as body")
    started = time.perf_counter()
    df.write.format("amqp").option("url", f"amqp://{url}").option("address", address) \
        .mode("append").save()
    seconds = time.perf_counter() - started
    got = finish(recv, 60)
    if got["received"] != rows:
        raise RuntimeError(f"hop-recv got {got['received']} of {rows}")
    return rows / seconds


def batch_read(spark: Any, bins: Any, url: str, rows: int, address: str,
               partitions: int = 1) -> float:
    send = start([str(bins["hop-send"]), url, address, "--count", str(rows), "--size", "100",
                  "--timeout", "300"])
    time.sleep(0.3)
    started = time.perf_counter()
    count = spark.read.format("amqp").option("url", f"amqp://{url}") \
        .option("address", address).option("maxMessages", str(rows)) \
        .option("partitions", str(partitions)).load().count()
    seconds = time.perf_counter() - started
    sent = finish(send, 60)
    if count != rows or sent["accepted"] != rows:
        raise RuntimeError(f"read {count} of {rows}; {sent['accepted']} accepted")
    return rows / seconds


def streaming_read(spark: Any, bins: Any, url: str, rows: int, address: str,
                   journal: bool = False) -> float:
    checkpoint = tempfile.mkdtemp(prefix="hop-bench-spark-")
    reader = spark.readStream.format("amqp").option("url", f"amqp://{url}") \
        .option("address", address).option("credit", "10000")
    if journal:
        reader = reader.option("accept", "journal").option("checkpointLocation", checkpoint)
    query = reader.load().writeStream.format("noop").option("checkpointLocation", checkpoint) \
        .trigger(processingTime="0 seconds").start()
    try:
        while not query.recentProgress:  # the first (empty) batch started the workers
            time.sleep(0.1)
        started = time.time()
        send = start([str(bins["hop-send"]), url, address, "--count", str(rows),
                      "--size", "100", "--timeout", "300"])
        done = 0
        ended = started
        seen: set[str] = set()
        while done < rows:
            # Each batch's progress says when it started and how long it took:
            # the clock stops when the last batch ended, however seldom this
            # asks (asking through py4j costs the driver CPU the run needs).
            for progress in query.recentProgress:
                key = f"{progress['batchId']}"
                if key not in seen:
                    seen.add(key)
                    done += progress["numInputRows"]
                    ended = max(ended, _ended_s(progress))
            if time.time() - started > 300:
                raise RuntimeError(f"streamed {done} of {rows} in 300 s")
            time.sleep(0.1)
        seconds = ended - started
        sent = finish(send, 60)
    finally:
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)
    if sent["accepted"] != rows:
        raise RuntimeError(f"{sent['accepted']} of {rows} accepted")
    return rows / seconds


def _ended_s(progress: dict[str, Any]) -> float:
    """When a micro-batch ended, in seconds since the epoch, from its progress."""
    began = dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00"))
    took_ms: int = progress["durationMs"]["triggerExecution"]
    return began.timestamp() + took_ms / 1000


# ----------------------------------------------------------------------------
# Where the time goes (--parts)


def _codec_us(rows: int) -> dict[str, float]:
    """Microseconds a row for the data source's conversions, in one process."""
    from spark.codec import encoded_of, message_of, row_of

    row = {"body": "x" * 100}
    started = time.perf_counter()
    messages = [message_of(row, f"w:0:{i}", "parts", False) for i in range(rows)]
    built = time.perf_counter()
    encoded = [m.encode() for m in messages]
    done_encoding = time.perf_counter()
    for i in range(rows):
        encoded_of(row, f"w:0:{i}", "parts", False)
    direct = time.perf_counter()
    for data in encoded:
        row_of(data, "parts", 0.0)
    decoded = time.perf_counter()
    return {"row to message (message_of)": (built - started) * 1e6 / rows,
            "message to bytes (proton encode)": (done_encoding - built) * 1e6 / rows,
            "row to bytes (encoded_of, as the writer does)": (direct - done_encoding) * 1e6 / rows,
            "bytes to row (row_of)": (decoded - direct) * 1e6 / rows}


def _clients(bins: Any, rows: int) -> dict[str, float]:
    """The data source's sender and receiver alone against one router: rows/s."""
    from spark.client import Inbox, Outbox
    from spark.codec import encoded_of
    from spark.options import Endpoint

    messages = [encoded_of({"body": "x" * 100}, f"w:0:{i}", "pw", False) for i in range(rows)]
    with RouterProcess(_conf(5000), name="spark-parts") as router:
        url = router.url
        recv = start([str(bins["hop-recv"]), url, "pw", "--count", str(rows),
                      "--timeout", "300"])
        time.sleep(0.3)
        where = Endpoint(url=f"amqp://{url}", address="pw", connect_timeout_s=10)
        started = time.perf_counter()
        Outbox(where, iter(messages), target="pw", window=1000, send_timeout_s=60).run()
        sent_rate = rows / (time.perf_counter() - started)
        finish(recv, 60)
        send = start([str(bins["hop-send"]), url, "pr", "--count", str(rows), "--size", "100",
                      "--timeout", "300"])
        inbox = Inbox(Endpoint(url=f"amqp://{url}", address="pr", connect_timeout_s=10),
                      credit=1000).start()
        started = time.perf_counter()
        got = 0
        try:
            while got < rows:
                records = inbox.take()
                if not records:
                    if not inbox.wait(30):
                        raise RuntimeError(f"received {got} of {rows}")
                    continue
                got += len(records)
                inbox.settle([r.token for r in records])
            received_rate = rows / (time.perf_counter() - started)
        finally:
            inbox.close()
        finish(send, 60)
    return {"sender alone (Outbox)": sent_rate, "receiver alone (Inbox)": received_rate}


def _spark_alone(spark: Any, rows: int) -> dict[str, float]:
    """Spark's own part: data sources that only hand rows over, rows/s."""
    from bench.spark_noop import register

    register(spark)
    df = spark.range(rows, numPartitions=2).selectExpr(
        "lpad(cast(id as string), 100, 'x') as body")
    out: dict[str, float] = {}
    for label, name in (("rows", "hop-noop-rows"), ("Arrow batches", "hop-noop-arrow")):
        df.write.format(name).mode("append").save()  # warm-up
        started = time.perf_counter()
        df.write.format(name).mode("append").save()
        out[f"Spark write alone, {label}"] = rows / (time.perf_counter() - started)
        spark.read.format(name).option("rows", str(rows)).load().count()
        started = time.perf_counter()
        spark.read.format(name).option("rows", str(rows)).load().count()
        out[f"Spark read alone, {label}"] = rows / (time.perf_counter() - started)
    return out


def parts(rows: int) -> None:
    from spark import session

    for name, us in _codec_us(rows).items():
        print(f"{name:40} {us:8.1f} us a row")
    bins = build()
    for name, rate in _clients(bins, rows).items():
        print(f"{name:40} {rate:10,.0f} rows/s")
    spark = session("hop-bench-parts")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for name, rate in _spark_alone(spark, rows).items():
            print(f"{name:40} {rate:10,.0f} rows/s")
    finally:
        spark.stop()


Run = Callable[[Any, Any, str, int, str], float]


def _median(run: Run, args: tuple[Any, Any, str, int, str],
            rounds: int) -> tuple[float, list[float]]:
    run(*args)  # warm-up: the Python workers start
    figures = [run(*args) for _ in range(rounds)]
    return statistics.median(figures), figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--link-capacity", type=int, default=5000)
    parser.add_argument("--only", default="",
                        help="run only the scenarios whose names hold this text, "
                             "such as 'streaming' or 'linkCapacity 5000'")
    parser.add_argument("--parts", action="store_true",
                        help="where the time goes: each part alone (see the module's text)")
    args = parser.parse_args()
    if args.parts:
        parts(args.rows)
        return

    from spark import session

    bins = build()
    spark = session("hop-bench")
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, Any] = {"rows": args.rows}
    try:
        for capacity in (None, args.link_capacity):
            label = f"linkCapacity {capacity or 250}"
            scenarios: list[tuple[str, Any, str]] = [
                (f"batch write, {label}", batch_write, "w"),
                *((f"batch read, {n} partition{'s' * (n > 1)}, {label}",
                   functools.partial(batch_read, partitions=n), "r") for n in (1, 2)),
                (f"streaming read, {label}", streaming_read, "s"),
                (f"streaming read, accept=journal, {label}",
                 functools.partial(streaming_read, journal=True), "j"),
            ]
            chosen = [one for one in scenarios if args.only in one[0]]
            if not chosen:
                continue
            with RouterProcess(_conf(capacity), name="spark") as router:
                for name, run, address in chosen:
                    results[name] = _median(run, (spark, bins, router.url, args.rows, address),
                                            args.rounds)
    finally:
        spark.stop()
    for name, value in results.items():
        if isinstance(value, tuple):
            median, figures = value
            print(f"{name:52} {median:10,.0f} rows/s  (runs: "
                  f"{', '.join(f'{f:,.0f}' for f in figures)})")
    print(json.dumps({k: v[0] if isinstance(v, tuple) else v for k, v in results.items()}))


if __name__ == "__main__":
    main()
