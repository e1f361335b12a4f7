"""Router message annotations on encoded AMQP 1.0 messages: the per-message path.

Owns:
  * ``scan``: walking the top-level sections of an encoded message (AMQP 1.0
    part 3.2) through ``properties``, recording where they are and reading the
    header priority, ``properties.to`` and whether message-annotations carry
    router keys;
  * ``decode_annotations``: the router keys of docs/routing.md#message-annotations
    (``x-opt-qd.ingress``, ``.trace``, ``.to``, ``.phase``, ``.stream``,
    ``.class`` and ``x-opt-qd.``), type-checked with qdrouterd's rejection
    texts, plus the user entries as their received bytes;
  * ``strip_router_annotations``, ``annotate`` and ``AnnotationEncoder``:
    re-emitting a message with its message-annotations section rewritten.

Must not:
  * import proton or anything outside the stdlib;
  * decode application-properties or the body, or change any byte outside the
    message-annotations section: the bare message (part 3.2) is immutable and
    the router forwards the bytes that arrived;
  * allocate per message beyond its results (one tuple for ``scan``); these
    functions run for every message, see
    docs/performance.md#the-python-data-plane;
  * raise anything but ``MessageFormatError`` for bad input.

Unlike qdrouterd (docs/compatibility.md#message-annotations), user entries
after a router key are kept, in their received order. ``scan`` walks the
annotations map only when it holds the bytes ``x-opt-qd.``; a map without
router keys is walked (validated) only when ``annotate`` re-emits it.
Rewritten maps use the compact encodings (map8, list8, str8, smallint)
whenever they fit, so a proton-encoded map32 of user entries comes back as a
map8 after annotate/strip; sections other than message-annotations keep
every byte.

Results are NamedTuples built with ``tuple.__new__``, not attrs classes:
that costs under half of a slots ``__init__`` call, and they are immutable.
"""

from typing import Final, NamedTuple

from router.core.amqp.wire import (
    DECODE_ERROR,
    DECODE_FAULTS,
    INVALID_FIELD,
    SECTION_END,
    Buffer,
    MessageFormatError,
    decode_fault,
    encode_int,
    encode_list,
    encode_ma_section,
    encode_string,
    encode_string_list,
    encode_symbol,
    read_int,
    read_string,
    section_descriptor,
    section_error,
    skip,
    split_map,
    u32,
    u32x2,
)

__all__ = [
    "DECODE_ERROR",
    "INVALID_FIELD",
    "NO_ANNOTATIONS",
    "AnnotationEncoder",
    "MessageFormatError",
    "MessageInfo",
    "MessageReader",
    "RouterAnnotations",
    "RouterKeys",
    "annotate",
    "decode_annotations",
    "encode_string",
    "encode_symbol",
    "may_have_router_keys",
    "scan",
    "strip_router_annotations",
    "subject_of",
    "user_id_of",
]

# Router keys (docs/routing.md#message-annotations); every other key, x-opt-qd.*
# included, is a user key.
_PREFIX: Final = b"x-opt-qd."
_INGRESS, _TRACE, _TO, _PHASE, _STREAM = range(5)  # RouterKeys order
_IGNORED: Final = -2  # dropped unread
_ROUTER_KEYS: Final = {
    b"x-opt-qd.ingress": _INGRESS,
    b"x-opt-qd.trace": _TRACE,
    b"x-opt-qd.to": _TO,
    b"x-opt-qd.phase": _PHASE,
    b"x-opt-qd.stream": _STREAM,
    b"x-opt-qd.class": _IGNORED,
    b"x-opt-qd.": _IGNORED,
}
_K_INGRESS: Final = encode_symbol("x-opt-qd.ingress")
_K_TRACE: Final = encode_symbol("x-opt-qd.trace")
_K_TO: Final = encode_symbol("x-opt-qd.to")
_K_PHASE: Final = encode_symbol("x-opt-qd.phase")
_K_STREAM: Final = encode_symbol("x-opt-qd.stream")

