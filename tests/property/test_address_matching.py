"""Address matching agrees with a brute-force matcher; keys never raise.

The brute-force side is written independently of ``addressing.patterns``:
its own tokeniser, a recursive matcher that lists every way a pattern can
match, and the precedence rule stated as "compare candidates position by
position: literal beats ``*`` beats ``#``, and ``#`` consuming fewer tokens
beats ``#`` consuming more; a match that ends earlier beats one that goes
on" (lexicographic order of the step sequences below).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from addressing import (
    AddressError,
    PatternTable,
    classify,
    normalize_pattern,
    parse_key,
    routing_key,
    strip_address,
)

LITERAL, STAR, GLOB = 0, 1, 2


def tokens_of(text: str) -> list[str]:
    """Tokenise like qdrouterd's token iterator, one character at a time."""
    index = 0
    while index < len(text) and text[index] in "./":
        index += 1
    tokens: list[str] = []
    start = index
    for position in range(index, len(text)):
        if text[position] in "./":
            tokens.append(text[start:position])
            start = position + 1
    if start < len(text):
        tokens.append(text[start:])
    return tokens


def alignments(pattern: list[str], address: list[str]) -> Iterator[list[int]]:
    """Every way ``pattern`` matches ``address``, as step sequences.

    A step is LITERAL, STAR, or GLOB + k for a ``#`` consuming k tokens.
    """
    if not pattern:
        if not address:
            yield []
        return
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        for taken in range(len(address) + 1):
            for tail in alignments(rest, address[taken:]):
                yield [GLOB + taken, *tail]
    elif not address:
        return
    elif head == "*":
        for tail in alignments(rest, address[1:]):
            yield [STAR, *tail]
    elif head == address[0]:
        for tail in alignments(rest, address[1:]):
            yield [LITERAL, *tail]


def brute_force_matches(patterns: list[str], address: str) -> list[str]:
    """The matching stored patterns, best first."""
    ranked: list[tuple[list[int], str]] = []
    for pattern in patterns:
        ways = list(alignments(tokens_of(pattern), tokens_of(address)))
        if ways:
            ranked.append((min(ways), pattern))
    ranked.sort()
    return [pattern for _, pattern in ranked]


# Few distinct literals, so that patterns overlap and addresses repeat
# tokens (where the number of tokens a '#' takes decides the winner).
PATTERN_TOKENS = st.sampled_from(["a", "a", "b", "*", "*", "#", "#", "", "a*"])
ADDRESS_TOKENS = st.sampled_from(["a", "a", "b", "", "*", "#"])
LITERAL_TOKENS = st.sampled_from(["a", "b", "c", "", "a*", "#b"])


@st.composite
def dotted(draw: st.DrawFn, tokens: st.SearchStrategy[str], max_size: int = 5) -> str:
    parts = draw(st.lists(tokens, max_size=max_size))
    text = draw(st.sampled_from(["", ".", "/", "./"]))
    for index, part in enumerate(parts):
        if index:
            text += draw(st.sampled_from([".", "/"]))
        text += part
    return text + draw(st.sampled_from(["", "", ".", "/"]))


def canonical(pattern: str) -> str:
    """One spelling per entry: ``a/b.#`` and ``a.b/#`` are the same entry."""
    return ".".join(tokens_of(normalize_pattern(pattern)))


def build(raw_patterns: list[str]) -> PatternTable[str]:
    """A table whose values are the canonical spellings of the entries."""
    table: PatternTable[str] = PatternTable()
    for raw in raw_patterns:
        # no tokens, or a duplicate after normalisation
        with contextlib.suppress(AddressError):
            table.add(raw, canonical(raw))
    return table


def values(pairs: list[tuple[str, str]]) -> list[str]:
    return [value for _, value in pairs]


@settings(max_examples=400)
@given(
    raw_patterns=st.lists(dotted(PATTERN_TOKENS), max_size=12),
    addresses=st.lists(dotted(ADDRESS_TOKENS, max_size=6), min_size=1, max_size=5),
)
def test_matching_agrees_with_brute_force(raw_patterns: list[str], addresses: list[str]) -> None:
    table = build(raw_patterns)
    stored = [pattern for pattern, _ in table]
    for address in addresses:
        expected = brute_force_matches(stored, address)
        assert [pattern for pattern, _ in table.matches(address)] == expected
        assert table.match(address) == (canonical(expected[0]) if expected else None)


