"""Prefix/pattern parse-tree semantics (docs/routing.md#prefixes-and-patterns)."""

from __future__ import annotations

import pytest

from addressing import AddressError, PatternTable, normalize_pattern, prefix_pattern
from addressing.patterns import address_tokens

# The pattern set of qdrouterd's parse-tree unit test; every row below lists
# the patterns matching an address, best first.
PRECEDENCE_PATTERNS = [
    "alpha",
    "bravo",
    "alpha.bravo",
    "bravo.charlie",
    "alpha.bravo.charlie.delta",
    "bravo.charlie.delta.echo",
    "alpha.*",
    "alpha.#",
    "alpha.*.#",
    "#.bravo",
    "*.bravo",
    "*.#.bravo",
    "alpha.*.bravo",
    "alpha.#.bravo",
    "alpha.*.#.bravo",
    "*.bravo.*",
    "#.bravo.#",
]

PRECEDENCE_ROWS = [
    ("alpha", ["alpha", "alpha.#"]),
    ("alpha.zulu", ["alpha.*", "alpha.*.#", "alpha.#"]),
    (
        "alpha.bravo",
        [
            "alpha.bravo",
            "alpha.*",
            "alpha.*.#",
            "alpha.#.bravo",
            "alpha.#",
            "*.bravo",
            "*.#.bravo",
            "#.bravo",
            "#.bravo.#",
        ],
    ),
    ("bravo", ["bravo", "#.bravo", "#.bravo.#"]),
    ("xray.bravo", ["*.bravo", "*.#.bravo", "#.bravo", "#.bravo.#"]),
    ("alpha.bravo.charlie", ["alpha.*.#", "alpha.#", "*.bravo.*", "#.bravo.#"]),
    ("xray.yankee.zulu.bravo", ["*.#.bravo", "#.bravo", "#.bravo.#"]),
    (
        "alpha.bravo.charlie.delta",
        ["alpha.bravo.charlie.delta", "alpha.*.#", "alpha.#", "#.bravo.#"],
    ),
    (
        "alpha.charlie.charlie.bravo",
        [
            "alpha.*.#.bravo",
            "alpha.*.#",
            "alpha.#.bravo",
            "alpha.#",
            "*.#.bravo",
            "#.bravo",
            "#.bravo.#",
        ],
    ),
    ("xray.yankeee.zulu.bravo.alpha.bravo.charlie", ["#.bravo.#"]),
    ("zulu", []),
]


def table_of(patterns: list[str]) -> PatternTable[str]:
    table: PatternTable[str] = PatternTable()
    for pattern in patterns:
        table.add(pattern, pattern)
    return table


@pytest.mark.parametrize(("address", "expected"), PRECEDENCE_ROWS)
def test_precedence_matches_qdrouterd(address: str, expected: list[str]) -> None:
    table = table_of(PRECEDENCE_PATTERNS)
    assert [pattern for pattern, _ in table.matches(address)] == expected
    assert table.match(address) == (expected[0] if expected else None)


@pytest.mark.parametrize(("address", "expected"), PRECEDENCE_ROWS)
def test_precedence_ignores_insertion_order(address: str, expected: list[str]) -> None:
    table = table_of(list(reversed(PRECEDENCE_PATTERNS)))
    assert [pattern for pattern, _ in table.matches(address)] == expected


def test_removing_the_best_match_exposes_the_next() -> None:
    table = table_of(PRECEDENCE_PATTERNS)
    for expected in PRECEDENCE_ROWS[2][1]:
        assert table.match("alpha.bravo") == expected
        table.remove(expected)
    assert table.match("alpha.bravo") is None


@pytest.mark.parametrize(
    ("address", "tokens"),
    [
        ("a.b/c", ["a", "b", "c"]),
        ("./a", ["a"]),
        ("a..b", ["a", "", "b"]),
        ("a.", ["a"]),
        ("a..", ["a", ""]),
        ("", []),
        ("./.", []),
        ("a*.#b", ["a*", "#b"]),
    ],
)
def test_address_tokens(address: str, tokens: list[str]) -> None:
    assert address_tokens(address) == tokens


def test_dot_and_slash_are_interchangeable() -> None:
    table = table_of(["a.b"])
    assert table.match("a/b") == "a.b"
    assert table.match("/a.b") == "a.b"
    table = table_of(["a/*/c"])
    assert table.match("a.x.c") == "a/*/c"


def test_consecutive_separators_make_empty_tokens() -> None:
    table = table_of(["a..b"])
    assert table.match("a..b") == "a..b"
    assert table.match("a/.b") == "a..b"
    assert table.match("a/./b") is None
    assert table.match("a.b") is None
    assert table_of(["a.*.b"]).match("a..b") == "a.*.b"


def test_wildcards_inside_longer_tokens_are_literal() -> None:
    table = table_of(["a*.b#"])
    assert table.match("a*.b#") == "a*.b#"
    assert table.match("ax.b") is None
    assert table.match("a*.bx") is None


def test_star_matches_exactly_one_token() -> None:
    table = table_of(["a.*"])
    assert table.match("a.b") == "a.*"
    assert table.match("a") is None
    assert table.match("a.b.c") is None


def test_glob_matches_zero_or_more_tokens() -> None:
    table = table_of(["a.#.z"])
    assert table.match("a.z") == "a.#.z"
    assert table.match("a.b.c.z") == "a.#.z"
    assert table.match("a.b") is None


def test_glob_prefers_consuming_fewer_tokens() -> None:
    table = table_of(["#.a", "#.a.*"])
    assert [pattern for pattern, _ in table.matches("a.a")] == ["#.a.*", "#.a"]
    table = table_of(["#.b", "#.b.#"])
    assert [pattern for pattern, _ in table.matches("b.b")] == ["#.b.#", "#.b"]