# qdrouterd's rejection descriptions (docs/routing.md#receiving-a-message), verbatim.
_MISSING_MAP: Final = "Invalid message annotations section - missing map type"
_ODD_COUNT: Final = "Invalid MA map count (odd number of fields)"
_BAD_TO: Final = "to-override not a valid string type"
_BAD_TRACE: Final = "trace annotation is not a list"
_BAD_TRACE_ENTRY: Final = "trace list contains non-string entries"
_BAD_INGRESS: Final = "ingress router not a string type"

_new: Final = tuple.__new__
# Below this size slicing a message copies less than a memoryview costs.
_SLICE_LIMIT: Final = 4096

# A memo (``MessageReader``'s) that reaches MEMO_SIZE entries starts again empty.
MEMO_SIZE: Final = 1024
_MISSING: Final = object()


def _section(data: Buffer, start: int, end: int) -> bytes:
    if type(data) is bytes:
        return data[start:end]
    return bytes(data[start:end])


class RouterKeys(NamedTuple):
    """Where the router keys of a message-annotations map are (found by ``scan``).

    ``user_entries`` holds the ``user_count`` other entries as received (each
    key then value, in map order, router keys cut out). The other fields are
    the offsets of the router keys' values from the start of the section
    (``MessageInfo.ma_start``), -1 when absent, so that the same section read
    at another offset has the same keys; a repeated key counts from its last
    occurrence. ``x-opt-qd.class`` and ``x-opt-qd.`` are
    recognised and dropped.
    """

    user_entries: bytes
    user_count: int
    ingress: int
    trace: int
    to: int
    phase: int
    stream: int


class MessageInfo(NamedTuple):
    """Where the sections of an encoded message are, and what the router reads.

    ``priority`` is the header's ubyte priority (None when absent or of
    another type); ``to`` is ``properties.to`` (None when absent or not read).
    Offsets index the scanned buffer; an absent section's offset is -1.
    ``ma_start:ma_end`` is the message-annotations section, or the empty span
    where one belongs when there is none; ``ma_items`` is the offset of its
    first map entry and ``ma_count`` its number of fields (keys and values).
    ``scan_end`` is where scanning stopped: the end of properties, or the
    start of the first section after message-annotations that was not read.
    ``router_keys`` is None when the annotations hold no router key.
    """

    priority: int | None
    to: str | None
    header: int
    delivery_annotations: int
    ma_start: int
    ma_end: int
    ma_items: int
    ma_count: int
    properties: int
    scan_end: int
    router_keys: RouterKeys | None


class RouterAnnotations(NamedTuple):
    """The decoded router keys of a message-annotations map, and its user entries.

    ``user_entries``/``user_count`` are as in :class:`RouterKeys`;
    ``trace_encoded`` holds the encoded entries of ``x-opt-qd.trace`` without
    the list header, so a router appends itself without re-encoding the trace.
    ``origin`` is the ingress router's id (``"0/"`` dropped) and ``visited``
    the ids of the routers in the trace: what forwarding reads per message,
    worked out once per distinct section.
    """

    ingress: str | None
    trace: tuple[str, ...] | None
    to: str | None
    phase: int | None
    stream: int | None
    user_entries: bytes
    user_count: int
    trace_encoded: bytes
    origin: str | None = None
    visited: frozenset[str] = frozenset()


def router_id_of(entry: str) -> str:
    """``"0/R1"`` (an ingress or trace entry; qdrouterd has one area) -> ``"R1"``."""
    return entry[2:] if entry.startswith("0/") else entry


NO_ANNOTATIONS: Final = RouterAnnotations(None, None, None, None, None, b"", 0, b"")


