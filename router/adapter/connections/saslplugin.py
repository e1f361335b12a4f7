"""proton's SASL plug-in interface, for SASL the router relays itself.

Owns the binding to ``proton/sasl_plugin.h``: the ``pnx_sasl_*`` functions
that python-qpid-proton's library exports but does not declare, declared
here with cffi and called on the library already loaded; one SASL
implementation whose entry points are Python callbacks; and the calls that
make a transport post its next SASL frame.  Each transport the
implementation is set on (``install``) has a context object
(``SaslContext``) the callbacks hand what proton tells; what to do with it
is the context's (``router.adapter.connections.authservice``).  A
callback that raises is logged, never let into proton.

Sides: on a *server* transport the router authenticates a peer (proton
posts the mechanisms, the challenges and the outcome); on a *client*
transport the router is authenticated (proton posts the init and the
responses).
"""

from __future__ import annotations

import logging
from typing import Any, Final, Protocol

from cffi import FFI

from router.adapter.pn import LIBRARY_PATH
from router.adapter.pn import ffi as _binding_ffi
from router.adapter.pn import lib as _binding_lib

log = logging.getLogger(__name__)

_CDEF = """
typedef struct pn_transport_t pn_transport_t;
typedef struct { size_t size; const char *start; } pn_bytes_t;
typedef struct pnx_sasl_implementation {
    void (*free)(pn_transport_t *transport);
    const char *(*list_mechanisms)(pn_transport_t *transport);
    bool (*init_server)(pn_transport_t *transport);
    bool (*init_client)(pn_transport_t *transport);
    void (*prepare_write)(pn_transport_t *transport);
    void (*process_init)(pn_transport_t *transport, const char *mechanism,
                         const pn_bytes_t *recv);
    void (*process_response)(pn_transport_t *transport, const pn_bytes_t *recv);
    bool (*process_mechanisms)(pn_transport_t *transport, const char *mechs);
    void (*process_challenge)(pn_transport_t *transport, const pn_bytes_t *recv);
    void (*process_outcome)(pn_transport_t *transport, const pn_bytes_t *recv);
    bool (*can_encrypt)(pn_transport_t *transport);
    void *max_encrypt_size;
    void *encode;
    void *decode;
} pnx_sasl_implementation;
void *pnx_sasl_get_context(pn_transport_t *transport);
bool pnx_sasl_is_client(pn_transport_t *transport);
bool pnx_sasl_is_transport_encrypted(pn_transport_t *transport);
bool pnx_sasl_get_allow_insecure_mechanisms(pn_transport_t *transport);
void pnx_sasl_set_bytes_out(pn_transport_t *transport, pn_bytes_t bytes);
void pnx_sasl_set_desired_state(pn_transport_t *transport, int desired_state);
void pnx_sasl_set_selected_mechanism(pn_transport_t *transport, const char *mechanism);
void pnx_sasl_set_local_hostname(pn_transport_t *transport, const char *fqdn);
void pnx_sasl_set_succeeded(pn_transport_t *transport, const char *username,
                            const char *authzid);
void pnx_sasl_set_failed(pn_transport_t *transport);
void pnx_sasl_set_implementation(pn_transport_t *transport,
                                 const pnx_sasl_implementation *impl, void *context);
"""
# enum pnx_sasl_state, in proton/sasl_plugin.h's order.
_POSTED_INIT: Final = 1
_POSTED_MECHANISMS: Final = 2
_POSTED_RESPONSE: Final = 3
_POSTED_CHALLENGE: Final = 4
_POSTED_OUTCOME: Final = 7
_ERROR: Final = 8
_PN_SASL_OK: Final = 0

_ffi = FFI()
_ffi.cdef(_CDEF)
# The binding's library: the proton that the router's transports are made by.
_lib: Any = _ffi.dlopen(LIBRARY_PATH)

#: What proton's SASL layer reads while it posts a frame: bytes that must
#: live as long as the frame is being made (keep the object).
Chars = Any


