"""Exchanges' binding keys: which bindings a subject matches."""

from __future__ import annotations

import pytest

from addressing.errors import AddressError
from addressing.exchanges import BindingKeys, MatchMethod, key_tokens


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