def may_have_router_keys(data: bytes) -> bool:
    """Cheap pre-check for the per-message path: False when ``data`` surely has
    no router annotations (no message-annotations section where one belongs,
    or one without the bytes ``x-opt-qd.``); True means "scan to be sure".

    Only the usual small-ulong section descriptors are followed; anything
    else (a symbolic descriptor, a malformed start) answers True.
    """
    n = len(data)
    pos = 0
    try:
        if data[0] == 0 and data[1] == 0x53 and data[2] == 0x70:  # header list
            code = data[3]
            if code == 0x45:
                pos = 4
            elif code == 0xC0:
                pos = 5 + data[4]
            elif code == 0xD0:
                pos = 8 + int.from_bytes(data[4:8], "big")
            else:
                return True
        if data[pos] == 0 and data[pos + 1] == 0x53 and data[pos + 2] == 0x71:  # delivery ann.
            code = data[pos + 3]
            if code == 0xC1:
                pos += 5 + data[pos + 4]
            elif code == 0xD1:
                pos += 8 + int.from_bytes(data[pos + 4 : pos + 8], "big")
            else:
                return True
        if data[pos] == 0 and data[pos + 1] == 0x53:
            if data[pos + 2] != 0x72:
                return False
            code = data[pos + 3]
            if code == 0xC1:
                end = pos + 5 + data[pos + 4]
            elif code == 0xD1:
                end = pos + 8 + int.from_bytes(data[pos + 4 : pos + 8], "big")
            else:
                return True
            return data.find(_PREFIX, pos, min(end, n)) >= 0
    except IndexError:
        return True
    return True


