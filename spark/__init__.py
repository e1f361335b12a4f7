"""Hop's PySpark data source: router addresses as Spark tables and streams.

One line makes it available in a session::

    from spark import AmqpDataSource; spark.dataSource.register(AmqpDataSource)

or build a session with everything set up: ``from spark import session;
spark = session()``. Install with ``pip install '.[spark]'``.
"""

from __future__ import annotations

from typing import Any

from spark.errors import (
    AmqpConnectError,
    AmqpDeliveryError,
    AmqpOptionError,
    AmqpSchemaError,
    AmqpSparkError,
)
from spark.session import register, session

__all__ = [
    "AmqpConnectError",
    "AmqpDataSource",
    "AmqpDeliveryError",
    "AmqpOptionError",
    "AmqpSchemaError",
    "AmqpSparkError",
    "register",
    "session",
]


def __getattr__(name: str) -> Any:
    # pyspark is loaded only when the data source itself is wanted.
    if name == "AmqpDataSource":
        from spark.source import AmqpDataSource

        return AmqpDataSource
    raise AttributeError(name)
