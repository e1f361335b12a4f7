"""Exchanges' binding keys: which bindings a subject matches."""

from __future__ import annotations

import re

import pytest

from addressing.errors import AddressError
from addressing.exchanges import (
    Binding,
    BindingKeys,
    BindingSpec,
    ExchangeSpec,
    ExchangeTable,
    MatchMethod,
    NextHop,
    key_tokens,
)


def keys(method: MatchMethod, *pairs: tuple[str | None, str]) -> BindingKeys[str]:
    table: BindingKeys[str] = BindingKeys(method)
    for key, value in pairs:
        table.add(key, value)
    return table


def test_amqp_keys_match_one_token_with_a_star_and_any_with_a_hash() -> None:
    table = keys(MatchMethod.AMQP, ("a.*", "one-after-a"), ("a.b", "exactly-a.b"),
                 ("a.c.#", "a.c-and-more"), ("a.b.c", "exactly-a.b.c"), ("#.z", "ends-in-z"))
    assert table.match("a.b") == ["one-after-a", "exactly-a.b"]
    assert table.match("a.c") == ["one-after-a", "a.c-and-more"]
    assert table.match("a.c.d.e") == ["a.c-and-more"]
    assert table.match("a.b.c") == ["exactly-a.b.c"]
    assert table.match("a") == []
    assert table.match("z") == ["ends-in-z"], "'#' matches no token too"
    assert table.match("a.c.z") == ["a.c-and-more", "ends-in-z"]
    # '/' is no separator for the amqp method, '.' none for mqtt.
    assert table.match("a/b") == []
    assert keys(MatchMethod.MQTT, ("a/+", "v")).match("a.b") == []


def test_mqtt_keys_match_one_token_with_a_plus_and_a_trailing_hash_any() -> None:
    table = keys(MatchMethod.MQTT, ("a/b", "exactly"), ("a/+", "one-after-a"),
                 ("c/#", "c-and-more"), ("c/b", "c/b"))
    assert table.match("a/b") == ["exactly", "one-after-a"]
    assert table.match("a/c") == ["one-after-a"]
    assert table.match("c") == ["c-and-more"]
    assert table.match("c/b") == ["c-and-more", "c/b"]
    assert table.match("a/b/c") == []
    with pytest.raises(AddressError, match="'#' may only be the last token"):
        table.add("x/#/z", "refused")
    assert len(table) == 4


def test_a_binding_without_a_key_matches_every_subject_but_none() -> None:
    for method in MatchMethod:
        table = keys(method, ("pattern", "keyed"), (None, "all"), (None, "all-too"))
        assert table.match("nope") == ["all", "all-too"]
        assert table.match("pattern") == ["keyed", "all", "all-too"]
        assert table.match("") == ["all", "all-too"]
        assert table.match(None) == [], "a message without a subject matches nothing"


def test_a_value_under_keys_that_both_match_comes_once_in_the_order_added() -> None:
    table = keys(MatchMethod.AMQP, ("a.b.*.#", "first"), ("a.*.c.#", "second"),
                 ("#", "third"), ("a.#.#", "fourth"))
    assert table.match("a.b.c") == ["first", "second", "third", "fourth"]
    assert table.match("a.b.c.d.e") == ["first", "second", "third", "fourth"]
    same = BindingKeys[str](MatchMethod.AMQP)
    value = "shared"
    same.add("a.*", value)
    same.add("*.b", value)
    assert same.match("a.b") == ["shared", "shared"], "two bindings, one value each"


def test_keys_that_match_the_same_subjects_have_the_same_tokens() -> None:
    assert key_tokens(MatchMethod.AMQP, "a.#.#.b") == ("a", "#", "b")
    assert key_tokens(MatchMethod.AMQP, "#.*") == ("*", "#")
    assert key_tokens(MatchMethod.MQTT, "a/#") == ("a", "#")
    assert key_tokens(MatchMethod.AMQP, "a..b") == ("a", "", "b")


def test_removing_a_binding_leaves_the_others_and_prunes_the_trie() -> None:
    table = keys(MatchMethod.AMQP, ("a.b", "x"), ("a.b.c", "y"), ("a.#", "z"))
    assert table.remove("a.b", "x")
    assert not table.remove("a.b", "x"), "already gone"
    assert not table.remove("q.r", "x"), "never there"
    assert table.match("a.b") == ["z"]
    assert table.match("a.b.c") == ["y", "z"]
    assert table.remove("a.b.c", "y") and table.remove("a.#", "z")
    assert len(table) == 0 and not list(table.values())
    assert table.match("a.b.c") == []
    assert not table._root.children, "nothing left in the trie"


# --- the exchanges of a router ------------------------------------------------


def table_of(*exchanges: ExchangeSpec) -> ExchangeTable:
    table = ExchangeTable()
    for n, spec in enumerate(exchanges):
        table.add_exchange(spec, f"x{n}")
    return table


def bind(table: ExchangeTable, exchange: str, key: str | None, hop: str, phase: int = 0,
         name: str | None = None) -> Binding:
    return table.add_binding(BindingSpec(name=name, exchange_name=exchange, binding_key=key,
                                         next_hop_address=hop, next_hop_phase=phase),
                             f"b{key}{hop}")[1]


