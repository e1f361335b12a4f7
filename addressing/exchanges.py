"""Exchanges' bindings: which next hops a message's subject goes to.

An exchange (qdrouterd's experimental ``exchange`` and ``binding``
entities, docs/compatibility.md) is an address whose messages are
forwarded by their ``subject``: each binding pairs a key with a next hop
(an address and a phase), and a message goes once to every distinct next
hop of the bindings whose keys match its subject. This module owns the
keys and the matching; the router owns the forwarding and the counts of
messages forwarded, diverted and dropped.

Keys are matched as the exchange's ``matchMethod`` says:

- ``amqp`` (AMQP 0-9-1's topic exchange): tokens separated by ``.``; the
  token ``*`` matches exactly one token, ``#`` zero or more;
- ``mqtt`` (MQTT's topic filters): tokens separated by ``/``; ``+`` matches
  exactly one token, ``#`` zero or more and only as the last token.

Any other token matches itself only, and an empty token (``a..b``) is a
token like the others. A binding without a key has the key ``#``: it
matches every subject. A message without a subject matches nothing.

Pure: matching walks a trie of the keys' tokens, never the whole table.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Generic, TypeVar

import attrs

from addressing.errors import AddressError

V = TypeVar("V")

#: The key of a binding that gives none: every subject matches it.
MATCH_EVERYTHING = "#"


class MatchMethod(enum.Enum):
    """How an exchange reads its bindings' keys and its messages' subjects."""

    AMQP = "amqp"
    MQTT = "mqtt"

    @property
    def separator(self) -> str:
        return "." if self is MatchMethod.AMQP else "/"

    @property
    def match_one(self) -> str:
        return "*" if self is MatchMethod.AMQP else "+"


_GLOB = "#"


def key_tokens(method: MatchMethod, key: str) -> tuple[str, ...]:
    """A binding key's tokens, with ``#`` followed by ``#`` made one ``#``
    and ``#`` followed by the one-token wildcard written the other way round
    (they match the same subjects), so that two keys that match the same
    subjects have the same tokens.

    Raises:
        AddressError: an MQTT key with ``#`` before its last token.
    """
    tokens = key.split(method.separator)
    if method is MatchMethod.MQTT and _GLOB in tokens[:-1]:
        raise AddressError(f"binding key {key!r}: in an MQTT key, '#' may only be the "
                           "last token")
    one = method.match_one
    out: list[str] = []
    for token in tokens:
        if token == _GLOB and out and out[-1] == _GLOB:
            continue
        if token == one and out and out[-1] == _GLOB:
            out.insert(len(out) - 1, one)  # '#.*' is '*.#'
            continue
        out.append(token)
    return tuple(out)


class _Node(Generic[V]):
    __slots__ = ("children", "values")

    def __init__(self) -> None:
        self.children: dict[str, _Node[V]] = {}
        self.values: list[V] = []


@attrs.define(eq=False)
class _Entry(Generic[V]):
    tokens: tuple[str, ...]
    value: V
    order: int  # when it was added


class BindingKeys(Generic[V]):
    """The bindings of one exchange by key: values added under keys, and the
    values of every key a subject matches, in the order they were added."""

    def __init__(self, method: MatchMethod) -> None:
        self.method = method
        self._root: _Node[_Entry[V]] = _Node()
        self._count = 0
        self._order = 0

    def __len__(self) -> int:
        return self._count

    def add(self, key: str | None, value: V) -> tuple[str, ...]:
        """File ``value`` under ``key`` (None: every subject); its tokens.

        Raises:
            AddressError: the key is not valid for the exchange's method.
        """
        tokens = key_tokens(self.method, MATCH_EVERYTHING if key is None else key)
        node = self._root
        for token in tokens:
            node = node.children.setdefault(token, _Node())
        node.values.append(_Entry(tokens, value, self._order))
        self._order += 1
        self._count += 1
        return tokens

    def remove(self, key: str | None, value: V) -> bool:
        """Take ``value`` out from under ``key``; whether it was there."""
        tokens = key_tokens(self.method, MATCH_EVERYTHING if key is None else key)
        path = [self._root]
        for token in tokens:
            child = path[-1].children.get(token)
            if child is None:
                return False
            path.append(child)
        entries = path[-1].values
        for index, entry in enumerate(entries):
            if entry.value is value or entry.value == value:
                del entries[index]
                self._count -= 1
                break
        else:
            return False
        # Prune the nodes left empty, deepest first.
        for depth in range(len(tokens), 0, -1):
            node = path[depth]
            if node.values or node.children:
                break
            del path[depth - 1].children[tokens[depth - 1]]
        return True

    def values(self) -> Iterator[V]:
        """Every value, in no particular order."""
        stack = [self._root]
        while stack:
            node = stack.pop()
            for entry in node.values:
                yield entry.value
            stack.extend(node.children.values())

    def match(self, subject: str | None) -> list[V]:
        """The values of every key ``subject`` matches, each once."""
        if subject is None:
            return []
        tokens = subject.split(self.method.separator)
        found: dict[int, _Entry[V]] = {}
        self._search(self._root, tokens, 0, found)
        return [entry.value for entry in sorted(found.values(), key=lambda e: e.order)]

    def _search(self, node: _Node[_Entry[V]], tokens: list[str], at: int,
                found: dict[int, _Entry[V]]) -> None:
        if at == len(tokens):
            for entry in node.values:
                found[id(entry)] = entry
        else:
            exact = node.children.get(tokens[at])
            if exact is not None:
                self._search(exact, tokens, at + 1, found)
            one = node.children.get(self.method.match_one)
            if one is not None:
                self._search(one, tokens, at + 1, found)
        glob = node.children.get(_GLOB)
        if glob is not None:
            # '#' takes none of the tokens left, or one more each time.
            for rest in range(at, len(tokens) + 1):
                self._search(glob, tokens, rest, found)
