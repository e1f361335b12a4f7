"""``may_have_router_keys`` never misses router annotations that ``scan`` finds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Message, symbol

from router.core.message import MessageFormatError, may_have_router_keys, scan

KEYS = ["x-opt-qd.trace", "x-opt-qd.ingress", "x-opt-qd.to", "user", "x-opt-other", "x-opt-qd"]


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    message = Message(body=draw(st.one_of(st.binary(max_size=300), st.text(max_size=50))))
    if draw(st.booleans()):
        message.durable = True
        message.priority = draw(st.integers(0, 9))
    if draw(st.booleans()):
        message.instructions = {symbol("x-opt-da"): draw(st.integers(0, 5))}
    keys = draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=4))
    if keys:
        message.annotations = {symbol(k): "0/R" for k in keys}
    if draw(st.booleans()):
        message.address = draw(st.text(max_size=20))
    return bytes(message.encode())


@settings(max_examples=300)
@given(messages())
def test_precheck_is_conservative(data: bytes) -> None:
    if scan(data).router_keys:
        assert may_have_router_keys(data)


@given(st.binary(max_size=64))
def test_precheck_never_raises_on_garbage(data: bytes) -> None:
    answer = may_have_router_keys(data)
    try:
        found = bool(scan(data).router_keys)
    except MessageFormatError:
        return
    if found:
        assert answer


def test_plain_messages_need_no_scan() -> None:
    # bytes, as the router receives them (proton's Message.encode gives a bytearray)
    assert not may_have_router_keys(bytes(Message(body=b"x" * 100).encode()))
    assert not may_have_router_keys(bytes(Message(body="x", durable=True, priority=7,
                                                  annotations={symbol("user"): 1}).encode()))
    assert may_have_router_keys(bytes(Message(body="x",
                                              annotations={symbol("x-opt-qd.to"): "q"}).encode()))