def test_a_subject_goes_once_to_each_next_hop_and_counts_every_matching_binding() -> None:
    table = table_of(ExchangeSpec(name="e", address="E"))
    b1 = bind(table, "e", "a.*", "hop1")
    b2 = bind(table, "e", "a.b", "hop1")
    b3 = bind(table, "e", "a.b", "hop1", phase=3)
    b4 = bind(table, "e", "#", "hop2")
    exchange = table.exchanges["e"]
    assert exchange.next_hops("a.b") == [NextHop("hop1"), NextHop("hop1", 3), NextHop("hop2")]
    assert exchange.next_hops("z") == [NextHop("hop2")]
    assert exchange.next_hops(None) == []
    assert [b.matched for b in (b1, b2, b3, b4)] == [1, 1, 1, 2]


def test_an_exchange_serves_only_with_a_binding_or_an_alternate() -> None:
    table = table_of(ExchangeSpec(name="plain", address="P"),
                     ExchangeSpec(name="alt", address="A", alternate_address="elsewhere"))
    assert not table.exchanges["plain"].serves
    assert table.exchanges["alt"].serves
    binding = bind(table, "plain", "k", "there")
    assert table.exchanges["plain"].serves
    assert table.remove_binding(binding) is table.exchanges["plain"]
    assert not table.exchanges["plain"].serves
    assert table.exchanges["plain"].next_hops("k") == []
    assert table.remove_binding(binding) is None, "removed once"


@pytest.mark.parametrize(("spec", "message"), [
    (ExchangeSpec(name="e", address="other"), "duplicate exchange name 'e'"),
    (ExchangeSpec(name="f", address="E", phase=2),
     "duplicate exchange address 'E': exchange 'e' has it (at phase 0)"),
])
def test_names_and_addresses_of_exchanges_are_unique(spec: ExchangeSpec, message: str) -> None:
    table = table_of(ExchangeSpec(name="e", address="E"))
    with pytest.raises(AddressError, match=re.escape(message)):
        table.add_exchange(spec, "again")
    assert list(table.exchanges) == ["e"]


def test_specs_refuse_what_qdrouterd_refuses() -> None:
    with pytest.raises(AddressError, match="an exchange needs a name"):
        ExchangeSpec(name="", address="E")
    with pytest.raises(AddressError, match="address is mandatory"):
        ExchangeSpec(name="e", address="")
    with pytest.raises(AddressError, match="phase must be between 0 and 9, got 10"):
        ExchangeSpec(name="e", address="E", phase=10)
    with pytest.raises(AddressError, match="needs a nextHopAddress"):
        BindingSpec(exchange_name="e", next_hop_address="")
    with pytest.raises(AddressError, match="next_hop_phase: phase must be between"):
        BindingSpec(exchange_name="e", next_hop_address="h", next_hop_phase=-1)


def test_bindings_refuse_an_unknown_exchange_a_duplicate_and_a_bad_key() -> None:
    table = table_of(ExchangeSpec(name="m", address="M", match_method=MatchMethod.MQTT))
    bind(table, "m", "a/#", "hop", name="first")
    for key, hop, name, message in [
        ("x", "hop", "first", "exchange 'm' has a binding named 'first' already"),
        ("a/#", "hop", "second", "exchange 'm' binds key 'a/#' to 'hop' (phase 0) already"),
        ("x/#/z", "hop", None, "in an MQTT key, '#' may only be the last token"),
    ]:
        with pytest.raises(AddressError, match=re.escape(message)):
            bind(table, "m", key, hop, name=name)
    with pytest.raises(AddressError, match="no exchange named 'nope'"):
        bind(table, "nope", "k", "hop")
    assert len(table.exchanges["m"].bindings) == 1
    bind(table, "m", "a/#", "hop", phase=1)  # another next hop: another phase


def test_no_binding_or_alternate_may_lead_a_message_back_to_its_exchange() -> None:
    table = table_of(ExchangeSpec(name="one", address="X1"),
                     ExchangeSpec(name="two", address="X2"),
                     ExchangeSpec(name="three", address="X3", alternate_address="X1"))
    with pytest.raises(AddressError, match="would send its messages back to 'X1'"):
        bind(table, "one", "k", "X1")
    bind(table, "one", "k", "X1", phase=1)  # another phase is another address
    bind(table, "one", "k", "X2")
    # X2 -> X3 -(alternate)-> X1 -> X2 would be a circle.
    with pytest.raises(AddressError, match="the binding of exchange 'two' would send"):
        bind(table, "two", None, "X3")
    with pytest.raises(AddressError, match="its alternate of exchange 'four'"):
        table.add_exchange(ExchangeSpec(name="four", address="X0", alternate_address="X0"), "4")
    table.remove_exchange(table.exchanges["three"])
    bind(table, "two", None, "X3")  # X3 leads nowhere now
    with pytest.raises(AddressError, match="the binding of exchange 'two' would send"):
        bind(table, "two", "z", "X1")