def scan(data: Buffer, read_to: bool = True,
         memo: "dict[bytes, RouterKeys | None] | None" = None) -> MessageInfo:
    """Locate the sections of an encoded message, up to and including properties.

    Section sizes, the header priority, the annotations map and
    ``properties.to`` are validated; the contents of other sections are not.
    An absent body is accepted.

    Args:
        data: one whole encoded message (the payload of its transfers).
        read_to: read ``properties.to``; without it scanning stops at the
            properties section, as qdrouterd's does for a link with a target
            address (docs/routing.md#receiving-a-message).
        memo: where the router keys of the annotation sections met are kept
            (``MessageReader``'s).

    Returns:
        The section offsets, header priority and ``properties.to`` (None when
        absent) and where the router keys are.

    Raises:
        MessageFormatError: the sections are malformed, out of order or
            truncated, message-annotations is not a map of even count, or
            ``properties.to`` is not a string.
    """
    # Runs for every message: unrolled in section order (part 3.2), literal
    # format codes instead of global names, list0/null/str8 fast paths.
    n = len(data)
    priority: int | None = None
    to: str | None = None
    header = delivery_annotations = properties = -1
    ma_count = pos = 0
    router_keys = None
    try:
        if n > 2 and data[0] == 0 and data[1] == 0x53:
            code = data[2]
            v = 3
        else:
            code, v = section_descriptor(data, 0, n)
        if code == 0x70:  # header (part 3.2.1); priority is field 1
            header = 0
            c = data[v]
            if c == 0x45:
                pos = v + 1
            else:
                pos = skip(data, v, n)
                if c == 0xC0:
                    count = data[v + 2]
                    p = v + 3
                elif c == 0xD0:
                    count = u32(data, v + 5)[0]
                    p = v + 9
                else:
                    raise MessageFormatError("header section is not a list")
                if count > 1:
                    p = p + 1 if 0x40 <= data[p] <= 0x42 else skip(data, p, pos)
                    if data[p] == 0x50 and p + 2 <= pos:
                        priority = data[p + 1]
            if pos < n and data[pos] == 0 and data[pos + 1] == 0x53:
                code = data[pos + 2]
                v = pos + 3
            else:
                code, v = section_descriptor(data, pos, n)
        if code == 0x71:  # delivery-annotations (part 3.2.2)
            delivery_annotations = pos
            if data[v] != 0xC1 and data[v] != 0xD1:
                raise MessageFormatError(f"delivery-annotations at offset {pos} is not a map")
            pos = skip(data, v, n)
            if pos < n and data[pos] == 0 and data[pos + 1] == 0x53:
                code = data[pos + 2]
                v = pos + 3
            else:
                code, v = section_descriptor(data, pos, n)
        ma_start = pos
        if code == 0x72:  # message-annotations (part 3.2.3)
            c = data[v]
            if c == 0xC1:
                ma_count = data[v + 2]
                ma_items = v + 3
                pos = v + 2 + data[v + 1]
            elif c == 0xD1:
                size, ma_count = u32x2(data, v + 1)
                ma_items = v + 9
                pos = v + 5 + size
            else:
                raise MessageFormatError(_MISSING_MAP, INVALID_FIELD)
            if ma_items > pos or pos > n:
                raise MessageFormatError(f"message-annotations at offset {ma_start} is truncated")
            if ma_count & 1:
                raise MessageFormatError(_ODD_COUNT, INVALID_FIELD)
            if type(data) is memoryview:
                found = _PREFIX in data[ma_items:pos].tobytes()
            else:
                found = data.find(_PREFIX, ma_items, pos) >= 0
            if found:
                if memo is None:
                    router_keys = _split_keys(data, ma_start, ma_items, pos, ma_count)
                else:
                    section = _section(data, ma_start, pos)
                    if section in memo:
                        router_keys = memo[section]
                    else:
                        router_keys = _split_keys(data, ma_start, ma_items, pos, ma_count)
                        if len(memo) >= MEMO_SIZE:
                            memo.clear()
                        memo[section] = router_keys
            if pos < n and data[pos] == 0 and data[pos + 1] == 0x53:
                code = data[pos + 2]
                v = pos + 3
            else:
                code, v = section_descriptor(data, pos, n)
        else:
            ma_items = pos
        ma_end = pos
        if code == 0x73:  # properties (part 3.2.4); to is field 2
            properties = pos
            if read_to:
                c = data[v]
                if c == 0xC0:
                    count = data[v + 2]
                    p = v + 3
                    pos = v + 2 + data[v + 1]
                elif c == 0xD0:
                    size, count = u32x2(data, v + 1)
                    p = v + 9
                    pos = v + 5 + size
                elif c == 0x45:
                    count = 0
                    p = pos = v + 1
                else:
                    raise MessageFormatError(f"properties at offset {properties} is not a list")
                if p > pos or pos > n:
                    raise MessageFormatError(f"properties at offset {properties} is truncated")
                if count > 2:
                    if data[p] == 0x40 and data[p + 1] == 0x40:
                        p += 2
                    else:
                        p = skip(data, skip(data, p, pos), pos)
                    c = data[p]
                    if c == 0xA1 or c == 0xA3:
                        q = p + 2 + data[p + 1]
                        if q > pos:
                            raise MessageFormatError(f"properties.to at offset {p} is truncated")
                        if type(data) is memoryview:
                            to = str(data[p + 2 : q], "utf-8")
                        else:
                            to = data[p + 2 : q].decode()
                    elif c != 0x40:
                        q = skip(data, p, pos)
                        to = read_string(bytes(data[p:q]), 0, q - p)
                        if to is None:
                            raise MessageFormatError(
                                f"properties.to at offset {p} must be a string, got 0x{c:02x}"
                            )
        elif code < 0x74 or (code > 0x78 and code != SECTION_END):
            raise section_error(code, pos)
    except DECODE_FAULTS as exc:
        raise decode_fault(exc) from None
    return _new(
        MessageInfo,
        (priority, to, header, delivery_annotations, ma_start, ma_end, ma_items,
         ma_count, properties, pos, router_keys),
    )


def _split_keys(
    data: Buffer, start: int, items: int, end: int, count: int
) -> "RouterKeys | None":
    split = split_map(data, items, end, count >> 1, _ROUTER_KEYS, 5)
    if split is None:
        return None
    entries, others, found = split
    return _new(RouterKeys, (entries, others, *[-1 if at < 0 else at - start for at in found]))


