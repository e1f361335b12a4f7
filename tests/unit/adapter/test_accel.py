"""The accelerator's functions (router.adapter.forwarding.accel): the compiled ones and
their Python versions give the same answers, on real proton endpoints
joined in memory."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from proton import Collector, Connection, Delivery, Link, Message, Transport

from router.adapter.forwarding import accel
from router.adapter.pn import ffi, lib
from tests.unit.adapter.wire import pump

ACTIVE = {"next_event": accel.next_event, "recv_whole": accel.recv_whole,
          "send_copy": accel.send_copy, "update_settle": accel.update_settle,
          "relay_whole": accel.relay_whole, "pass_outcome": accel.pass_outcome,
          "event_arrays": accel.event_arrays}
IMPLEMENTATIONS = [pytest.param(accel.PYTHON, id="python")]
if accel.COMPILED:
    IMPLEMENTATIONS.append(pytest.param(ACTIVE, id="compiled"))

BODY = bytes(Message(body=b"x" * 100).encode())


class Pair:
    """A client connection and the router's side of it, pumped in memory; the
    router's side has its own collector, read only through ``next_event``."""

    def __init__(self, impl: dict[str, Any], max_frame: int = 0) -> None:
        self.impl = impl
        self.client = Connection()
        self.client_transport = Transport()
        if max_frame:
            self.client_transport.max_frame_size = max_frame
        self.client_transport.bind(self.client)
        self.server = Connection()
        self.server_transport = Transport(Transport.SERVER)
        if max_frame:
            self.server_transport.max_frame_size = max_frame
        self.server_transport.bind(self.server)
        self.collector = Collector()
        self.server.collect(self.collector)
        self.ptrs, self.ints = impl["event_arrays"]()
        self.client.open()
        self.server.open()
        self.pump()

    def pump(self) -> None:
        pump(self.client_transport, self.server_transport)

    def events(self) -> Iterator[tuple[int, Any, Any, list[int]]]:
        """Every event the collector holds, as ``next_event`` reports it:
        (type, delivery, link, ints)."""
        next_event: Callable[..., int] = self.impl["next_event"]
        collector = self.collector._impl
        t = next_event(collector, 0, self.ptrs, self.ints)
        while t:
            d = self.ptrs[1] if t == lib.PN_DELIVERY else None
            link = self.ptrs[2] if t in (lib.PN_DELIVERY, lib.PN_LINK_FLOW) else None
            yield t, d, link, [self.ints[0], self.ints[1], self.ints[2]]
            t = next_event(collector, 1, self.ptrs, self.ints)

    def drain(self) -> list[tuple[int, Any, Any, list[int]]]:
        return list(self.events())

    def deliveries(self) -> list[tuple[Any, Any, list[int]]]:
        return [(d, link, ints) for t, d, link, ints in self.events() if t == lib.PN_DELIVERY]


def _open_links(pair: Pair, client_sends: bool) -> tuple[Link, Any]:
    """A client link and the router's end of it (a raw pointer), attached."""
    ssn = pair.client.session()
    ssn.open()
    link = ssn.sender("s") if client_sends else ssn.receiver("r")
    link.target.address = "a"
    link.source.address = "a"
    link.open()
    pair.pump()
    server_link = None
    for t, _d, _link, _ints in pair.events():
        if t == lib.PN_SESSION_REMOTE_OPEN:
            lib.pn_session_open(pair.ptrs[0] and lib.pn_event_session(pair.ptrs[0]))
        elif t == lib.PN_LINK_REMOTE_OPEN:
            server_link = lib.pn_event_link(pair.ptrs[0])
            lib.pn_terminus_copy(lib.pn_link_source(server_link),
                                 lib.pn_link_remote_source(server_link))
            lib.pn_terminus_copy(lib.pn_link_target(server_link),
                                 lib.pn_link_remote_target(server_link))
            lib.pn_link_open(server_link)
    assert server_link is not None
    pair.pump()
    pair.drain()
    return link, server_link


def _producer(pair: Pair) -> tuple[Link, Any]:
    """A client sender and the router's receiving end of it, with credit."""
    sender, rlink = _open_links(pair, client_sends=True)
    lib.pn_link_flow(rlink, 10)
    pair.pump()
    pair.drain()
    return sender, rlink


