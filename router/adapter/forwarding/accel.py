"""Several proton calls of the per-message path in one call
(docs/performance.md#the-accelerator).

``router/adapter/forwarding/accel.c``, compiled by cffi with the mypyc modules
(``setup.py``), makes the calls of one step at once, without going back to
Python between them: finding the next event worth dispatching and what the
dispatcher will ask about it, reading a complete message off its link,
putting a copy on a link, relaying a link-routed transfer or outcome.
Without a compiled build the same functions are the Python below; both
behave alike (tests/unit/adapter/test_accel.py).

``next_event`` fills two arrays the caller made with ``event_arrays``:

- ``ptrs``: ``[event, delivery, link]``; the delivery for a delivery event,
  the link for a delivery or link-flow event.
- ``ints``: for a delivery event ``[pending bytes, flags, remote state]``,
  flags being ``PARTIAL``, ``SETTLED``, ``ABORTED`` (tested only when
  settled: proton marks an aborted transfer settled) and ``STATE`` (the
  peer gave the delivery a state: a consumer's disposition, or a
  producer's transfer that carries one).

PN_TRANSPORT events are consumed without being returned: they only say
that a connection has output, which the handlers record themselves.  So
are the events of an endpoint's life that carry nothing from the peer
(``SKIPPED``: INIT, BOUND, UNBOUND and FINAL), which the router has nothing
to do for; a churning client costs eight of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from router.adapter.pn import NULL, ffi, lib

PARTIAL: Final = 1
SETTLED: Final = 2
ABORTED: Final = 4
STATE: Final = 8

# The order hop_accel_init takes them in.
_FUNCTIONS = (
    "pn_collector_peek", "pn_collector_pop", "pn_event_type", "pn_event_delivery",
    "pn_event_link", "pn_delivery_link", "pn_delivery_pending", "pn_delivery_partial",
    "pn_delivery_settled", "pn_delivery_aborted", "pn_delivery_remote_state",
    "pn_link_recv", "pn_link_advance", "pn_delivery", "pn_link_send",
    "pn_delivery_update", "pn_delivery_settle", "pn_delivery_tag",
)

_PN_DELIVERY: Final = lib.PN_DELIVERY
_PN_TRANSPORT: Final = lib.PN_TRANSPORT
_PN_LINK_FLOW: Final = lib.PN_LINK_FLOW
#: Event types consumed without being returned, besides PN_TRANSPORT.
SKIPPED: Final = frozenset((
    lib.PN_CONNECTION_INIT, lib.PN_SESSION_INIT, lib.PN_LINK_INIT, lib.PN_CONNECTION_BOUND,
    lib.PN_CONNECTION_UNBOUND, lib.PN_CONNECTION_FINAL, lib.PN_SESSION_FINAL,
    lib.PN_LINK_FINAL))
_SKIPPED_OR_TRANSPORT: Final = SKIPPED | {_PN_TRANSPORT}


def _compiled() -> Any:
    """The compiled module, initialised with proton's functions, or ``None``."""
    try:
        from router.adapter.forwarding import _accel  # type: ignore[attr-defined]
    except ImportError:
        return None
    functions = _accel.ffi.new("void *[]", [
        _accel.ffi.cast("void *", ffi.addressof(lib, name)) for name in _FUNCTIONS])
    skipped = sum(1 << t for t in SKIPPED)
    if _accel.lib.hop_accel_init(functions, len(_FUNCTIONS), _PN_DELIVERY, _PN_TRANSPORT,
                                 _PN_LINK_FLOW, skipped) != 0:
        raise ImportError("router.adapter.forwarding._accel does not match this proton binding")
    return _accel


_accel = _compiled()

#: Whether the compiled functions are in use.
COMPILED: Final = _accel is not None


# -- the same in Python ------------------------------------------------------------------

pn_collector_peek = lib.pn_collector_peek
pn_collector_pop = lib.pn_collector_pop
pn_event_type = lib.pn_event_type
pn_event_delivery = lib.pn_event_delivery
pn_delivery_link = lib.pn_delivery_link
pn_delivery_pending = lib.pn_delivery_pending
pn_delivery_partial = lib.pn_delivery_partial
pn_delivery_settled = lib.pn_delivery_settled
pn_delivery_aborted = lib.pn_delivery_aborted
pn_delivery_remote_state = lib.pn_delivery_remote_state
pn_link_recv = lib.pn_link_recv
pn_link_advance = lib.pn_link_advance
pn_delivery = lib.pn_delivery
pn_link_send = lib.pn_link_send
pn_delivery_update = lib.pn_delivery_update
pn_delivery_settle = lib.pn_delivery_settle
pn_event_link = lib.pn_event_link
pn_delivery_tag = lib.pn_delivery_tag


