"""Hop: an AMQP 1.0 message router.

``router.core`` is the pure routing core, ``router.adapter`` drives proton,
``router.cli`` holds the commands.  For applications: ``router.peer`` embeds
a router joined to a peer group (``router.embedded``), ``router.discover``
finds the routers of a group for a client (``router.client_discovery``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from router.client_discovery import discover
    from router.embedded import peer

__version__ = "0.1.0"

__all__ = ["__version__", "discover", "installed_build", "peer"]


def installed_build() -> str:
    """Which build is installed: ``"compiled"`` when the per-message modules
    run as the C extensions mypyc made of them (setup.py), ``"pure"`` when
    they run as Python (``HOP_PURE=1``, or no C compiler at install time)."""
    from importlib.machinery import EXTENSION_SUFFIXES
    from importlib.util import find_spec

    spec = find_spec("router.core.router")
    origin = spec.origin if spec is not None else None
    return "compiled" if origin and origin.endswith(tuple(EXTENSION_SUFFIXES)) else "pure"


def __getattr__(name: str) -> object:
    # Imported on first use: ``import router.core`` must not load the adapter.
    if name == "peer":
        from router.embedded import peer
        return peer
    if name == "discover":
        from router.client_discovery import discover
        return discover
    raise AttributeError(f"module 'router' has no attribute {name!r}")
