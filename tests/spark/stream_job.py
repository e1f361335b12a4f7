"""A streaming query run in a process of its own, for the crash test.

Usage: python -m tests.spark.stream_job URL ADDRESS CHECKPOINT OUT [ACCEPT]
It reads ADDRESS with the amqp data source and writes each message's id and
body as JSON under OUT, until it is killed.
"""

from __future__ import annotations

import sys
import time


def main(url: str, address: str, checkpoint: str, out: str, accept: str = "commit") -> None:
    from spark import session

    spark = session("hop-crash-test")
    spark.sparkContext.setLogLevel("ERROR")
    events = (spark.readStream.format("amqp").option("url", url).option("address", address)
              .option("maxMessagesPerTrigger", "100").option("checkpointLocation", checkpoint)
              .option("accept", accept).load())
    query = (events.selectExpr("properties['message_id'] as id", "cast(body as string) as body")
             .writeStream.format("json").option("path", out)
             .option("checkpointLocation", checkpoint)
             .trigger(processingTime="200 milliseconds").start())
    print("started", flush=True)
    while query.isActive:
        time.sleep(0.5)
    raise SystemExit(f"the query stopped: {query.exception()}")


if __name__ == "__main__":
    main(*sys.argv[1:6])