def _tag(n: int) -> bytes:
    return n.to_bytes(8, "little")


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_whole_message_is_read_once_and_the_link_moves_on(impl: dict[str, Any]) -> None:
    pair = Pair(impl)
    sender, rlink = _producer(pair)
    for i, settled in enumerate((False, True)):
        d = sender.delivery(_tag(i))
        sender.send(BODY)
        sender.advance()
        if settled:
            d.settle()
    pair.pump()
    got = pair.deliveries()
    assert [flags for _d, _l, (_n, flags, _s) in got] == [0, accel.SETTLED]
    buffer = ffi.new("char[]", 1000)
    for d, link, (n, _flags, _state) in got:
        assert link == rlink
        assert n == len(BODY)
        assert lib.pn_link_current(rlink) == d
        assert impl["recv_whole"](rlink, buffer, n) == n
        assert ffi.buffer(buffer, n)[:] == BODY
        assert lib.pn_link_current(rlink) != d  # moved on
    # Nothing is left to read, and nothing else was reported.
    assert pair.drain() == []


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_message_in_several_frames_is_partial_until_its_last(impl: dict[str, Any]) -> None:
    pair = Pair(impl, max_frame=512)
    sender, _rlink = _producer(pair)
    big = Message(body=b"y" * 5000).encode()
    sender.delivery(_tag(1))
    sender.send(big[:3000])
    pair.pump()
    first = pair.deliveries()
    assert first and all(flags & accel.PARTIAL for _d, _l, (_n, flags, _s) in first)
    sender.send(big[3000:])
    sender.advance()
    pair.pump()
    last = pair.deliveries()
    assert last and not last[-1][2][1] & accel.PARTIAL
    assert last[-1][2][0] == len(big)  # nothing was read yet


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_an_aborted_transfer_is_settled_and_aborted(impl: dict[str, Any]) -> None:
    pair = Pair(impl, max_frame=512)
    sender, _rlink = _producer(pair)
    d = sender.delivery(_tag(1))
    sender.send(b"z" * 2000)
    pair.pump()
    pair.drain()
    d.abort()
    pair.pump()
    got = pair.deliveries()
    assert got[-1][2][1] & accel.ABORTED and got[-1][2][1] & accel.SETTLED


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_transfer_that_carries_a_state_is_flagged(impl: dict[str, Any]) -> None:
    """A producer's transfer with a state (an extension state) has STATE
    set and its state read; one without has neither."""
    pair = Pair(impl)
    sender, _rlink = _producer(pair)
    plain = sender.delivery(_tag(1))
    sender.send(BODY)
    sender.advance()
    stated = sender.delivery(_tag(2))
    stated.local.data = [1, 2, 3]
    stated.update(666)
    sender.send(BODY)
    sender.advance()
    del plain
    pair.pump()
    got = pair.deliveries()
    assert [(flags & accel.STATE, state) for _d, _l, (_n, flags, state) in got] == [
        (0, 0), (accel.STATE, 666)]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_copy_sent_arrives_whole_and_its_outcome_comes_back(impl: dict[str, Any]) -> None:
    pair = Pair(impl)
    receiver, slink = _open_links(pair, client_sends=False)
    receiver.flow(10)
    pair.pump()
    flows = [t for t, _d, link, _i in pair.events() if t == lib.PN_LINK_FLOW and link == slink]
    assert flows
    ods = [impl["send_copy"](slink, tag, BODY, len(BODY)) for tag in (7, 8)]
    assert lib.pn_link_current(slink) != ods[1]  # both complete, the link moved on
    pair.pump()
    incoming = receiver.current
    assert incoming is not None and incoming.tag.encode("latin-1") == _tag(7)
    assert receiver.recv(incoming.pending) == BODY
    receiver.advance()
    incoming.update(Delivery.ACCEPTED)
    incoming.settle()
    second = receiver.current
    assert second is not None and second.tag.encode("latin-1") == _tag(8)
    second.update(Delivery.RELEASED)  # an outcome, not settled
    pair.pump()
    got = {ffi.cast("uintptr_t", d): ints for d, _l, ints in pair.deliveries()}
    first_ints = got[ffi.cast("uintptr_t", ods[0])]
    assert first_ints[1] & accel.SETTLED and first_ints[2] == lib.PN_ACCEPTED
    second_ints = got[ffi.cast("uintptr_t", ods[1])]
    assert not second_ints[1] & accel.SETTLED and second_ints[2] == lib.PN_RELEASED


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_update_settle_gives_the_producer_its_outcome(impl: dict[str, Any]) -> None:
    pair = Pair(impl)
    sender, rlink = _producer(pair)
    d = sender.delivery(_tag(1))
    sender.send(BODY)
    sender.advance()
    pair.pump()
    (rd, _link, (n, _f, _s)), = pair.deliveries()
    impl["recv_whole"](rlink, ffi.new("char[]", n), n)
    impl["update_settle"](rd, lib.PN_ACCEPTED)
    pair.pump()
    assert d.remote_state == Delivery.ACCEPTED and d.settled