def test_glob_alone_matches_everything_including_empty() -> None:
    table = table_of(["#"])
    for address in ["", "a", "a.b.c", "./"]:
        assert table.match(address) == "#"


def test_prefix_matches_itself_and_below_only() -> None:
    table: PatternTable[str] = PatternTable()
    assert table.add_prefix("my_address", "P") == "my_address/#"
    assert table.match("my_address") == "P"
    assert table.match("my_address.1") == "P"
    assert table.match("my_address/1/2") == "P"
    assert table.match("my_address1") is None
    assert table.match("other") is None


def test_prefix_loses_leading_and_trailing_separators() -> None:
    assert prefix_pattern("/a.b/") == "a.b/#"
    assert prefix_pattern("a.b") == "a.b/#"
    assert prefix_pattern("a.#") == "a.#"


def test_prefix_and_equivalent_pattern_are_one_entry() -> None:
    table: PatternTable[str] = PatternTable()
    table.add_prefix("a.b", "prefix")
    with pytest.raises(AddressError, match="already exists"):
        table.add("a.b.#", "pattern")
    with pytest.raises(AddressError, match="already exists"):
        table.add("a/b/#", "pattern")
    table.remove("a.b.#")
    assert len(table) == 0
    table.add("a.b.#", "pattern")
    with pytest.raises(AddressError, match="already exists"):
        table.add_prefix("a/b", "prefix")


@pytest.mark.parametrize(
    ("pattern", "normalised"),
    [
        ("#.#", "#"),
        ("#.#.#", "#"),
        ("a.#.#.b", "a.#.b"),
        ("a/#.#/b", "a/#/b"),
        ("#.*", "*.#"),
        ("#.*.*", "*.*.#"),
        ("#.#.*", "*.#"),
        ("a.#.*.#", "a.*.#"),
        ("#.*.#.*", "*.*.#"),
        ("*.#.*", "*.*.#"),
        ("a.*.b", "a.*.b"),
        ("/a.b/", "a.b"),
        ("a.b..", "a.b"),
        ("a..b", "a..b"),
        ("a#.#", "a#.#"),
    ],
)
def test_normalisation(pattern: str, normalised: str) -> None:
    assert normalize_pattern(pattern) == normalised
    table: PatternTable[int] = PatternTable()
    assert table.add(pattern, 1) == normalised
    assert list(table) == [(normalised, 1)]


def test_duplicates_are_detected_after_normalisation() -> None:
    table = table_of(["a.*.#"])
    for duplicate in ["a.#.*", "a.#.#.*", "/a/*/#/", "a.*.#.#"]:
        with pytest.raises(AddressError, match="already exists"):
            table.add(duplicate, duplicate)
    assert len(table) == 1


@pytest.mark.parametrize("text", ["", ".", "/", "././/"])
def test_no_tokens_is_refused(text: str) -> None:
    table: PatternTable[str] = PatternTable()
    with pytest.raises(AddressError, match="pattern invalid - no tokens"):
        table.add(text, "x")
    with pytest.raises(AddressError, match="prefix invalid - no tokens"):
        table.add_prefix(text, "x")


def test_remove_returns_the_value_and_prunes() -> None:
    table = table_of(["a.b.c", "a.b"])
    assert table.remove("a/b/c") == "a.b.c"
    assert table.match("a.b.c") is None
    assert table.match("a.b") == "a.b"
    assert table.remove("a.b") == "a.b"
    assert len(table) == 0
    assert table.match("a.b") is None
    table.add("a.b.c", "again")
    assert table.match("a.b.c") == "again"


def test_remove_of_an_unknown_pattern_is_refused() -> None:
    table = table_of(["a.b"])
    with pytest.raises(AddressError, match="not found"):
        table.remove("a.c")
    with pytest.raises(AddressError, match="not found"):
        table.remove("a")  # an interior node is not an entry
    with pytest.raises(AddressError, match="no tokens"):
        table.remove("")


def test_len_iter_contains_get() -> None:
    table = table_of(["b.#", "a.*"])
    table.add_prefix("c", "C")
    assert len(table) == 3
    assert list(table) == [("b.#", "b.#"), ("a.*", "a.*"), ("c/#", "C")]
    assert "b/#" in table
    assert "c.#" in table
    assert "c" not in table
    assert "" not in table
    assert 3 not in table
    assert table.get("c.#") == "C"
    assert table.get("zzz") is None
    assert table.get("") is None


def test_values_may_be_any_type() -> None:
    table: PatternTable[tuple[int, int]] = PatternTable()
    table.add("a", (1, 2))
    assert table.match("a") == (1, 2)


def test_ten_thousand_entries() -> None:
    table: PatternTable[int] = PatternTable()
    for index in range(10_000):
        table.add_prefix(f"service.{index % 100}.queue{index}", index)
    table.add("service.*.#", -1)
    assert len(table) == 10_001
    assert table.match("service.7.queue4507.x") == 4507
    assert table.match("service.7.queue4507") == 4507
    assert table.match("service.7.unknown") == -1
    assert table.match("other") is None


def test_long_addresses_do_not_exhaust_the_stack() -> None:
    table = table_of(["#.z", "a.#"])
    address = ".".join(["y"] * 5000 + ["z"])
    assert table.match(address) == "#.z"
    assert table.match("a." + address) == "a.#"


def test_many_globs_stay_polynomial() -> None:
    table = table_of(["#.a.#.a.#.a.#.a.#.b"])
    address = ".".join(["a"] * 300)
    assert table.match(address) is None
    assert table.match(address + ".b") == "#.a.#.a.#.a.#.a.#.b"


def test_repr_is_short() -> None:
    assert repr(table_of(["a", "b"])) == "<PatternTable of 2 patterns>"
