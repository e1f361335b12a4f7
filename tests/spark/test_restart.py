"""A streaming read stopped and restarted from its checkpoint loses nothing.

The address is a waypoint in front of a real RabbitMQ queue: messages that
the reader held unaccepted when it stopped go back to the queue, and the
broker delivers them again to the restarted query. The batch that was
planned but not committed is replayed from the journal under the
checkpoint location, and the second copies of its messages are recognised
by message-id.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import Delivery, Message
from pyspark.sql.streaming.datasource import ReadMaxRows

from spark.options import read_settings
from spark.source import StreamReader
from tests.spark.amqp import Producer
from tests.spark.die_after_commit import batch_ids
from tests.system.brokered import LOG_INFO, broker_connector, wait_autolinks, waypoint
from tests.system.harness import Hop, router_conf, start
from tests.system.rabbitmq import RabbitMQ, running
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]

TOTAL = 1500
WAIT_S = 180.0


@pytest.fixture(scope="module")
def rabbitmq() -> Iterator[RabbitMQ]:
    with running("rabbit-spark") as broker:
        yield broker


@pytest.fixture
def brokered(tmp_path: Path, rabbitmq: RabbitMQ) -> Iterator[Hop]:
    hop = start(tmp_path, router_conf(broker_connector(rabbitmq.port)
                                      + waypoint("spark.events") + LOG_INFO), "hop")
    wait_autolinks(hop, "spark.events")
    yield hop
    status = hop.stop()
    assert status == 0, hop.log_text()


def start_query(spark: Any, hop: Hop, checkpoint: Path, out: Path, accept: str) -> Any:
    events = (spark.readStream.format("amqp").option("url", hop.url)
              .option("address", "spark.events").option("maxMessagesPerTrigger", "100")
              .option("checkpointLocation", str(checkpoint)).option("accept", accept).load())
    return (events.selectExpr("properties['message_id'] as id", "cast(body as string) as body")
            .writeStream.format("json").option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds").start())


def written_ids(spark: Any, out: Path) -> list[str]:
    if not (out / "_spark_metadata").exists():
        return []
    return [r.id for r in spark.read.schema("id string, body string").json(str(out)).collect()]


def fill_queue(hop: Hop, rabbitmq: RabbitMQ) -> None:
    producer = Producer(hop.url, "spark.events",
                        [Message(body=json.dumps({"i": i}), id=f"e{i}")
                         for i in range(TOTAL)]).start()
    assert producer.wait(WAIT_S) == [Delivery.ACCEPTED] * TOTAL, "all stored on the broker"
    wait_for(lambda: rabbitmq.queue_depth("spark.events") == TOTAL, 30, "the queue filled")


#: Messages accepted when Spark commits their batch, or once journaled.
ACCEPT = pytest.mark.parametrize("accept", ["commit", "journal"])


@ACCEPT
def test_a_query_stopped_and_restarted_from_its_checkpoint_loses_nothing(
        spark: Any, brokered: Hop, rabbitmq: RabbitMQ, tmp_path: Path, accept: str) -> None:
    fill_queue(brokered, rabbitmq)
    checkpoint, out = tmp_path / "ck", tmp_path / "out"

    first = start_query(spark, brokered, checkpoint, out, accept)
    try:
        wait_for(lambda: len(written_ids(spark, out)) >= 400, WAIT_S, "400 rows written")
    finally:
        first.stop()
    before = len(written_ids(spark, out))
    assert before < TOTAL, "stopped part way"
    finish_and_check(spark, brokered, rabbitmq, checkpoint, out, before, accept)


@ACCEPT
def test_a_query_killed_mid_stream_and_restarted_loses_nothing(
        spark: Any, brokered: Hop, rabbitmq: RabbitMQ, tmp_path: Path, accept: str) -> None:
    """The driver is killed (SIGKILL, with its JVM): no stop, no release, no commit."""
    fill_queue(brokered, rabbitmq)
    checkpoint, out = tmp_path / "ck", tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    job = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.stream_job", brokered.url, "spark.events",
         str(checkpoint), str(out), accept], cwd=REPO, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: len(written_ids(spark, out)) >= 300 or job.poll() is not None,
                 WAIT_S, "300 rows written by the job")
        assert job.poll() is None, (job.stdout.read() if job.stdout else b"").decode()
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    before = len(written_ids(spark, out))
    assert before < TOTAL, "killed part way"
    finish_and_check(spark, brokered, rabbitmq, checkpoint, out, before, accept)


def test_a_reader_killed_between_a_commit_and_its_accepts_emits_nothing_twice(
        brokered: Hop, rabbitmq: RabbitMQ, tmp_path: Path) -> None:
    """Spark kills its source process when a query stops. Landing after Spark
    committed a batch and before the reader accepted its messages, the kill
    has the broker deliver them again; the journal's mark of the committed
    batch has them accepted at once, not emitted a second time."""
    fill_queue(brokered, rabbitmq)
    checkpoint = tmp_path / "ck"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    first = subprocess.run(
        [sys.executable, "-m", "tests.spark.die_after_commit", brokered.url, "spark.events",
         str(checkpoint), "100"], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=WAIT_S)
    assert first.returncode == 3, first.stdout + first.stderr
    committed = json.loads(first.stdout.splitlines()[-1])
    assert 0 < len(committed) <= 100

    reader = StreamReader(read_settings({"url": brokered.url, "address": "spark.events",
                                         "checkpointLocation": str(checkpoint)}))
    start, emitted = {"seq": len(committed)}, list[str]()
    deadline = time.monotonic() + WAIT_S
    try:
        while len(emitted) < TOTAL - len(committed) and time.monotonic() < deadline:
            end = reader.latestOffset(start, ReadMaxRows(500))
            if end == start:
                time.sleep(0.1)
                continue
            emitted += batch_ids(reader, start, end)
            start = end
        reader.latestOffset(start, ReadMaxRows(500))  # the last batch is committed
    finally:
        reader.stop()
    assert not set(committed) & set(emitted), "a committed message emitted again"
    assert sorted(emitted + committed) == sorted(f"e{i}" for i in range(TOTAL)), \
        "each message emitted once"
    wait_for(lambda: rabbitmq.queue_counts("spark.events") == (0, 0), 30,
             "every message accepted on the broker")


def finish_and_check(spark: Any, brokered: Hop, rabbitmq: RabbitMQ, checkpoint: Path,
                     out: Path, before: int, accept: str) -> None:
    second = start_query(spark, brokered, checkpoint, out, accept)
    try:
        wait_for(lambda: len(set(written_ids(spark, out))) >= TOTAL, WAIT_S,
                 "every message written")
        second.processAllAvailable()
        deadline = time.monotonic() + 30
        while rabbitmq.queue_counts("spark.events") != (0, 0) \
                and time.monotonic() < deadline:
            second.processAllAvailable()
            time.sleep(0.5)
    finally:
        second.stop()
    ids = written_ids(spark, out)
    copies = Counter(ids)
    assert set(ids) == {f"e{i}" for i in range(TOTAL)}, "nothing lost"
    duplicates = sum(n - 1 for n in copies.values())
    print(f"{before} rows before the stop, {len(ids)} in all, {duplicates} duplicates")
    assert duplicates == 0, f"copies recognised by message-id: {copies.most_common(3)}"
    assert rabbitmq.queue_counts("spark.events") == (0, 0), \
        "every message accepted: none left ready or unacknowledged on the broker"