class SaslContext(Protocol):
    """What a transport's SASL tells its context (each call from inside
    proton's processing of that transport: nothing here may free it)."""

    def sasl_freed(self, server: bool) -> None:
        """The transport is being freed."""

    def sasl_server_started(self) -> None:
        """A server transport begins SASL."""

    def sasl_mechanisms(self) -> Chars | None:
        """The mechanisms a server transport offers, space-separated (None: not known yet)."""

    def sasl_prepare(self, transport: Any, server: bool) -> None:
        """The transport is about to write: post what is due (``post_*``)."""

    def sasl_init(self, mechanism: bytes, response: bytes) -> None:
        """A server transport's peer chose a mechanism and sent its first response."""

    def sasl_response(self, response: bytes) -> None:
        """A server transport's peer answered a challenge."""

    def sasl_offered(self, mechanisms: str) -> bool:
        """A client transport's peer offers these mechanisms; False fails."""

    def sasl_challenge(self, challenge: bytes) -> None:
        """A client transport's peer challenges."""

    def sasl_outcome(self, ok: bool) -> None:
        """A client transport's peer gave its outcome."""


def _context(t: Any) -> SaslContext | None:
    handle = _lib.pnx_sasl_get_context(t)
    if handle == _ffi.NULL:
        return None
    context: SaslContext = _ffi.from_handle(handle)
    return context


def _bytes(recv: Any) -> bytes:
    if recv == _ffi.NULL or recv.start == _ffi.NULL:
        return b""
    return bytes(_ffi.buffer(recv.start, recv.size))


def _c_string(ptr: Any) -> bytes:
    value = _ffi.string(ptr)
    return value if isinstance(value, bytes) else value.encode()


def _onerror(exception: Exception, value: Any, tb: Any) -> None:
    # cffi hands the exception's type, value and traceback.
    log.error("internal error in a SASL relay", exc_info=(exception, value, tb))  # type: ignore[arg-type]


@_ffi.callback("void(pn_transport_t *)", onerror=_onerror)
def _free(t: Any) -> None:
    context = _context(t)
    if context is not None:
        context.sasl_freed(server=not _lib.pnx_sasl_is_client(t))


@_ffi.callback("const char *(pn_transport_t *)", onerror=_onerror)
def _list_mechanisms(t: Any) -> Any:
    context = _context(t)
    mechanisms = None if context is None else context.sasl_mechanisms()
    return _ffi.NULL if mechanisms is None else mechanisms


@_ffi.callback("bool(pn_transport_t *)", onerror=_onerror)
def _init_server(t: Any) -> bool:
    context = _context(t)
    if context is None:
        return False
    context.sasl_server_started()
    return True


@_ffi.callback("bool(pn_transport_t *)", onerror=_onerror)
def _init_client(t: Any) -> bool:
    return _context(t) is not None


@_ffi.callback("void(pn_transport_t *)", onerror=_onerror)
def _prepare_write(t: Any) -> None:
    context = _context(t)
    if context is not None:
        context.sasl_prepare(t, server=not _lib.pnx_sasl_is_client(t))


@_ffi.callback("void(pn_transport_t *, const char *, const pn_bytes_t *)", onerror=_onerror)
def _process_init(t: Any, mechanism: Any, recv: Any) -> None:
    context = _context(t)
    if context is None:
        _lib.pnx_sasl_set_desired_state(t, _ERROR)
        return
    context.sasl_init(_c_string(mechanism), _bytes(recv))


@_ffi.callback("void(pn_transport_t *, const pn_bytes_t *)", onerror=_onerror)
def _process_response(t: Any, recv: Any) -> None:
    context = _context(t)
    if context is None:
        _lib.pnx_sasl_set_desired_state(t, _ERROR)
        return
    context.sasl_response(_bytes(recv))


@_ffi.callback("bool(pn_transport_t *, const char *)", onerror=_onerror)
def _process_mechanisms(t: Any, mechanisms: Any) -> bool:
    context = _context(t)
    return context is not None and context.sasl_offered(
        _c_string(mechanisms).decode("utf8", "replace"))


@_ffi.callback("void(pn_transport_t *, const pn_bytes_t *)", onerror=_onerror)
def _process_challenge(t: Any, recv: Any) -> None:
    context = _context(t)
    if context is not None:
        context.sasl_challenge(_bytes(recv))