def decode_annotations(data: Buffer, info: MessageInfo,
                       memo: "dict[bytes, RouterAnnotations] | None" = None) -> RouterAnnotations:
    """Decode and type-check the router keys of a scanned message
    (docs/routing.md#message-annotations).

    A connection with inbound stripping skips this: router keys are then
    dropped unread, without rejection (docs/routing.md#receiving-a-message).

    Args:
        data: the message ``info`` was scanned from.
        info: ``scan(data)``.

    Returns:
        The router key values (None where absent) and the user entries.

    Raises:
        MessageFormatError: a router key of the wrong type (condition
            ``amqp:invalid-field``, qdrouterd's description) or a malformed value.
    """
    keys = info.router_keys
    if keys is None:
        if info.ma_start == info.ma_end:
            return NO_ANNOTATIONS
        user = bytes(data[info.ma_items : info.ma_end])
        return RouterAnnotations(None, None, None, None, None, user, info.ma_count >> 1, b"")
    section = _section(data, info.ma_start, info.ma_end)
    if memo is None:
        return _decode_keys(section, keys)
    found = memo.get(section)
    if found is None:
        found = _decode_keys(section, keys)
        if len(memo) >= MEMO_SIZE:
            memo.clear()
        memo[section] = found
    return found


def _decode_keys(data: bytes, keys: RouterKeys) -> RouterAnnotations:
    """Decode the router keys of one annotations section (``data``)."""
    end = len(data)
    ingress = to = None
    trace = phase = stream = None
    trace_encoded = b""
    try:
        if keys.ingress >= 0:
            ingress = read_string(data, keys.ingress, skip(data, keys.ingress, end))
            if ingress is None:
                raise MessageFormatError(_BAD_INGRESS, INVALID_FIELD)
        if keys.trace >= 0:
            trace, trace_encoded = _decode_trace(data, keys.trace, skip(data, keys.trace, end))
        if keys.to >= 0:
            to = read_string(data, keys.to, skip(data, keys.to, end))
            if to is None:
                raise MessageFormatError(_BAD_TO, INVALID_FIELD)
        if keys.phase >= 0:
            phase = _read_int(data, keys.phase, end, "phase")
        if keys.stream >= 0:
            stream = _read_int(data, keys.stream, end, "stream")
    except DECODE_FAULTS as exc:
        raise decode_fault(exc) from None
    visited = frozenset(router_id_of(entry) for entry in trace) if trace else frozenset()
    return RouterAnnotations(
        ingress, trace, to, phase, stream, keys.user_entries, keys.user_count, trace_encoded,
        None if ingress is None else router_id_of(ingress), visited,
    )


def _read_int(data: bytes | bytearray, pos: int, end: int, name: str) -> int:
    number = read_int(data, pos, skip(data, pos, end))
    if number is None:
        raise MessageFormatError(f"{name} annotation is not an integer", INVALID_FIELD)
    return number


def _decode_trace(data: bytes | bytearray, pos: int, end: int) -> tuple[tuple[str, ...], bytes]:
    c = data[pos]
    if c == 0x45:
        return (), b""
    if c == 0xC0:
        count = data[pos + 2]
        first = pos + 3
    elif c == 0xD0:
        count = u32(data, pos + 5)[0]
        first = pos + 9
    else:
        raise MessageFormatError(_BAD_TRACE, INVALID_FIELD)
    pos = first
    trace = []
    for _ in range(count):
        c = data[pos]
        if c == 0xA1:
            nxt = pos + 2 + data[pos + 1]
            if nxt > end:
                raise MessageFormatError(f"trace entry at offset {pos} overruns the list")
            trace.append(data[pos + 2 : nxt].decode())
        else:
            nxt = skip(data, pos, end)
            entry = read_string(data, pos, nxt)
            if entry is None:
                raise MessageFormatError(_BAD_TRACE_ENTRY, INVALID_FIELD)
            trace.append(entry)
        pos = nxt
    if pos != end:
        raise MessageFormatError(f"trace list has {end - pos} bytes past its entries")
    return tuple(trace), bytes(data[first:end])


