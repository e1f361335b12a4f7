"""An exchange's binding keys match what a matcher written from the rules
matches: one token for the one-token wildcard, any number for '#'."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from addressing.errors import AddressError
from addressing.exchanges import BindingKeys, MatchMethod


def matches(key: list[str], subject: list[str], one: str) -> bool:
    """The rules, token by token, with no trie and no rewriting of keys."""
    if not key:
        return not subject
    head, rest = key[0], key[1:]
    if head == "#":
        return any(matches(rest, subject[i:], one) for i in range(len(subject) + 1))
    if not subject:
        return False
    return (head == one or head == subject[0]) and matches(rest, subject[1:], one)


TOKENS = st.sampled_from(["a", "b", "c", ""])
KEY_TOKENS = st.sampled_from(["a", "b", "c", "", "*", "+", "#"])


@settings(max_examples=300, deadline=None)
@given(method=st.sampled_from(list(MatchMethod)),
       keys=st.lists(st.lists(KEY_TOKENS, min_size=1, max_size=5), max_size=8),
       subjects=st.lists(st.lists(TOKENS, min_size=1, max_size=6), min_size=1, max_size=5))
def test_a_subject_matches_the_keys_the_rules_say(method: MatchMethod, keys: list[list[str]],
                                                  subjects: list[list[str]]) -> None:
    sep, one = method.separator, method.match_one
    table: BindingKeys[int] = BindingKeys(method)
    kept: list[tuple[list[str], int]] = []
    for index, tokens in enumerate(keys):
        try:
            table.add(sep.join(tokens), index)
        except AddressError:
            assert method is MatchMethod.MQTT and "#" in tokens[:-1]
            continue
        kept.append((tokens, index))
    for subject in subjects:
        expected = [value for tokens, value in kept if matches(tokens, subject, one)]
        assert table.match(sep.join(subject)) == expected