@_ffi.callback("void(pn_transport_t *, const pn_bytes_t *)", onerror=_onerror)
def _process_outcome(t: Any, recv: Any) -> None:
    context = _context(t)
    if context is not None:
        sasl = _binding_lib.pn_sasl(_binding_ffi.cast("pn_transport_t *",
                                                      int(_ffi.cast("uintptr_t", t))))
        context.sasl_outcome(_binding_lib.pn_sasl_outcome(sasl) == _PN_SASL_OK)


@_ffi.callback("bool(pn_transport_t *)", onerror=_onerror)
def _can_encrypt(t: Any) -> bool:
    return False  # no SASL security layer: TLS is the router's


# Encoding and decoding are asked for only when can_encrypt says yes.
_IMPL: Final = _ffi.new("pnx_sasl_implementation *", {
    "free": _free, "list_mechanisms": _list_mechanisms, "init_server": _init_server,
    "init_client": _init_client, "prepare_write": _prepare_write,
    "process_init": _process_init, "process_response": _process_response,
    "process_mechanisms": _process_mechanisms, "process_challenge": _process_challenge,
    "process_outcome": _process_outcome, "can_encrypt": _can_encrypt,
})


def _own(tptr: Any) -> Any:
    """The binding's ``pn_transport_t *`` as this module's."""
    return _ffi.cast("pn_transport_t *", int(_binding_ffi.cast("uintptr_t", tptr)))


def new_handle(context: SaslContext) -> Any:
    """A handle for ``context`` (keep it as long as a transport uses it)."""
    return _ffi.new_handle(context)


def install(tptr: Any, handle: Any) -> None:
    """Make a transport's SASL this implementation, with the context of
    ``handle``; before the transport has read or written anything."""
    _lib.pnx_sasl_set_implementation(_own(tptr), _IMPL, handle)


def chars(data: bytes) -> Chars:
    """``data`` as C characters proton may read (NUL-terminated; ``size``
    counts the bytes given)."""
    return _ffi.new("char[]", data)


def _bytes_out(t: Any, data: Chars | None, size: int) -> None:
    value = _ffi.new("pn_bytes_t *", (size, data if data is not None and size else _ffi.NULL))
    _lib.pnx_sasl_set_bytes_out(t, value[0])


def encrypted(tptr: Any) -> bool:
    """Whether the transport (the binding's pointer) runs over TLS."""
    return bool(_lib.pnx_sasl_is_transport_encrypted(_own(tptr)))


def insecure_allowed(tptr: Any) -> bool:
    """Whether the transport may offer mechanisms that send passwords in clear."""
    return bool(_lib.pnx_sasl_get_allow_insecure_mechanisms(_own(tptr)))


def post_mechanisms(t: Any) -> None:
    """A server transport posts its mechanisms (``SaslContext.sasl_mechanisms``)."""
    _lib.pnx_sasl_set_desired_state(t, _POSTED_MECHANISMS)


def post_challenge(t: Any, data: Chars | None, size: int) -> None:
    _bytes_out(t, data, size)
    _lib.pnx_sasl_set_desired_state(t, _POSTED_CHALLENGE)


def post_outcome(t: Any, user: Chars | None) -> None:
    """A server transport posts its outcome: authenticated as ``user`` (kept
    alive as long as the transport), or failed for None."""
    if user is not None:
        _lib.pnx_sasl_set_succeeded(t, user, _ffi.NULL)
    else:
        _lib.pnx_sasl_set_failed(t)
    _lib.pnx_sasl_set_desired_state(t, _POSTED_OUTCOME)


def post_init(t: Any, mechanism: bytes, hostname: str | None, data: Chars | None,
              size: int) -> None:
    """A client transport posts its ``sasl-init``."""
    _lib.pnx_sasl_set_selected_mechanism(t, mechanism)
    if hostname:
        _lib.pnx_sasl_set_local_hostname(t, hostname.encode())
    _bytes_out(t, data, size)
    _lib.pnx_sasl_set_desired_state(t, _POSTED_INIT)


def post_response(t: Any, data: Chars | None, size: int) -> None:
    _bytes_out(t, data, size)
    _lib.pnx_sasl_set_desired_state(t, _POSTED_RESPONSE)


__all__ = [
    "Chars",
    "SaslContext",
    "chars",
    "encrypted",
    "insecure_allowed",
    "install",
    "new_handle",
    "post_challenge",
    "post_init",
    "post_mechanisms",
    "post_outcome",
    "post_response",
]
