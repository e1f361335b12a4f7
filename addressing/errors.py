"""The addressing package's one exception type."""


class AddressError(ValueError):
    """An address, prefix, pattern or address spec is invalid."""
