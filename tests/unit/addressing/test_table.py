"""Configured-address table: lookup, treatment, add/remove, cache."""

from __future__ import annotations

import pytest

from addressing import AddressError, AddressSpec, AddressTable, Distribution


def test_lookup_uses_the_best_match() -> None:
    table = AddressTable()
    broad = AddressSpec(name="broad", prefix="orders", distribution=Distribution.CLOSEST)
    narrow = AddressSpec(name="narrow", pattern="orders.*.eu", distribution=Distribution.MULTICAST)
    table.add(broad)
    table.add(narrow)
    assert table.lookup("orders.x.eu") is narrow
    assert table.lookup("orders.x.us") is broad
    assert table.lookup("orders") is broad
    assert table.lookup("orders2") is None


def test_lookup_strips_scheme_authority_and_trailing_separator() -> None:
    table = AddressTable()
    spec = AddressSpec(pattern="a.b")
    table.add(spec)
    assert table.lookup("amqp://host:5672/a.b") is spec
    assert table.lookup("amqp:/a/b/") is spec
    assert table.lookup("//host/a.b") is spec
    assert table.lookup("/a.b") is spec


def test_local_and_topo_forms_are_matched_whole() -> None:
    table = AddressTable()
    spec = AddressSpec(prefix="_topo/0")
    table.add(spec)
    assert table.lookup("amqp:/_topo/0/Router.B/temp.x") is spec
    assert table.lookup("temp.x") is None


def test_add_returns_the_stored_pattern() -> None:
    table = AddressTable()
    assert table.add(AddressSpec(prefix="/a.b/")) == "a.b/#"
    assert table.add(AddressSpec(pattern="x.#.*")) == "x.*.#"
    assert [pattern for pattern, _ in table] == ["a.b/#", "x.*.#"]
    assert len(table) == 2


def test_prefix_and_equivalent_pattern_conflict() -> None:
    table = AddressTable()
    table.add(AddressSpec(name="p", prefix="a.b"))
    with pytest.raises(AddressError, match="already exists"):
        table.add(AddressSpec(name="q", pattern="a/b/#"))
    assert len(table) == 1
    # the failed add did not reserve the name
    table.add(AddressSpec(name="q", pattern="a.c"))


def test_names_must_be_unique() -> None:
    table = AddressTable()
    table.add(AddressSpec(name="n", prefix="a"))
    with pytest.raises(AddressError, match="name conflicts"):
        table.add(AddressSpec(name="n", prefix="b"))
    table.add(AddressSpec(prefix="c"))
    table.add(AddressSpec(prefix="d"))


def test_remove_by_name() -> None:
    table = AddressTable()
    spec = AddressSpec(name="orders", prefix="orders")
    table.add(spec)
    assert table.remove("orders") is spec
    assert table.lookup("orders") is None
    assert len(table) == 0
    table.add(AddressSpec(name="orders", prefix="orders"))


def test_remove_by_pattern_in_any_spelling() -> None:
    table = AddressTable()
    spec = AddressSpec(name="n", prefix="a.b")
    table.add(spec)
    assert table.remove("a/b/#") is spec
    table.add(spec)  # the name was released too
    assert table.remove("a.b.#") is spec


def test_a_name_wins_over_a_pattern_with_the_same_text() -> None:
    table = AddressTable()
    named = AddressSpec(name="x.y", prefix="q")
    literal = AddressSpec(pattern="x.y")
    table.add(named)
    table.add(literal)
    assert table.remove("x.y") is named
    assert table.remove("x.y") is literal


def test_remove_unknown_is_refused() -> None:
    table = AddressTable()
    table.add(AddressSpec(prefix="a"))
    with pytest.raises(AddressError, match="no address with name or pattern 'a'"):
        table.remove("a")  # the prefix's pattern is 'a/#'
    with pytest.raises(AddressError, match="no address"):
        table.remove("")


def test_cache_is_invalidated_by_add_and_remove() -> None:
    table = AddressTable()
    assert table.lookup("a.b") is None
    spec = AddressSpec(name="s", prefix="a")
    table.add(spec)
    assert table.lookup("a.b") is spec
    better = AddressSpec(pattern="a.b")
    table.add(better)
    assert table.lookup("a.b") is better
    table.remove("a.b")
    assert table.lookup("a.b") is spec
    table.remove("s")
    assert table.lookup("a.b") is None


def test_cache_is_bounded() -> None:
    table = AddressTable(cache_size=3)
    spec = AddressSpec(prefix="a")
    table.add(spec)
    for index in range(10):
        assert table.lookup(f"a.{index}") is spec
        assert table.lookup(f"b.{index}") is None
    assert len(table._cache) == 3
    # the newest entries are the ones kept
    assert set(table._cache) == {"b.8", "a.9", "b.9"}


def test_a_forgotten_lookup_is_dropped_and_asked_again() -> None:
    table = AddressTable()
    spec = AddressSpec(prefix="a")
    table.add(spec)
    assert table.lookup("a.1") is spec and table.lookup("a.2") is spec
    assert table.cached == 2
    table.forget("a.1")
    table.forget("never.asked")
    assert table.cached == 1
    assert table.lookup("a.1") is spec
    assert table.cached == 2


def test_repr_is_short() -> None:
    table = AddressTable()
    table.add(AddressSpec(prefix="a"))
    assert repr(table) == "<AddressTable of 1 addresses>"
