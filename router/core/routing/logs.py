"""A logger adapter that prefixes each line with the router id.

Owns ``RouterLogger``. Must not configure handlers or levels (only
``router.cli`` does); simulations run many routers in one process and need
the prefix to tell their lines apart.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

__all__ = ["RouterLogger"]


class RouterLogger(logging.LoggerAdapter[logging.Logger]):
    """Prefix messages with ``[<router id>] ``; arguments stay lazy."""

    def __init__(self, logger: logging.Logger, router_id: str) -> None:
        super().__init__(logger, {"router_id": router_id})
        self._prefix = f"[{router_id}] "

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        return self._prefix + str(msg), kwargs
