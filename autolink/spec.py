"""The typed spec of a configured auto-link (qdrouterd ``router.config.autoLink``)."""

from __future__ import annotations

import attrs

from addressing import Direction
from addressing.spec import MAX_PHASE


class AutoLinkError(ValueError):
    """An auto-link spec is invalid."""


@attrs.frozen(kw_only=True)
class AutoLinkSpec:
    """A link the router itself attaches to a route-container connection."""

    name: str | None = None
    address: str
    direction: Direction
    phase: int | None = None
    container_id: str | None = None
    connection: str | None = None
    external_address: str | None = None
    fallback: bool = False

    def __attrs_post_init__(self) -> None:
        if self.phase is not None and not 0 <= self.phase <= MAX_PHASE:
            raise AutoLinkError(
                f"autoLink phase must be between 0 and {MAX_PHASE}, got {self.phase}"
            )
        if self.container_id is not None and self.connection is not None:
            raise AutoLinkError(
                "Both connection and containerId cannot be specified: give 'connection' or "
                "'containerId', not both"
            )

    @property
    def effective_phase(self) -> int:
        """The phase the link binds to: ``out`` 0, ``in`` 1 (0 for a fallback)."""
        if self.phase is not None:
            return self.phase
        if self.direction is Direction.OUT or self.fallback:
            return 0
        return 1
