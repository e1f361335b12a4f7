"""The one place that touches python-qpid-proton's internal C binding.

The data plane calls ``cproton_ffi.lib`` on raw pointers (see
docs/performance.md#the-python-data-plane: the wrapper classes cost 7-20x on the
per-message path).  That module is internal to the binding, so pyproject
pins the binding's version; everything version-sensitive is named here.
"""

from __future__ import annotations

from typing import Any

import cproton_ffi
from cproton_ffi import ffi, lib
from proton._data import dat2obj

__all__ = ["LIBRARY_PATH", "NULL", "decoded", "ffi", "lib", "pn_bytes", "set_condition",
           "to_str"]

#: The file of the binding's library, which also exports the functions it
#: does not declare (proton's SASL plug-in interface:
#: ``router.adapter.connections.saslplugin``).
LIBRARY_PATH: str = cproton_ffi.__file__ or ""

NULL: Any = ffi.NULL


def to_str(ptr: Any) -> str | None:
    """A C string returned by proton, as ``str`` (``None`` for NULL)."""
    if ptr == NULL:
        return None
    return str(ffi.string(ptr).decode("utf8", "replace"))


def pn_bytes(data: bytes) -> Any:
    """A ``pn_bytes_t`` value for ``data`` (the caller keeps ``data`` alive)."""
    return ffi.new("pn_bytes_t*", (len(data), ffi.from_buffer(data)))[0]


def set_condition(cond: Any, name: str, description: str) -> None:
    """Name and describe an endpoint's local condition (a close or detach's error)."""
    lib.pn_condition_set_name(cond, name.encode())
    lib.pn_condition_set_description(cond, description.encode())


def decoded(data: Any) -> Any:
    """The value a ``pn_data_t`` holds (a remote OPEN's properties or
    capabilities), as Python objects; ``None`` when it is empty."""
    return dat2obj(data)
