"""The errors of the ``amqp`` data source."""

from __future__ import annotations


class AmqpSparkError(Exception):
    """Base of every error the data source raises."""


class AmqpOptionError(AmqpSparkError, ValueError):
    """An option is missing or malformed."""


class AmqpSchemaError(AmqpSparkError, ValueError):
    """A DataFrame to write has a column that is not a message field, or a bad type."""


class AmqpConnectError(AmqpSparkError, ConnectionError):
    """The router could not be reached, or it refused the link."""


class AmqpDeliveryError(AmqpSparkError):
    """A message was not accepted (rejected, released, modified), or the link was lost.

    It fails the Spark task, so that Spark runs the task again.
    """
