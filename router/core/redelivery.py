"""Re-forwarding released deliveries (docs/routing.md#re-forwarding-released-deliveries).

Owns the decisions: whether a copy that came back is forwarded again,
where it goes next, and the message the next consumer gets (its header's
``delivery-count`` raised after a failed delivery, the annotations a
consumer gave with MODIFIED merged in; AMQP 1.0 sections 3.2.1 and 3.4.5).
The adapter (``router.adapter.forwarding.redelivery``) applies them.  This runs only
for a copy that came back, never for a message on its way: the rewriting
uses the control plane's codec (``router.core.amqp``), not the data
path's scanner alone.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Final, TypeVar

from addressing import choose_balanced
from addressing.forwarding import Consumer
from router.core.amqp import (
    HEADER,
    MESSAGE_ANNOTATIONS,
    Described,
    PeerProtocolError,
    UInt,
    encode_section,
)
from router.core.amqp.values import COMPACT, decode
from router.core.message import scan
from router.core.settlement import MODIFIED, RELEASED

__all__ = ["ROUTER_KEY_PREFIX", "choose_again", "may_redeliver", "redelivered_copy"]

#: Message-annotation keys that only routers write; a consumer's MODIFIED
#: annotations never set them (they steer routing).
ROUTER_KEY_PREFIX: Final = "x-opt-qd"

# The header's fields (AMQP 1.0 section 3.2.1), in order.
_FIRST_ACQUIRER: Final = 3
_DELIVERY_COUNT: Final = 4
_HEADER_FIELDS: Final = 5

C = TypeVar("C", bound=Consumer)
R = TypeVar("R", bound=Consumer)


def may_redeliver(state: int, undeliverable: bool, attempts: int, limit: int) -> bool:
    """Whether a copy that came back with ``state`` is forwarded again: it was
    RELEASED, or MODIFIED without ``undeliverable-here``, and the delivery
    has been forwarded again fewer than ``limit`` times so far.  (The
    producer's delivery must still be unsettled and the message held whole:
    the caller knows.)"""
    if attempts >= limit:
        return False
    if state == RELEASED:
        return True
    return state == MODIFIED and not undeliverable


def choose_again(closest: bool, consumers: Sequence[C], remotes: Sequence[R],
                 tried: Collection[object], via: Callable[[R], object | None]) -> C | R | None:
    """The next destination of a delivery that came back, or None.

    ``consumers`` are the address's local consumers in round-robin order,
    ``remotes`` the other routers that have it (cheapest first for
    ``closest``), ``via(remote)`` the link a copy to it would take (None
    when there is none now).  A consumer or link in ``tried`` is never
    chosen again.  ``closest`` takes the first local consumer left, else
    the cheapest router left; balanced chooses among those left as it
    does for a new message (``addressing.choose_balanced``).
    """
    local = [c for c in consumers if c not in tried]
    far: list[R] = []
    for remote in remotes:
        link = via(remote)
        if link is not None and link not in tried:
            far.append(remote)
    if closest:
        if local:
            return local[0]
        return far[0] if far else None
    return choose_balanced(local, far)


def _header_fields(data: bytes, at: int) -> tuple[list[object], int]:
    """The fields of the header section at ``at`` (padded to all five) and
    where the section ends."""
    section, end = decode(data, at)
    if not isinstance(section, Described) or not isinstance(section.value, list):
        raise PeerProtocolError("header section is not a described list")
    fields = list(section.value)
    fields += [None] * (_HEADER_FIELDS - len(fields))
    return fields, end


def _annotations(data: bytes, start: int, end: int) -> dict[object, object]:
    """The message-annotations map of the section ``data[start:end]`` (empty
    when there is none)."""
    if start == end:
        return {}
    section, _ = decode(data, start, end)
    if not isinstance(section, Described) or not isinstance(section.value, dict):
        raise PeerProtocolError("message-annotations section is not a described map")
    return dict(section.value)


def redelivered_copy(data: bytes, failed: bool, annotations: bytes | None) -> bytes:
    """The message to forward again after a consumer gave it back.

    ``failed`` (MODIFIED with ``delivery-failed``): the header's
    ``delivery-count`` goes up by one and ``first-acquirer`` becomes false
    (a header is added when there is none).  ``annotations``, the encoded
    map a consumer gave with MODIFIED, are merged into the message
    annotations, a key already there taking the new value (section 3.4.5);
    router keys (``x-opt-qd...``) among them are ignored.  Otherwise the
    message is returned as it is.

    Raises:
        MessageFormatError: the message, or PeerProtocolError: its header or
            annotations, cannot be decoded.
    """
    extra: dict[object, object] = {}
    if annotations:
        given, _ = decode(annotations)
        if not isinstance(given, dict):
            raise PeerProtocolError("modified message-annotations is not a map")
        extra = {key: value for key, value in given.items()
                 if not (isinstance(key, str) and key.startswith(ROUTER_KEY_PREFIX))}
    if not failed and not extra:
        return data
    info = scan(data, read_to=False)
    parts: list[bytes] = []
    pos = 0
    if failed:
        if info.header >= 0:
            fields, header_end = _header_fields(data, info.header)
            count = fields[_DELIVERY_COUNT]
            fields[_DELIVERY_COUNT] = UInt((count if isinstance(count, int) else 0) + 1)
            fields[_FIRST_ACQUIRER] = False
            parts += [data[:info.header], encode_section(HEADER, fields, COMPACT)]
            pos = header_end
        else:
            fields = [None] * _HEADER_FIELDS
            fields[_DELIVERY_COUNT] = UInt(1)
            fields[_FIRST_ACQUIRER] = False
            parts.append(encode_section(HEADER, fields, COMPACT))
    if extra:
        merged = _annotations(data, info.ma_start, info.ma_end)
        merged.update(extra)
        parts += [data[pos:info.ma_start], encode_section(MESSAGE_ANNOTATIONS, merged, COMPACT)]
        pos = info.ma_end
    parts.append(data[pos:])
    return b"".join(parts)
