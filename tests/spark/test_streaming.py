"""Streaming writes and reads through the amqp data source, against a real hopd."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from proton import Delivery, Message

from tests.spark.amqp import Consumer, Producer
from tests.system.harness import Hop

WAIT_S = 120.0


def test_a_streaming_write_spans_micro_batches_with_an_id_per_row(
        spark: Any, router: Hop, tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    for batch in range(3):
        (source / f"part-{batch}.json").write_text(
            "".join(json.dumps({"key": f"k{i % 4}", "n": batch * 40 + i}) + "\n"
                    for i in range(40)))
    consumer = Consumer(router.url, "results").start()
    try:
        events = (spark.readStream.schema("key string, n int")
                  .option("maxFilesPerTrigger", 1).json(str(source)))
        query = (events.selectExpr("to_json(struct(key, n)) as body", "key as subject")
                 .writeStream.format("amqp").option("url", router.url)
                 .option("address", "results")
                 .option("checkpointLocation", str(tmp_path / "ck")).start())
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        messages = consumer.wait_for(120)
    finally:
        consumer.stop()
    assert sorted(json.loads(m.body)["n"] for m in messages) == list(range(120))
    assert all(m.subject == json.loads(m.body)["key"] for m in messages)
    ids = [m.id.split(":") for m in messages]
    assert {i[0] for i in ids} == {str(query.id)}, "QUERYID:BATCH:PARTITION:ROW"
    assert {i[1] for i in ids} == {"0", "1", "2"}, "three micro-batches"
    assert len({m.id for m in messages}) == 120


def test_a_streaming_read_accepts_each_batch_once_spark_has_it(
        spark: Any, router: Hop) -> None:
    sent = [Message(body=f"m{i}", id=f"id{i}", properties={"i": i}) for i in range(1000)]
    producer = Producer(router.url, "events", sent).start()
    assert producer.outcomes == {}, "no consumer yet: nothing is settled"
    query = (spark.readStream.format("amqp").option("url", router.url)
             .option("address", "events").option("maxMessagesPerTrigger", "150").load()
             .writeStream.format("memory").queryName("streamed_events")
             .trigger(processingTime="200 milliseconds").start())
    try:
        outcomes = producer.wait(WAIT_S)
        query.processAllAvailable()
        rows = spark.sql("select cast(body as string) as body, properties, "
                         "application_properties, address from streamed_events").collect()
        batches = [p["numInputRows"] for p in query.recentProgress]
    finally:
        query.stop()
    assert outcomes == [Delivery.ACCEPTED] * 1000
    assert sorted(r.body for r in rows) == sorted(f"m{i}" for i in range(1000)), \
        "every message once"
    assert {r.address for r in rows} == {"events"}
    assert all(r.application_properties["i"] == r.body[1:] for r in rows)
    assert all(r.properties["message_id"] == "id" + r.body[1:] for r in rows)
    assert max(batches) <= 150, "maxMessagesPerTrigger bounds each micro-batch"
    assert sum(1 for b in batches if b) >= 7


def test_an_unreachable_router_stops_a_streaming_query_with_a_clear_error(
        spark: Any) -> None:
    from tests.system.rabbitmq import free_port

    url = f"amqp://127.0.0.1:{free_port()}"
    query = (spark.readStream.format("amqp").option("url", url).option("address", "x")
             .option("connectTimeout", "2").load()
             .writeStream.format("memory").queryName("never").start())
    deadline = time.monotonic() + WAIT_S
    while query.isActive and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not query.isActive
    error = query.exception()
    assert error is not None
    assert f"cannot reach the router at {url}" in str(error)


def _reader(router: Hop, **options: str) -> Any:
    from spark.options import read_settings
    from spark.source import StreamReader
    return StreamReader(read_settings({"url": router.url, "address": "held", **options}))


def test_min_messages_per_trigger_holds_a_batch_back_until_max_trigger_delay(
        router: Hop) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    reader = _reader(router, minMessagesPerTrigger="50", maxTriggerDelay="1.5")
    start = reader.initialOffset()
    producer = Producer(router.url, "held", [Message(body=f"m{i}") for i in range(30)]).start()
    try:
        began = time.monotonic()
        time.sleep(0.5)  # the 30 have arrived
        assert reader.latestOffset(start, ReadAllAvailable()) == start, "30 < 50: held back"
        end = start
        while end == start and time.monotonic() - began < 10:
            time.sleep(0.1)
            end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {"seq": 30}
        assert time.monotonic() - began >= 1.4, "maxTriggerDelay passed first"
        reader.latestOffset(end, ReadAllAvailable())  # Spark committed the batch
        assert producer.wait() == [Delivery.ACCEPTED] * 30
    finally:
        reader.stop()


def test_after_accepting_a_batch_the_next_waits_for_the_producers_refill(
        router: Hop, monkeypatch: Any) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    import spark.source
    # Bounds far above a loaded machine's round trip: the mechanism is under
    # test here, the figures are the bench's (python -m bench.spark).
    monkeypatch.setattr(spark.source, "REFILL_FIRST_S", 2.0)
    monkeypatch.setattr(spark.source, "REFILL_GAP_S", 1.0)
    monkeypatch.setattr(spark.source, "REFILL_S", 10.0)
    reader = _reader(router)
    start = reader.initialOffset()
    producer = Producer(router.url, "held", [Message(body=f"m{i}") for i in range(600)]).start()
    try:
        end = start
        began = time.monotonic()
        while end["seq"] < 250 and time.monotonic() - began < WAIT_S:
            time.sleep(0.05)
            end = reader.latestOffset(start, ReadAllAvailable())
        # The router's window (linkCapacity 250): no more until these are accepted.
        assert end == {"seq": 250}
        reader.partitions(start, end)
        # Spark committed [0, 250): accepted here, and the producer's next 250
        # are in the next batch, not the none that had come by then.
        assert reader.latestOffset(end, ReadAllAvailable()) == {"seq": 500}
    finally:
        reader.stop()
    assert producer.wait().count(Delivery.ACCEPTED) == 250


def test_accepted_when_journaled_before_spark_commits_and_read_from_the_journal(
        router: Hop, tmp_path: Path) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    checkpoint = tmp_path / "ck"
    reader = _reader(router, accept="journal", checkpointLocation=str(checkpoint))
    start = reader.initialOffset()
    sent = [Message(body=f"m{i}", id=f"id{i}") for i in range(300)]
    producer = Producer(router.url, "held", sent).start()
    try:
        # Every message accepted with no batch planned, let alone committed.
        assert producer.wait() == [Delivery.ACCEPTED] * 300
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {"seq": 300}
        parts = reader.partitions(start, end)
        bodies = [bytes(b) for p in parts for batch in reader.read(p)
                  for b in batch.column("body").to_pylist()]
        assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(300))
        files = list((checkpoint / "sources-amqp" / "held").glob("*.log"))
        assert files, "the messages are on disk until Spark commits them"
        reader.commit(end)
        assert not list((checkpoint / "sources-amqp" / "held").glob("*.log"))
    finally:
        reader.stop()