@settings(max_examples=300)
@given(
    raw_patterns=st.lists(dotted(st.sampled_from(["a", "*", "#"]), max_size=4), max_size=15),
    address=dotted(st.sampled_from(["a", "a", "b"]), max_size=5),
)
def test_dense_tables_agree_with_brute_force(raw_patterns: list[str], address: str) -> None:
    table = build(raw_patterns)
    expected = brute_force_matches([pattern for pattern, _ in table], address)
    assert [pattern for pattern, _ in table.matches(address)] == expected


@given(
    raw_patterns=st.lists(dotted(PATTERN_TOKENS), max_size=10),
    data=st.data(),
    addresses=st.lists(dotted(ADDRESS_TOKENS, max_size=6), min_size=1, max_size=5),
)
def test_results_ignore_insertion_order(
    raw_patterns: list[str], data: st.DataObject, addresses: list[str]
) -> None:
    shuffled = data.draw(st.permutations(raw_patterns))
    first, second = build(raw_patterns), build(shuffled)
    # The stored spelling is the first one added; the entries are the same.
    assert sorted(values(list(first))) == sorted(values(list(second)))
    for address in addresses:
        assert values(first.matches(address)) == values(second.matches(address))
        assert first.match(address) == second.match(address)


@given(pattern=dotted(LITERAL_TOKENS), address=dotted(ADDRESS_TOKENS, max_size=6))
def test_a_wildcard_free_pattern_matches_only_itself(pattern: str, address: str) -> None:
    table = build([pattern])
    for stored, _ in table:
        assert table.match(stored) == canonical(stored)
        matched = table.match(address) is not None
        assert matched == (tokens_of(address) == tokens_of(stored))


@given(pattern=dotted(PATTERN_TOKENS), address=dotted(ADDRESS_TOKENS, max_size=6))
def test_normalisation_keeps_the_set_of_matched_addresses(pattern: str, address: str) -> None:
    try:
        normalised = normalize_pattern(pattern)
    except AddressError:
        return
    stripped = pattern.strip("./")
    before = any(alignments(tokens_of(stripped), tokens_of(address)))
    after = any(alignments(tokens_of(normalised), tokens_of(address)))
    assert before == after


@given(prefix=dotted(PATTERN_TOKENS), address=dotted(ADDRESS_TOKENS, max_size=6))
def test_a_prefix_matches_itself_and_what_lies_below(prefix: str, address: str) -> None:
    table: PatternTable[str] = PatternTable()
    try:
        table.add_prefix(prefix, "P")
    except AddressError:
        return
    prefix_tokens = tokens_of(prefix.strip("./"))
    address_tokens = tokens_of(address)
    if "*" not in prefix_tokens and "#" not in prefix_tokens:
        below = address_tokens[: len(prefix_tokens)] == prefix_tokens
        assert (table.match(address) == "P") == below


@given(address=st.text(), router_id=st.text(), phase=st.integers(0, 9), flags=st.booleans())
def test_classify_and_strip_never_raise(
    address: str, router_id: str, phase: int, flags: bool
) -> None:
    strip_address(address)
    key = classify(address, router_id=router_id, phase=phase, fallback=flags, edge_mode=flags)
    assert parse_key(key.key) == key
    assert (
        routing_key(address, router_id=router_id, phase=phase, fallback=flags, edge_mode=flags)
        == key.key
    )


@given(address=st.text(alphabet=st.sampled_from("ab./:_#*"), max_size=30))
def test_strip_address_keeps_a_tail_less_one_separator(address: str) -> None:
    trimmed = address[:-1] if address.endswith((".", "/")) else address
    assert trimmed.endswith(strip_address(address))


@given(patterns=st.lists(st.text(max_size=12), max_size=8), address=st.text(max_size=40))
def test_matching_never_raises_on_arbitrary_text(patterns: list[str], address: str) -> None:
    table = build(patterns)
    table.match(address)
    table.matches(address)
