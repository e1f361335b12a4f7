"""A stream reader that dies after Spark committed its first batch, before accepting it.

Usage: python -m tests.spark.die_after_commit URL ADDRESS CHECKPOINT ROWS

Spark kills its source process when a query stops; this is that kill landing
at the worst moment. The reader plans one batch of at most ROWS messages,
prints their message-ids as a JSON list, is told (as Spark tells it) that
the batch is committed, and exits with status 3 at the point where it would
accept the batch's messages at the router.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from pyspark.sql.streaming.datasource import ReadMaxRows

from spark.client import Inbox
from spark.options import read_settings
from spark.source import StreamReader


def batch_ids(reader: StreamReader, start: dict[str, int], end: dict[str, int]) -> list[str]:
    """The message-ids of the rows Spark would read for the batch [start, end)
    (each partition's rows come as Arrow record batches)."""
    return [dict(properties)["message_id"] for part in reader.partitions(start, end)
            for batch in reader.read(part)
            for properties in batch.column("properties").to_pylist()]


def main(url: str, address: str, checkpoint: str, rows: str) -> None:
    reader = StreamReader(read_settings(
        {"url": url, "address": address, "checkpointLocation": checkpoint}))
    limit = ReadMaxRows(int(rows))
    start = reader.initialOffset()
    end = start
    deadline = time.monotonic() + 60
    while end == start:
        if time.monotonic() > deadline:
            raise SystemExit("no message arrived within 60 s")
        time.sleep(0.2)
        end = reader.latestOffset(start, limit)
    print(json.dumps(batch_ids(reader, start, end)), flush=True)

    real = Inbox.settle

    def settle(self: Inbox, accept: list[Any], release: list[Any] | None = None, *,
               replenish: bool = True, wait: bool = True) -> None:
        if accept:
            os._exit(3)
        real(self, accept, release, replenish=replenish, wait=wait)

    Inbox.settle = settle  # type: ignore[method-assign]
    reader.latestOffset(end, limit)  # Spark's call after committing [start, end)
    raise SystemExit("the committed batch was not accepted")


if __name__ == "__main__":
    main(*sys.argv[1:5])
