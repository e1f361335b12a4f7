"""Hop's command-line management tools: ``hopstat`` (as qdstat) and ``hopmanage`` (as qdmanage).

Clients of a running router over AMQP management, never part of it: they
must not import ``router.adapter`` or ``router.cli``.  ``client`` holds the
blocking request/response exchange both commands share.
"""

from router.tools.client import (
    DEFAULT_TIMEOUT_S,
    DEFAULT_URL,
    MANAGEMENT_TYPE,
    PREFIX,
    ConnectionFailed,
    ManagementClient,
    Response,
    StatusError,
    ToolError,
    management_address,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_URL",
    "MANAGEMENT_TYPE",
    "PREFIX",
    "ConnectionFailed",
    "ManagementClient",
    "Response",
    "StatusError",
    "ToolError",
    "management_address",
]
