"""``python -m bench.spark --parts``: each part measured alone says a figure
for each thing it measures (docs/spark.md#where-the-time-goes)."""

from __future__ import annotations

from typing import Any

from bench.spark import _codec_us, _spark_alone


def test_the_conversions_are_timed_a_row_each() -> None:
    figures = _codec_us(200)
    assert set(figures) == {"row to message (message_of)", "message to bytes (proton encode)",
                            "row to bytes (encoded_of, as the writer does)",
                            "bytes to row (row_of)"}
    assert all(us > 0 for us in figures.values())


def test_spark_alone_hands_every_row_over_as_rows_and_as_arrow_batches(spark: Any) -> None:
    figures = _spark_alone(spark, 300)
    assert set(figures) == {f"Spark {way} alone, {kind}" for way in ("write", "read")
                            for kind in ("rows", "Arrow batches")}
    assert all(rate > 0 for rate in figures.values())
    # The Arrow reader's batches hold every row.
    assert spark.read.format("hop-noop-arrow").option("rows", "12345").load().count() == 12345
    assert spark.read.format("hop-noop-rows").option("rows", "7").load().count() == 7