def _property_at(data: Buffer, info: MessageInfo, index: int) -> tuple[int, int] | None:
    """Where field ``index`` of a scanned message's properties list is (part
    3.2.4: message-id, user-id, to, subject, ...), and where the list ends;
    None when there is no properties section, or the list is shorter.
    Decoding faults are the caller's to turn into ``MessageFormatError``.

    Raises:
        MessageFormatError: properties is not a list, or it is truncated.
    """
    pos = info.properties
    if pos < 0:
        return None
    n = len(data)
    _, v = section_descriptor(data, pos, n)
    c = data[v]
    if c == 0xC0:
        count, p, end = data[v + 2], v + 3, v + 2 + data[v + 1]
    elif c == 0xD0:
        size, count = u32x2(data, v + 1)
        p, end = v + 9, v + 5 + size
    elif c == 0x45:
        return None
    else:
        raise MessageFormatError(f"properties at offset {pos} is not a list")
    if end > n:
        raise MessageFormatError(f"properties at offset {pos} is truncated")
    if count <= index:
        return None
    for _field in range(index):
        p = skip(data, p, end)
    return p, end


def user_id_of(data: Buffer, info: MessageInfo) -> bytes | None:
    """``properties.user-id`` of a scanned message (None when absent or empty).

    Raises:
        MessageFormatError: properties is not a list, or user-id is not binary.
    """
    try:
        at = _property_at(data, info, 1)
        if at is None:
            return None
        p, end = at
        c = data[p]
        if c == 0x40:
            return None
        q = skip(data, p, end)
        if c == 0xA0:
            value = bytes(data[p + 2 : q])
        elif c == 0xB0:
            value = bytes(data[p + 5 : q])
        else:
            raise MessageFormatError(f"properties.user-id at offset {p} must be binary, "
                                     f"got 0x{c:02x}")
    except DECODE_FAULTS as exc:
        raise decode_fault(exc) from None
    return value or None


def subject_of(data: bytes, info: MessageInfo) -> str | None:
    """``properties.subject`` of a scanned message (part 3.2.4, its fourth
    field; None when absent or null), as an exchange matches it.

    Raises:
        MessageFormatError: properties is not a list, or its subject is not a
            string (a symbol is read as its text).
    """
    try:
        at = _property_at(data, info, 3)
        if at is None:
            return None
        p, end = at
        if data[p] == 0x40:
            return None
        q = skip(data, p, end)
        subject = read_string(data, p, q)
        if subject is None:
            raise MessageFormatError(f"properties.subject at offset {p} must be a string, "
                                     f"got 0x{data[p]:02x}")
    except DECODE_FAULTS as exc:
        raise decode_fault(exc) from None
    return subject


def strip_router_annotations(data: Buffer, info: MessageInfo,
                             memo: dict[bytes, bytes] | None = None) -> bytes:
    """Return the message without router keys; every byte outside the annotations kept.

    The section is dropped when no user entries remain. Without router keys
    ``data`` itself is returned if it is ``bytes`` (a copy otherwise: callers
    holding a memoryview test ``info.router_keys`` first).

    Args:
        data: the message ``info`` was scanned from.
        info: ``scan(data)``.
    """
    keys = info.router_keys
    if keys is None:
        return data if type(data) is bytes else bytes(data)
    if memo is None:
        return _splice(data, info, _new_section(keys.user_entries, keys.user_count, b"", 0))
    section = _section(data, info.ma_start, info.ma_end)
    new = memo.get(section)
    if new is None:
        new = _new_section(keys.user_entries, keys.user_count, b"", 0)
        if len(memo) >= MEMO_SIZE:
            memo.clear()
        memo[section] = new
    return _splice(data, info, new)


def _new_section(user: Buffer, users: int, router: bytes, routers: int) -> bytes:
    """An annotations section of ``user`` then ``router`` entries; none if both are empty."""
    fields = (users + routers) << 1
    if not fields:
        return b""
    return b"".join((encode_ma_section(len(user) + len(router), fields), user, router))


def _splice(data: Buffer, info: MessageInfo, section: bytes) -> bytes:
    """``data`` with its annotations section replaced by ``section``."""
    view = data if len(data) < _SLICE_LIMIT else memoryview(data)
    return b"".join((view[: info.ma_start], section, view[info.ma_end :]))


