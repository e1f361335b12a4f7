"""Hop: an AMQP 1.0 message router.

``router.core`` is the pure routing core, ``router.adapter`` drives proton,
``router.cli`` holds the commands.
"""

__version__ = "0.1.0"

# The adapter logs and swallows unexpected exceptions per proton event so one
# bad event cannot stop the router; tests set this to re-raise them instead.
RAISE_INTERNAL_ERRORS = False

__all__ = ["RAISE_INTERNAL_ERRORS", "__version__"]
