"""Data sources that only hand rows to Spark and take them from it, for
``python -m bench.spark --parts``: what Spark's Python data source path
costs with nothing else, as rows and as Arrow record batches.  In a module
of their own so that Spark's Python workers import them by name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

BODY = b"x" * 100
BATCH_ROWS = 5000


class _Taken(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class _RowsWriter(DataSourceWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        rows = 0
        for row in iterator:
            row.asDict(recursive=False)
            rows += 1
        return _Taken(rows)


class _ArrowWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        rows = 0
        for batch in iterator:
            rows += len(batch.column("body").to_pylist())
        return _Taken(rows)


class _Reader(DataSourceReader):
    def __init__(self, rows: int, arrow: bool) -> None:
        self.rows = rows
        self.arrow = arrow

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not self.arrow:
            for _ in range(self.rows):
                yield (BODY,)
            return
        schema = pa.schema([("body", pa.binary())])
        for start in range(0, self.rows, BATCH_ROWS):
            count = min(BATCH_ROWS, self.rows - start)
            yield pa.RecordBatch.from_pydict({"body": [BODY] * count}, schema=schema)


class NoopRows(DataSource):
    """Rows one by one."""

    @classmethod
    def name(cls) -> str:
        return "hop-noop-rows"

    def schema(self) -> str:
        return "body binary"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _RowsWriter()

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(int(self.options.get("rows", "1000")), arrow=False)


class NoopArrow(NoopRows):
    """Arrow record batches."""

    @classmethod
    def name(cls) -> str:
        return "hop-noop-arrow"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _ArrowWriter()

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(int(self.options.get("rows", "1000")), arrow=True)


def register(spark: Any) -> None:
    spark.dataSource.register(NoopRows)
    spark.dataSource.register(NoopArrow)