def _replace(
    data: Buffer, info: MessageInfo, user: Buffer, users: int, router: bytes, routers: int
) -> bytes:
    """``data`` with its annotations section replaced by ``user`` then ``router`` entries."""
    return _splice(data, info, _new_section(user, users, router, routers))


def _user_part(data: Buffer, info: MessageInfo) -> tuple[Buffer, int]:
    keys = info.router_keys
    if keys is not None:
        return keys.user_entries, keys.user_count
    if info.ma_items != info.ma_end:
        # scan skips a map without router keys; walk it before re-emitting it
        # beside router keys, or the next router would reject it for us. A
        # count of 0 with bytes after it is caught here too.
        try:
            split_map(data, info.ma_items, info.ma_end, info.ma_count >> 1, _ROUTER_KEYS, 5)
        except DECODE_FAULTS as exc:
            raise decode_fault(exc) from None
    return data[info.ma_items : info.ma_end], info.ma_count >> 1


def _routing_entries(to: str | None, phase: int | None, stream: int | None) -> tuple[bytes, int]:
    """Encode the entries that precede ingress and trace, in qdrouterd's order."""
    parts = []
    if phase:
        parts.append(_K_PHASE + encode_int(phase))
    if stream is not None:
        parts.append(_K_STREAM + encode_int(stream))
    if to is not None:
        parts.append(_K_TO + encode_string(to))
    return b"".join(parts), len(parts)


def annotate(
    data: Buffer,
    info: MessageInfo,
    *,
    ingress: str,
    trace: list[str],
    to: str | None,
    phase: int | None,
    stream: int | None = None,
) -> bytes:
    """Return the message with its router annotations set to the given values.

    The new annotations are the user entries as received, in order, then
    ``x-opt-qd.phase`` (if non-zero), ``x-opt-qd.stream`` (if not None),
    ``x-opt-qd.to`` (if not None), ``x-opt-qd.ingress`` and ``x-opt-qd.trace``
    (docs/routing.md#message-annotations). A section is inserted after header and
    delivery-annotations if there was none. Other bytes are unchanged.

    Args:
        data: the message ``info`` was scanned from.
        info: ``scan(data)``.
        ingress, trace, to, phase, stream: the router key values to send.

    Raises:
        MessageFormatError: a malformed user entry (a map without router keys
            is first walked here, not in ``scan``).
    """
    head, heads = _routing_entries(to, phase, stream)
    router = head + _K_INGRESS + encode_string(ingress) + _K_TRACE + encode_string_list(trace)
    user, users = _user_part(data, info)
    return _replace(data, info, user, users, router, heads + 2)


def annotate_upward(data: Buffer, info: MessageInfo, *, to: str | None,
                    phase: int | None, stream: int | None = None) -> bytes:
    """Return the message as an edge router sends it up its uplink
    (docs/networks.md#edge-routers): the user entries as received, then
    ``x-opt-qd.phase`` (if non-zero), ``x-opt-qd.to`` (if not None) and
    ``x-opt-qd.stream`` (if not None: a carried TCP connection stays a
    stream, docs/tcp.md).  An edge router adds no ingress or trace, and
    drops any it received.

    Raises:
        MessageFormatError: as for :func:`annotate`.
    """
    head, heads = _routing_entries(to, phase, stream)
    if not heads and info.router_keys is None:
        return data if type(data) is bytes else bytes(data)
    user, users = _user_part(data, info)
    return _replace(data, info, user, users, head, heads)


