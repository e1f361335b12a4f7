"""Batch writes and reads through the amqp data source, against a real hopd."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from proton import Delivery, Message

from tests.spark.amqp import Consumer, Producer
from tests.system.harness import Hop, router_conf, start
from tests.system.rabbitmq import free_port


def write(df: Any, url: str, address: str | None = "out", **options: str) -> None:
    w = df.write.format("amqp").option("url", url)
    if address is not None:
        w = w.option("address", address)
    for key, value in options.items():
        w = w.option(key, value)
    w.mode("append").save()


def test_a_batch_write_of_10000_rows_arrives_intact(spark: Any, router: Hop) -> None:
    consumer = Consumer(router.url, "out").start()
    try:
        df = spark.range(10_000).selectExpr(
            "cast(id as string) as body", "concat('s', id % 3) as subject",
            "map('n', cast(id as string)) as application_properties")
        write(df.repartition(4), router.url, writeId="load-1")
        messages = consumer.wait_for(10_000)
    finally:
        consumer.stop()
    assert len(messages) == 10_000
    assert sorted(int(m.body) for m in messages) == list(range(10_000))
    assert all(m.subject == f"s{int(m.body) % 3}" for m in messages)
    assert all(m.properties == {"n": m.body} for m in messages)
    ids = {m.id for m in messages}
    assert len(ids) == 10_000, "one deterministic id per row"
    assert {i.split(":")[0] for i in ids} == {"load-1"}
    assert {i.split(":")[1] for i in ids} == {"0", "1", "2", "3"}, "WRITEID:PARTITION:ROW"


def test_struct_bodies_become_maps_and_a_to_column_routes_each_row(
        spark: Any, router: Hop) -> None:
    a = Consumer(router.url, "to.a").start()
    b = Consumer(router.url, "to.b").start()
    try:
        df = spark.createDataFrame(
            [({"k": "x", "n": 1}, "to.a"), ({"k": "y", "n": 2}, "to.b"),
             ({"k": "z", "n": 3}, "to.a")],
            "body struct<k: string, n: int>, to string")
        write(df, router.url, address=None)
        got_a, got_b = a.wait_for(2), b.wait_for(1)
    finally:
        a.stop()
        b.stop()
    assert sorted(m.body["n"] for m in got_a) == [1, 3]
    assert got_b[0].body == {"k": "y", "n": 2}
    assert {m.address for m in got_a} == {"to.a"}


def test_a_rejected_message_fails_the_task_and_spark_runs_it_again(
        spark: Any, router: Hop) -> None:
    rejected: list[str] = []

    def decide(message: Message, index: int) -> int:
        if message.body == "7" and not rejected:
            rejected.append(message.id)
            return int(Delivery.REJECTED)
        return int(Delivery.ACCEPTED)

    consumer = Consumer(router.url, "out", decide=decide).start()
    try:
        write(spark.range(20).selectExpr("cast(id as string) as body").coalesce(1),
              router.url, credit="1")
        consumer.wait_for(21)
    finally:
        consumer.stop()
    assert rejected, "the consumer rejected message 7 once"
    assert consumer.messages[7].id == rejected[0] and consumer.outcomes[7] == Delivery.REJECTED
    first_attempt, second_attempt = consumer.messages[:8], consumer.messages[8:]
    assert [int(m.body) for m in first_attempt] == list(range(8)), "it stopped at the reject"
    assert [int(m.body) for m in second_attempt] == list(range(20)), "the retry sent all"
    assert [m.id for m in first_attempt] == [m.id for m in second_attempt[:8]], \
        "the same ids the second time, so that a consumer can drop the copies"
    assert len({m.id for m in consumer.messages}) == 20


def test_a_batch_read_returns_what_a_producer_sent_and_accepts_it(
        spark: Any, router: Hop) -> None:
    sent = [Message(body=json.dumps({"i": i}), id=f"p{i}", subject="ev",
                    properties={"i": i}) for i in range(500)]
    producer = Producer(router.url, "in", sent).start()
    rows = (spark.read.format("amqp").option("url", router.url).option("address", "in")
            .option("maxMessages", "500").load().collect())
    assert producer.wait() == [Delivery.ACCEPTED] * 500
    assert len(rows) == 500
    assert sorted(json.loads(r.body)["i"] for r in rows) == list(range(500))
    first = min(rows, key=lambda r: json.loads(r.body)["i"])
    assert first.properties["message_id"] == "p0"
    assert first.properties["subject"] == "ev"
    assert first.application_properties == {"i": "0"}
    assert first.address == "in"
    assert first.received_at is not None


def test_a_batch_read_on_two_partitions_reads_on_two_receivers(
        spark: Any, tmp_path: Path) -> None:
    # A receiver that has read its share leaves the messages the router had
    # queued for it: redeliveryLimit gives them to the other receiver when it
    # is attached; when Spark runs the tasks one after the other, they go back
    # to the producer as released (docs/spark.md#reading-a-batch).
    router = start(tmp_path, router_conf(
        "address {\n    prefix: in2\n    distribution: balanced\n    redeliveryLimit: 1\n}\n"),
        "hop")
    try:
        producer = Producer(router.url, "in2",
                            [Message(body=f"m{i}") for i in range(2000)]).start()
        df = (spark.read.format("amqp").option("url", router.url).option("address", "in2")
              .option("maxMessages", "2000").option("partitions", "2")
              .option("idleTimeout", "2").load())
        assert df.rdd.getNumPartitions() == 2
        per_partition = df.rdd.glom().map(lambda rows: [bytes(r.body) for r in rows]).collect()
        outcomes = producer.wait()
        assert set(outcomes) <= {Delivery.ACCEPTED, Delivery.RELEASED}
        read = [body for part in per_partition for body in part]
        assert len(read) == len(set(read)) == outcomes.count(Delivery.ACCEPTED), \
            "each accepted message read once, nothing else read"
        assert all(0 < len(part) <= 1000 for part in per_partition), \
            "each receiver reads, at most its share of maxMessages"
    finally:
        assert router.stop() == 0


def test_a_batch_read_ends_after_idle_timeout(spark: Any, router: Hop) -> None:
    producer = Producer(router.url, "in", [Message(body=f"m{i}") for i in range(30)]).start()
    df = (spark.read.format("amqp").option("url", router.url).option("address", "in")
          .option("maxMessages", "1000").option("idleTimeout", "2").load())
    bodies = sorted(bytes(r.body).decode() for r in df.collect())
    assert bodies == sorted(f"m{i}" for i in range(30))
    assert producer.wait() == [Delivery.ACCEPTED] * 30


@pytest.mark.parametrize(("options", "expected"), [
    ({"url": "http://127.0.0.1:5672", "address": "x"},
     "option 'url': 'http://127.0.0.1:5672' must start with amqp:// or amqps://"),
    ({"url": "amqp://127.0.0.1:5672"}, "option 'address' is required"),
    ({"url": "amqp://127.0.0.1:5672", "address": "x", "colour": "blue"},
     "unknown option(s) 'colour'"),
])
def test_bad_options_get_a_clear_error(spark: Any, options: dict[str, str],
                                       expected: str) -> None:
    df = spark.range(1).selectExpr("cast(id as string) as body")
    with pytest.raises(Exception) as err:
        w = df.write.format("amqp")
        for key, value in options.items():
            w = w.option(key, value)
        w.mode("append").save()
    assert expected in str(err.value)
    with pytest.raises(Exception) as err:
        r = spark.read.format("amqp")
        for key, value in options.items():
            r = r.option(key, value)
        r.load().collect()
    assert expected in str(err.value)


def test_columns_that_are_not_message_fields_are_refused(spark: Any) -> None:
    df = spark.range(1).selectExpr("cast(id as string) as body", "id as colour")
    with pytest.raises(Exception) as err:
        write(df, "amqp://127.0.0.1:5672")
    assert "'colour' are not message fields" in str(err.value)


def test_an_unreachable_router_is_named(spark: Any) -> None:
    url = f"amqp://127.0.0.1:{free_port()}"
    with pytest.raises(Exception) as err:
        write(spark.range(3).selectExpr("cast(id as string) as body").coalesce(1), url)
    assert f"cannot reach the router at {url}" in str(err.value)
    with pytest.raises(Exception) as err:
        spark.read.format("amqp").option("url", url).option("address", "x").load().collect()
    assert f"cannot reach the router at {url}" in str(err.value)


def test_an_empty_partition_sends_nothing_and_needs_no_consumer(
        spark: Any, router: Hop) -> None:
    """The first batch of a stream is often empty; no credit is waited for."""
    empty = spark.range(0).selectExpr("cast(id as string) as body").repartition(2)
    write(empty, router.url, address="nobody", sendTimeout="2")
    with pytest.raises(Exception) as err:  # one row does wait for a consumer
        write(spark.range(1).selectExpr("cast(id as string) as body").coalesce(1),
              router.url, address="nobody", sendTimeout="2")
    assert "no credit from the router for 2 s on address 'nobody'" in str(err.value)