def _next_event(collector: Any, pop: int, ptrs: Any, ints: Any) -> int:
    if pop:
        pn_collector_pop(collector)
    while True:
        e = pn_collector_peek(collector)
        if not e:
            return 0
        t: int = pn_event_type(e)
        if t in _SKIPPED_OR_TRANSPORT:
            pn_collector_pop(collector)
            continue
        ptrs[0] = e
        if t == _PN_DELIVERY:
            d = pn_event_delivery(e)
            ptrs[1] = d
            ptrs[2] = pn_delivery_link(d)
            ints[0] = pn_delivery_pending(d)
            flags = PARTIAL if pn_delivery_partial(d) else 0
            if pn_delivery_settled(d):
                flags |= SETTLED
                if pn_delivery_aborted(d):
                    flags |= ABORTED
            state = pn_delivery_remote_state(d)
            if state:
                flags |= STATE
            ints[1] = flags
            ints[2] = state
        elif t == _PN_LINK_FLOW:
            ptrs[2] = pn_event_link(e)
        return t


def _recv_whole(lptr: Any, buffer: Any, n: int) -> int:
    got: int = pn_link_recv(lptr, buffer, n)
    pn_link_advance(lptr)
    return got


_tag = ffi.new("uint64_t *")
_tag_bytes = ffi.new("pn_bytes_t *", (8, ffi.cast("char *", _tag)))[0]


def _send_copy(lptr: Any, tag: int, data: bytes, n: int) -> Any:
    _tag[0] = tag
    od = pn_delivery(lptr, _tag_bytes)  # proton copies the tag
    pn_link_send(lptr, data, n)
    pn_link_advance(lptr)
    return od


def _update_settle(d: Any, state: int) -> None:
    pn_delivery_update(d, state)
    pn_delivery_settle(d)


def _relay_whole(d: Any, lptr: Any, partner: Any, buffer: Any, n: int, max_tag: int) -> Any:
    tag = pn_delivery_tag(d)
    if tag.size > max_tag:
        return NULL
    od = pn_delivery(partner, tag)  # proton copies the tag
    got = pn_link_recv(lptr, buffer, n)
    if got > 0:
        pn_link_send(partner, buffer, got)
    pn_link_advance(lptr)
    pn_link_advance(partner)
    return od


def _pass_outcome(d: Any, od: Any, state: int) -> None:
    pn_delivery_update(d, state)
    pn_delivery_settle(d)
    pn_delivery_settle(od)


def _python_arrays() -> tuple[Any, Any]:
    return [None, None, None], [0, 0, 0]


def _compiled_arrays() -> tuple[Any, Any]:
    assert _accel is not None
    return _accel.ffi.new("void *[3]"), _accel.ffi.new("int64_t[3]")


#: ``next_event(collector, pop, ptrs, ints) -> event type`` (0: none left);
#: ``pop`` true first pops the event returned last.
next_event: Callable[[Any, int, Any, Any], int]
#: ``recv_whole(link, buffer, n) -> bytes read``: read a complete message and
#: move the link on to the next delivery.
recv_whole: Callable[[Any, Any, int], int]
#: ``send_copy(link, tag, data, len(data)) -> delivery``: a new delivery with
#: an 8-byte tag, the whole message, the link moved on.
send_copy: Callable[[Any, int, bytes, int], Any]
#: ``update_settle(delivery, state)``: give a local state and settle.
update_settle: Callable[[Any, int], None]
#: ``relay_whole(d, link, partner, buffer, n, max_tag) -> copy``: a complete
#: transfer of a link-routed pair passed to the partner link with the same
#: tag, both links moved on; NULL (nothing done) for a tag above ``max_tag``.
relay_whole: Callable[[Any, Any, Any, Any, int, int], Any]
#: ``pass_outcome(d, od, state)``: a routed copy's outcome given to the
#: producer's delivery, both settled.
pass_outcome: Callable[[Any, Any, int], None]
#: The two arrays ``next_event`` fills.
event_arrays: Callable[[], tuple[Any, Any]]

if _accel is not None:
    next_event = _accel.lib.hop_next_event
    recv_whole = _accel.lib.hop_recv_whole
    send_copy = _accel.lib.hop_send_copy
    update_settle = _accel.lib.hop_update_settle
    relay_whole = _accel.lib.hop_relay_whole
    pass_outcome = _accel.lib.hop_pass_outcome
    event_arrays = _compiled_arrays
else:
    next_event = _next_event
    recv_whole = _recv_whole
    send_copy = _send_copy
    update_settle = _update_settle
    relay_whole = _relay_whole
    pass_outcome = _pass_outcome
    event_arrays = _python_arrays

#: The Python versions, whichever is in use (the tests compare the two).
PYTHON: Final = {"next_event": _next_event, "recv_whole": _recv_whole,
                 "send_copy": _send_copy, "update_settle": _update_settle,
                 "relay_whole": _relay_whole, "pass_outcome": _pass_outcome,
                 "event_arrays": _python_arrays}

__all__ = ["ABORTED", "COMPILED", "PARTIAL", "PYTHON", "SETTLED", "SKIPPED", "STATE",
           "event_arrays",
           "next_event", "pass_outcome", "recv_whole", "relay_whole", "send_copy",
           "update_settle"]
