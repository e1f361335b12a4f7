"""Build script of the accelerator (``router/adapter/forwarding/accel.c``), compiled by
cffi into ``router.adapter.forwarding._accel`` with the mypyc modules (``setup.py``;
``HOP_PURE=1`` builds neither).  ``router.adapter.forwarding.accel`` is what the router
imports: the compiled functions when they were built, the same in Python
otherwise."""

from __future__ import annotations

from pathlib import Path

from cffi import FFI

CDEF = """
int hop_accel_init(void **functions, int n, int delivery, int transport, int link_flow,
                   uint64_t skipped);
int hop_next_event(void *collector, int pop, void **ptrs, int64_t *ints);
ssize_t hop_recv_whole(void *link, char *buffer, size_t n);
void *hop_send_copy(void *link, uint64_t tag, const char *data, size_t n);
void hop_update_settle(void *delivery, uint64_t state);
void *hop_relay_whole(void *d, void *link, void *partner, char *buffer, size_t n,
                      size_t max_tag);
void hop_pass_outcome(void *d, void *od, uint64_t state);
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source("router.adapter.forwarding._accel",
                      (Path(__file__).parent / "accel.c").read_text(),
                      extra_compile_args=["-O2"])

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