class MessageReader:
    """One router's reading of messages: ``scan``, ``decode_annotations`` and
    ``strip_router_annotations`` with memos of what it read from and wrote
    for each annotations section it met.

    The messages of one flow carry the same router keys (ingress, trace,
    to), so a router meets few distinct sections, and a message costs a
    slice and a dict look-up instead of a walk and an encoding.  A memo that
    reaches ``MEMO_SIZE`` entries starts again empty, so sections that
    differ per message (user entries with a sequence number, say) cost one
    insertion each and never hold more than a bounded amount of memory.
    Each router (its forwarder) has its own: nothing is shared between the
    routers of one process.
    """

    __slots__ = ("_annotations", "_keys", "_strip")

    def __init__(self) -> None:
        self._keys: dict[bytes, RouterKeys | None] = {}
        self._annotations: dict[bytes, RouterAnnotations] = {}
        self._strip: dict[bytes, bytes] = {}

    def scan(self, data: Buffer, read_to: bool = True) -> MessageInfo:
        return scan(data, read_to, self._keys)

    def decode_annotations(self, data: Buffer, info: MessageInfo) -> RouterAnnotations:
        return decode_annotations(data, info, self._annotations)

    def strip_router_annotations(self, data: Buffer, info: MessageInfo) -> bytes:
        return strip_router_annotations(data, info, self._strip)


class AnnotationEncoder:
    """``annotate`` for one router, with its own ingress and trace entry pre-encoded.

    ``ingress`` is ``"0/<router_id>"`` (qdrouterd has one area, "0").
    """

    __slots__ = ("_ingress_entry", "_memo", "_own", "_own_entries", "_trace_entry", "ingress")

    def __init__(self, router_id: str) -> None:
        self.ingress = f"0/{router_id}"
        self._own = encode_string(self.ingress)
        self._ingress_entry = _K_INGRESS + self._own
        self._trace_entry = _K_TRACE + encode_list(self._own, 1)
        self._own_entries = self._ingress_entry + self._trace_entry
        # (received section, to, phase, stream, keys dropped) -> section sent
        self._memo: dict[tuple[bytes, str | None, int | None, int | None, bool], bytes] = {}

    def annotate(
        self,
        data: Buffer,
        info: MessageInfo,
        annotations: RouterAnnotations | None,
        *,
        to: str | None,
        phase: int | None,
        stream: int | None = None,
    ) -> bytes:
        """Return the message as this router sends it where annotations are kept.

        ``x-opt-qd.ingress`` is the received one, else this router;
        ``x-opt-qd.trace`` the received one with this router appended.

        Args:
            data: the message ``info`` was scanned from.
            info: ``scan(data)``.
            annotations: ``decode_annotations(data, info)``, or None to drop
                any received router keys unread (inbound stripping).
            to, phase, stream: as for :func:`annotate`.

        Raises:
            MessageFormatError: as for :func:`annotate`.
        """
        if stream is None and annotations is not None:
            stream = annotations.stream  # a streamed message stays one
        # The result depends only on these: ``annotations`` is decoded from
        # the section, or None.
        key = (_section(data, info.ma_start, info.ma_end), to, phase, stream,
               annotations is None)
        memo = self._memo
        section = memo.get(key)
        if section is None:
            section = self._section(data, info, annotations, to, phase, stream)
            if len(memo) >= MEMO_SIZE:
                memo.clear()
            memo[key] = section
        return _splice(data, info, section)

    def _section(
        self,
        data: Buffer,
        info: MessageInfo,
        annotations: RouterAnnotations | None,
        to: str | None,
        phase: int | None,
        stream: int | None,
    ) -> bytes:
        user, users = _user_part(data, info)
        router = self._own_entries
        if annotations is not None:
            ingress, trace = annotations.ingress, annotations.trace
            if ingress is not None or trace:
                ingress_entry = self._ingress_entry
                if ingress is not None:
                    ingress_entry = _K_INGRESS + encode_string(ingress)
                trace_entry = self._trace_entry
                if trace:
                    items = annotations.trace_encoded + self._own
                    trace_entry = _K_TRACE + encode_list(items, len(trace) + 1)
                router = ingress_entry + trace_entry
        if not phase and stream is None and to is None:
            return _new_section(user, users, router, 2)
        head, heads = _routing_entries(to, phase, stream)
        return _new_section(user, users, head + router, heads + 2)
