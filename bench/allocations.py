"""Python's memory allocations, counted: each call to the object and memory
allocators (``PyObject_Malloc`` and ``PyMem_Malloc`` with their ``Calloc``
and ``Realloc``) while counting is on.

Python lets a program put hooks in front of its allocators
(``PyMem_SetAllocator``, "Customize Memory Allocators" in the C API
reference): the hooks here count each call and pass it to the allocator
that was there.  Only the two domains called with the GIL held are hooked,
so the counters need no lock; proton's own ``malloc`` calls are not
Python's and are not counted.  The module is compiled with cffi into
``bench/build`` on first use (a C compiler and Python's headers are
needed, as for the load generator).

    with counting() as counter:
        counter.on(); ...; counter.off()
        counter.allocations  # mallocs and callocs while on
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.build import BUILD

_CDEF = """
void hop_alloc_install(void);
void hop_alloc_remove(void);
void hop_alloc_set(int on);
unsigned long long hop_alloc_count(int which);
"""

_SOURCE = r"""
#include <Python.h>

/* The two domains hooked: PYMEM_DOMAIN_MEM and PYMEM_DOMAIN_OBJ, both
 * called with the GIL held. */
static PyMemAllocatorEx previous[2];
static const PyMemAllocatorDomain domains[2] = {PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ};
static int installed;
static int on;
static unsigned long long allocations, reallocations;

static void *counted_malloc(void *ctx, size_t size)
{
    PyMemAllocatorEx *next = ctx;
    if (on) allocations++;
    return next->malloc(next->ctx, size);
}

static void *counted_calloc(void *ctx, size_t count, size_t size)
{
    PyMemAllocatorEx *next = ctx;
    if (on) allocations++;
    return next->calloc(next->ctx, count, size);
}

static void *counted_realloc(void *ctx, void *ptr, size_t size)
{
    PyMemAllocatorEx *next = ctx;
    if (on) reallocations++;
    return next->realloc(next->ctx, ptr, size);
}

static void passed_free(void *ctx, void *ptr)
{
    PyMemAllocatorEx *next = ctx;
    next->free(next->ctx, ptr);
}

void hop_alloc_install(void)
{
    if (installed) return;
    allocations = reallocations = 0;
    for (int i = 0; i < 2; i++) {
        PyMem_GetAllocator(domains[i], &previous[i]);
        PyMemAllocatorEx hook = {&previous[i], counted_malloc, counted_calloc,
                                 counted_realloc, passed_free};
        PyMem_SetAllocator(domains[i], &hook);
    }
    installed = 1;
}

void hop_alloc_remove(void)
{
    if (!installed) return;
    for (int i = 0; i < 2; i++)
        PyMem_SetAllocator(domains[i], &previous[i]);
    installed = 0;
    on = 0;
}

void hop_alloc_set(int value) { on = value; }

unsigned long long hop_alloc_count(int which)
{
    return which ? reallocations : allocations;
}
"""


#: The module's name holds a digest of its C source, so a changed source is
#: built again rather than an old build loaded.
_NAME = "_hop_allocations_" + hashlib.sha256((_CDEF + _SOURCE).encode()).hexdigest()[:12]


def _load() -> Any:
    """The compiled module (built into ``bench/build`` when absent)."""
    BUILD.mkdir(exist_ok=True)
    built = sorted(BUILD.glob(f"{_NAME}.*.so"))
    if not built:
        from cffi import FFI

        ffi = FFI()
        ffi.cdef(_CDEF)
        # The allocator hooks are not part of the limited API.
        ffi.set_source(_NAME, _SOURCE, py_limited_api=False,
                       define_macros=[("_CFFI_NO_LIMITED_API", None)])
        ffi.compile(tmpdir=str(BUILD), verbose=False)
        built = sorted(BUILD.glob(f"{_NAME}.*.so"))
    spec = importlib.util.spec_from_file_location(_NAME, built[0])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[_NAME] = module
    return module


class Counter:
    """Switches the count on and off; reads what was counted while on."""

    def __init__(self, lib: Any) -> None:
        self._lib = lib

    def on(self) -> None:
        self._lib.hop_alloc_set(1)

    def off(self) -> None:
        self._lib.hop_alloc_set(0)

    @property
    def allocations(self) -> int:
        """Calls to malloc and calloc of the two domains while on."""
        return int(self._lib.hop_alloc_count(0))

    @property
    def reallocations(self) -> int:
        return int(self._lib.hop_alloc_count(1))


@contextmanager
def counting() -> Iterator[Counter]:
    """The hooks installed for the duration, the counts from 0 (counting off
    until ``on``)."""
    lib = _load().lib
    lib.hop_alloc_install()
    try:
        yield Counter(lib)
    finally:
        lib.hop_alloc_remove()
