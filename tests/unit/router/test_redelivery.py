"""Re-forwarding decisions and the message forwarded again
(docs/routing.md#re-forwarding-released-deliveries)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st
from proton import Message, symbol, ulong

from addressing import choose_balanced
from router.core.amqp import PeerProtocolError
from router.core.amqp.types import Symbol
from router.core.amqp.values import decode, encode
from router.core.redelivery import choose_again, may_redeliver, redelivered_copy
from router.core.settlement import ACCEPTED, MODIFIED, REJECTED, RELEASED

DECLARED = 0x33  # a transactional state: no outcome


@dataclass(eq=False)
class Dest:
    """A destination as the choice sees it: a load, a capacity, and for
    the simulation how it answers."""

    name: str
    load: int = 0
    capacity: int = 10
    answer: tuple[int, bool] = (ACCEPTED, False)  # (state, undeliverable-here)
    link: object = field(default_factory=object)


def _via(remote: Dest) -> object:
    return remote.link


answers = st.sampled_from([(ACCEPTED, False), (REJECTED, False), (RELEASED, False),
                           (MODIFIED, False), (MODIFIED, True), (DECLARED, False)])


@st.composite
def destinations(draw: st.DrawFn, prefix: str, max_size: int = 5) -> list[Dest]:
    count = draw(st.integers(0, max_size))
    return [Dest(f"{prefix}{i}", load=draw(st.integers(0, 12)),
                 capacity=draw(st.integers(1, 10)), answer=draw(answers))
            for i in range(count)]


@given(st.sampled_from([ACCEPTED, REJECTED, RELEASED, MODIFIED, DECLARED, 0]), st.booleans(),
       st.integers(0, 5), st.integers(0, 5))
def test_only_a_release_or_a_modified_that_allows_it_goes_again_within_the_limit(
        state: int, undeliverable: bool, attempts: int, limit: int) -> None:
    again = may_redeliver(state, undeliverable, attempts, limit)
    if again:
        assert attempts < limit
        assert state == RELEASED or (state == MODIFIED and not undeliverable)
    elif attempts < limit:
        assert state not in (RELEASED, MODIFIED) or (state == MODIFIED and undeliverable)


def test_limit_zero_never_goes_again() -> None:
    assert not may_redeliver(RELEASED, False, 0, 0)
    assert not may_redeliver(MODIFIED, False, 0, 0)


@given(destinations("c"), destinations("r"), st.booleans(), st.data())
def test_the_choice_never_returns_what_was_tried_and_finds_what_was_not(
        consumers: list[Dest], remotes: list[Dest], closest: bool, data: st.DataObject) -> None:
    everything = consumers + remotes
    tried_dests = data.draw(st.lists(st.sampled_from(everything), unique=True)) \
        if everything else []
    tried = {d.link if d in remotes else d for d in tried_dests}
    before = list(consumers)
    chosen = choose_again(closest, consumers, remotes, tried, _via)
    assert consumers == before, "the record's round-robin order is not the choice's to change"
    left_local = [c for c in consumers if c not in tried]
    left_far = [r for r in remotes if r.link not in tried]
    if not left_local and not left_far:
        assert chosen is None
        return
    assert chosen is not None
    assert chosen in left_local or chosen in left_far
    if closest:
        # The next local consumer in order, else the first router left.
        assert chosen is (left_local[0] if left_local else left_far[0])
    else:
        assert chosen is choose_balanced(list(left_local), left_far)


def test_routers_behind_one_next_hop_share_its_link_and_are_tried_together() -> None:
    hop = object()
    b, c = Dest("B", link=hop), Dest("C", link=hop, load=1)
    d = Dest("D")
    assert choose_again(False, [], [b, c, d], {hop}, _via) is d
    assert choose_again(True, [], [b, c], {hop}, _via) is None


def test_a_router_with_no_link_now_is_not_chosen() -> None:
    b = Dest("B")
    assert choose_again(False, [], [b], set(), lambda r: None) is None


@given(destinations("c", 6), st.integers(0, 6), st.booleans())
def test_a_delivery_visits_each_destination_at_most_once_and_ends_with_one_outcome(
        consumers: list[Dest], limit: int, closest: bool) -> None:
    """Simulate one delivery through the decisions: the first destination
    as for a new message, then what ``may_redeliver`` and ``choose_again``
    say after each answer."""
    first = consumers[0] if closest and consumers else choose_balanced(list(consumers))
    if first is None:
        return
    visits = [first]
    attempts = 0
    state, undeliverable = first.answer
    while may_redeliver(state, undeliverable, attempts, limit):
        nxt = choose_again(closest, consumers, [], set(visits), _via)
        if nxt is None:
            break
        attempts += 1
        visits.append(nxt)
        state, undeliverable = nxt.answer
    assert len(visits) == len(set(visits)), "a destination got the delivery twice"
    assert attempts <= limit
    assert len(visits) == attempts + 1
    # The producer's outcome is the last answer; it is a give-back only when
    # the limit or the destinations ran out, or the consumer said not here.
    gave_back = state == RELEASED or (state == MODIFIED and not undeliverable)
    if gave_back:
        assert attempts == limit or len(visits) == len(consumers)
    # Every destination before the last gave the message back.
    for dest in visits[:-1]:
        s, u = dest.answer
        assert s == RELEASED or (s == MODIFIED and not u)


# -- the message forwarded again --------------------------------------------------------


def _decode(data: bytes) -> Message:
    message = Message()
    message.decode(data)
    return message


def test_a_failed_delivery_counts_one_more_and_is_not_first_acquired() -> None:
    data = Message(body="b", durable=True, priority=6, ttl=5.0, first_acquirer=True,
                   delivery_count=2, address="q", properties={"k": "v"}).encode()
    again = _decode(redelivered_copy(data, True, None))
    assert again.delivery_count == 3 and not again.first_acquirer
    assert again.durable and again.priority == 6 and again.ttl == 5.0
    assert again.address == "q" and again.properties == {"k": "v"} and again.body == "b"


def test_a_message_without_a_header_gets_one() -> None:
    encoded = bytes(Message(body=[1, 2], subject="s").encode())
    _, header_end = decode(encoded)  # proton always writes one: cut it
    data = encoded[header_end:]
    assert data[:3] != b"\x00\x53\x70"
    again = _decode(redelivered_copy(data, True, None))
    assert again.delivery_count == 1 and again.subject == "s" and again.body == [1, 2]


def test_a_release_forwards_the_message_as_it_was() -> None:
    data = Message(body="b", delivery_count=4).encode()
    assert redelivered_copy(data, False, None) is data
    assert redelivered_copy(data, False, encode({})) is data


def test_modified_annotations_are_merged_the_new_value_winning() -> None:
    data = Message(body="b", annotations={symbol("a"): 1, symbol("b"): "old"},
                   instructions={symbol("da"): 9}).encode()
    given_ = encode({Symbol("b"): "new", Symbol("c"): ulong(3)})
    again = _decode(redelivered_copy(data, False, given_))
    assert again.annotations == {symbol("a"): 1, symbol("b"): "new", symbol("c"): 3}
    assert again.instructions == {symbol("da"): 9}  # delivery annotations untouched
    assert again.delivery_count == 0


def test_annotations_are_added_where_there_were_none_and_with_a_failure() -> None:
    data = Message(body="b", delivery_count=1, address="q").encode()
    again = _decode(redelivered_copy(data, True, encode({Symbol("why"): "timeout"})))
    assert again.annotations == {symbol("why"): "timeout"}
    assert again.delivery_count == 2 and again.address == "q"


def test_a_consumer_cannot_set_router_annotations() -> None:
    data = Message(body="b", annotations={symbol("x-opt-qd.to"): "q"}).encode()
    given_ = encode({Symbol("x-opt-qd.to"): "elsewhere", Symbol("x-opt-qd.trace"): ["0/X"],
                     Symbol("mine"): 1})
    again = _decode(redelivered_copy(data, False, given_))
    assert again.annotations == {symbol("x-opt-qd.to"): "q", symbol("mine"): 1}


def test_annotations_that_are_not_a_map_are_refused() -> None:
    data = Message(body="b").encode()
    with pytest.raises(PeerProtocolError):
        redelivered_copy(data, False, encode([1, 2]))


headers = st.fixed_dictionaries({}, optional={
    "durable": st.booleans(), "priority": st.integers(0, 9),
    "delivery_count": st.integers(0, 2**31), "first_acquirer": st.booleans()})
keys = st.text("abcxyz-.", min_size=1, max_size=8).map(symbol)
values = st.one_of(st.integers(-2**31, 2**31 - 1), st.text(max_size=10), st.booleans())


@given(headers, st.dictionaries(keys, values, max_size=4),
       st.dictionaries(keys, values, max_size=4), st.booleans(),
       st.one_of(st.text(max_size=50), st.binary(max_size=50)))
def test_only_the_count_and_the_annotations_change(
        header: dict[str, object], existing: dict[symbol, object],
        extra: dict[symbol, object], failed: bool, body: object) -> None:
    original = Message(body=body, address="q", annotations=existing or None, **header)
    data = original.encode()
    given_ = encode({Symbol(k): v for k, v in extra.items()}) if extra else None
    again = _decode(redelivered_copy(data, failed, given_))
    assert again.body == body and again.address == "q"
    assert again.durable == original.durable and again.priority == original.priority
    assert again.delivery_count == original.delivery_count + (1 if failed else 0)
    if failed:
        assert not again.first_acquirer
    else:
        assert again.first_acquirer == original.first_acquirer
    merged = dict(existing)
    merged.update({k: v for k, v in extra.items() if not k.startswith("x-opt-qd")})
    assert dict(again.annotations or {}) == merged