def test_the_build_says_which_functions_are_in_use() -> None:
    assert (accel.next_event is accel.PYTHON["next_event"]) == (not accel.COMPILED)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_a_routed_transfer_is_passed_on_with_its_tag(impl: dict[str, Any]) -> None:
    """A producer's link and a consumer's link of one connection stand for the
    two links of a routed pair: the transfer goes from one to the other with
    its tag and bytes, both links move on, and a tag longer than the limit
    is left alone."""
    pair = Pair(impl)
    sender, rlink = _open_links(pair, client_sends=True)
    receiver, slink = _open_links(pair, client_sends=False)
    lib.pn_link_flow(rlink, 10)
    receiver.flow(10)
    pair.pump()
    pair.drain()
    produced = []
    for tag in (b"t" * 8, b"long" * 9):
        produced.append(sender.delivery(tag))
        sender.send(BODY)
        sender.advance()
    pair.pump()
    buffer = ffi.new("char[]", 1000)
    (d1, _l1, (n1, f1, _s1)), (d2, _l2, (n2, _f2, _s2)) = pair.deliveries()
    assert f1 == 0 and n1 == n2 == len(BODY)
    od = impl["relay_whole"](d1, rlink, slink, buffer, n1, 32)
    assert od and lib.pn_link_current(rlink) == d2 and lib.pn_link_current(slink) != od
    assert not impl["relay_whole"](d2, rlink, slink, buffer, n2, 32)  # 36 bytes
    assert lib.pn_link_current(rlink) == d2 and lib.pn_delivery_pending(d2) == n2
    pair.pump()
    got = receiver.current
    assert got is not None and got.tag.encode("latin-1") == b"t" * 8
    assert receiver.recv(got.pending) == BODY
    receiver.advance()
    got.update(Delivery.ACCEPTED)
    got.settle()
    pair.pump()
    outcome = [(d, ints) for d, link, ints in pair.deliveries() if link == slink]
    assert outcome and outcome[-1][1][1] & accel.SETTLED
    assert outcome[-1][1][2] == lib.PN_ACCEPTED
    assert not produced[0].settled
    impl["pass_outcome"](d1, od, lib.PN_ACCEPTED)
    pair.pump()
    assert produced[0].remote_state == Delivery.ACCEPTED and produced[0].settled
    assert not produced[1].settled


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_endpoint_life_events_and_transport_events_are_not_returned(
        impl: dict[str, Any]) -> None:
    """INIT, BOUND, UNBOUND and FINAL events carry nothing from the peer, and
    PN_TRANSPORT only says there is output: none reaches the dispatcher,
    while the peer's opens and closes do."""
    pair = Pair(impl)
    seen = set()
    ssn = pair.client.session()
    ssn.open()
    link = ssn.sender("s")
    link.open()
    pair.pump()
    for t, _d, _link, _ints in pair.events():
        seen.add(t)
        if t == lib.PN_LINK_REMOTE_OPEN:
            lib.pn_link_close(lib.pn_event_link(pair.ptrs[0]))
    link.close()
    pair.client.close()
    pair.pump()
    seen.update(t for t, _d, _link, _ints in pair.events())
    assert lib.PN_LINK_REMOTE_OPEN in seen and lib.PN_CONNECTION_REMOTE_CLOSE in seen
    assert lib.PN_LINK_REMOTE_CLOSE in seen
    assert not seen & (accel.SKIPPED | {lib.PN_TRANSPORT})
