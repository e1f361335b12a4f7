"""The typed spec of a configured link route (qdrouterd ``router.config.linkRoute``)."""

from __future__ import annotations

import attrs

from addressing import AddressError, Direction, normalize_pattern, prefix_pattern


class LinkRouteError(ValueError):
    """A link-route spec is invalid."""


@attrs.frozen(kw_only=True)
class LinkRouteSpec:
    """A link route: attaches matching ``prefix``/``pattern`` in ``direction``
    are tunnelled to the container named by ``container_id`` or ``connection``."""

    name: str | None = None
    prefix: str | None = None
    pattern: str | None = None
    direction: Direction
    container_id: str | None = None
    connection: str | None = None
    add_external_prefix: str | None = None
    del_external_prefix: str | None = None

    def __attrs_post_init__(self) -> None:
        if (self.prefix is None) == (self.pattern is None):
            if self.prefix is None:
                raise LinkRouteError("either a 'prefix' or a 'pattern' attribute must be provided")
            raise LinkRouteError("cannot specify both a 'prefix' and a 'pattern' attribute")
        if self.container_id is not None and self.connection is not None:
            raise LinkRouteError(
                "Both connection and containerId cannot be specified: give 'connection' or "
                "'containerId', not both"
            )
        try:
            if self.prefix is not None:
                prefix_pattern(self.prefix)
            else:
                normalize_pattern(self.pattern or "")
        except AddressError as error:
            raise LinkRouteError(str(error)) from None
