"""Prefix and wildcard-pattern matching with qdrouterd's parse-tree semantics.

Owns the token trie behind ``address`` and ``linkRoute`` configuration
matching (docs/routing.md#prefixes-and-patterns, qdrouterd ``parse_tree.c``): how a pattern
or an address is split into tokens, how a configured pattern is cleaned and
normalised before it is stored, duplicate detection, and the precedence rule
that picks the best of several matching patterns.

Rules:

1. This module knows nothing of what the stored values mean (address specs,
   link routes); it maps patterns to opaque values.
2. It does not strip schemes or authorities from addresses; callers pass
   the text to match (``addressing.keys.strip_address`` does that part).
3. Matching never raises on any address text and never scans the whole
   table: it walks a trie of tokens, so it stays cheap with 10,000 entries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Generic, TypeVar, cast

import attrs

from addressing.errors import AddressError

log = logging.getLogger(__name__)

V = TypeVar("V")

SEPARATORS = "./"
"""Either character separates tokens; they are interchangeable."""

MATCH_ONE = "*"
"""A token that is exactly this matches exactly one address token."""

MATCH_GLOB = "#"
"""A token that is exactly this matches zero or more address tokens."""


def _strip_separators(kind: str, text: str) -> str:
    # qdrouterd strips leading and *all* trailing separators from configured
    # prefixes and patterns before storing them (agent_config_address.c).
    stripped = text.strip(SEPARATORS)
    if not stripped:
        raise AddressError(f"{kind} invalid - no tokens: {text!r}")
    return stripped


def _split(stripped: str) -> tuple[list[str], list[str]]:
    """Split text without leading/trailing separators into tokens and the
    separators between them (``len(seps) == len(tokens) - 1``)."""
    tokens: list[str] = []
    seps: list[str] = []
    start = 0
    for index, char in enumerate(stripped):
        if char in SEPARATORS:
            tokens.append(stripped[start:index])
            seps.append(char)
            start = index + 1
    tokens.append(stripped[start:])
    return tokens, seps


def _normalize_tokens(tokens: list[str], seps: list[str]) -> None:
    """Rewrite ``#.#`` to ``#`` and ``#.*`` to ``*.#``, in place.

    Mirrors qdrouterd's forward scan, including which separator survives a
    collapse (the one after the second ``#``), so the stored text is the one
    qdrouterd's management would report.
    """
    index = 0
    while index < len(tokens) - 1:
        if tokens[index] != MATCH_GLOB:
            index += 1
        elif tokens[index + 1] == MATCH_GLOB:
            del tokens[index]
            del seps[index]
        elif tokens[index + 1] == MATCH_ONE:
            tokens[index], tokens[index + 1] = MATCH_ONE, MATCH_GLOB
            index += 1
        else:
            index += 2


def _join(tokens: list[str], seps: list[str]) -> str:
    parts = [tokens[0]]
    for sep, token in zip(seps, tokens[1:], strict=True):
        parts.append(sep)
        parts.append(token)
    return "".join(parts)


def _parse_pattern(kind: str, text: str) -> tuple[str, tuple[str, ...]]:
    tokens, seps = _split(_strip_separators(kind, text))
    _normalize_tokens(tokens, seps)
    return _join(tokens, seps), tuple(tokens)


def normalize_pattern(pattern: str) -> str:
    """Return the form in which qdrouterd stores a configured pattern.

    Leading and trailing separators are removed, then ``#.#`` becomes ``#``
    and ``#.*`` becomes ``*.#`` until neither occurs.

    Args:
        pattern: a configured ``pattern`` attribute.

    Returns:
        The normalised pattern text.

    Raises:
        AddressError: the pattern is empty or only separators.
    """
    return _parse_pattern("pattern", pattern)[0]


def prefix_pattern(prefix: str) -> str:
    """Return the pattern a configured prefix is stored as: ``<prefix>/#``.

    Leading and trailing separators of the prefix are removed first, so the
    prefix ``a.b`` and the pattern ``a.b.#`` are the same entry.

    Raises:
        AddressError: the prefix is empty or only separators.
    """
    return _parse_pattern("pattern", _strip_separators("prefix", prefix) + "/" + MATCH_GLOB)[0]


def address_tokens(address: str) -> list[str]:
    """Split an address into tokens the way the parse tree does.

    Leading separators are skipped, consecutive separators give empty
    tokens, and one trailing separator ends the last token without adding
    an empty one (``a.`` is ``[a]``, ``a..`` is ``[a, '']``).
    """
    text = address.lstrip(SEPARATORS)
    if not text:
        return []
    tokens = text.replace("/", ".").split(".")
    if not tokens[-1]:
        tokens.pop()
    return tokens


class _Node(Generic[V]):
    """One token position of the trie; terminal when ``pattern`` is set."""

    __slots__ = ("children", "glob", "one", "pattern", "value")

    def __init__(self) -> None:
        self.children: dict[str, _Node[V]] = {}
        self.one: _Node[V] | None = None
        self.glob: _Node[V] | None = None
        self.pattern: str | None = None
        self.value: V | None = None

    def is_empty(self) -> bool:
        return self.pattern is None and not self.children and self.one is None and self.glob is None


@attrs.define(eq=False, repr=False)
class PatternTable(Generic[V]):
    """Patterns (and prefixes) mapped to values, with qdrouterd precedence.

    Tokens are separated by ``.`` or ``/`` interchangeably.  A token that is
    exactly ``*`` matches one address token and one that is exactly ``#``
    matches zero or more; ``*`` or ``#`` inside a longer token is literal.
    Patterns are stored normalised (see :func:`normalize_pattern`); two
    spellings of the same normalised tokens are the same entry.
    """

    _root: _Node[V] = attrs.field(init=False, factory=_Node)
    _entries: dict[tuple[str, ...], _Node[V]] = attrs.field(init=False, factory=dict)

    def __repr__(self) -> str:
        return f"<PatternTable of {len(self._entries)} patterns>"

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[tuple[str, V]]:
        """Yield ``(stored pattern, value)`` in insertion order."""
        for node in self._entries.values():
            assert node.pattern is not None
            yield node.pattern, cast(V, node.value)

    def __contains__(self, pattern: object) -> bool:
        if not isinstance(pattern, str):
            return False
        try:
            _, tokens = _parse_pattern("pattern", pattern)
        except AddressError:
            return False
        return tokens in self._entries

    def add(self, pattern: str, value: V) -> str:
        """Store a pattern.

        Args:
            pattern: the pattern text; leading/trailing separators are
                ignored and it is normalised before being stored.
            value: what :meth:`match` returns for addresses it wins.

        Returns:
            The stored (normalised) pattern text.

        Raises:
            AddressError: no tokens, or the normalised pattern already exists.
        """
        return self._add("pattern", pattern, _strip_separators("pattern", pattern), value)

    def add_prefix(self, prefix: str, value: V) -> str:
        """Store a prefix as the pattern ``<prefix>/#`` (see :func:`prefix_pattern`).

        Returns:
            The stored pattern text.

        Raises:
            AddressError: no tokens, or the equivalent pattern already exists.
        """
        stripped = _strip_separators("prefix", prefix)
        return self._add("prefix", prefix, stripped + "/" + MATCH_GLOB, value)

    def _add(self, kind: str, original: str, candidate: str, value: V) -> str:
        stored, tokens = _parse_pattern(kind, candidate)
        if tokens in self._entries:
            raise AddressError(f"already exists: {kind} {original!r} (pattern {stored!r})")
        if stored != candidate:
            log.info("configured pattern %r optimized and re-written to %r", candidate, stored)
        node = self._root
        for token in tokens:
            if token == MATCH_ONE:
                if node.one is None:
                    node.one = _Node()
                node = node.one
            elif token == MATCH_GLOB:
                if node.glob is None:
                    node.glob = _Node()
                node = node.glob
            else:
                child = node.children.get(token)
                if child is None:
                    child = node.children[token] = _Node()
                node = child
        node.pattern = stored
        node.value = value
        self._entries[tokens] = node
        return stored

    def get(self, pattern: str) -> V | None:
        """Return the value stored for exactly this pattern (any spelling), or None."""
        try:
            _, tokens = _parse_pattern("pattern", pattern)
        except AddressError:
            return None
        node = self._entries.get(tokens)
        return None if node is None else node.value

    def remove(self, pattern: str) -> V:
        """Remove a stored pattern (any spelling of it) and return its value.

        Raises:
            AddressError: no tokens, or no such pattern is stored.
        """
        stored, tokens = _parse_pattern("pattern", pattern)
        node = self._entries.pop(tokens, None)
        if node is None:
            raise AddressError(f"not found: pattern {stored!r}")
        value = node.value
        node.pattern = None
        node.value = None
        self._prune(tokens)
        return cast(V, value)

    def _prune(self, tokens: tuple[str, ...]) -> None:
        path: list[tuple[_Node[V], str]] = []
        node = self._root
        for token in tokens:
            path.append((node, token))
            if token == MATCH_ONE:
                child = node.one
            elif token == MATCH_GLOB:
                child = node.glob
            else:
                child = node.children.get(token)
            assert child is not None
            node = child
        for parent, token in reversed(path):
            if not node.is_empty():
                return
            if token == MATCH_ONE:
                parent.one = None
            elif token == MATCH_GLOB:
                parent.glob = None
            else:
                del parent.children[token]
            node = parent

    def match(self, address: str) -> V | None:
        """Return the value of the best pattern matching ``address``, or None.

        Precedence (qdrouterd): walk the address token by token, trying at
        each position the literal token, then ``*``, then ``#`` (which
        first matches zero tokens, then progressively more); the first
        complete match wins.
        """
        for node in self._search(address_tokens(address)):
            return cast(V, node.value)
        return None

    def matches(self, address: str) -> list[tuple[str, V]]:
        """Return every ``(pattern, value)`` matching ``address``, best first."""
        return [
            (cast(str, node.pattern), cast(V, node.value))
            for node in self._search(address_tokens(address))
        ]

    def _search(self, tokens: list[str]) -> Iterator[_Node[V]]:
        """Yield terminal nodes matching ``tokens`` in order of preference.

        A depth-first search over states ``(node, i)`` = "the pattern up to
        ``node`` matched ``tokens[:i]``", with an explicit stack so long
        addresses cannot exhaust the recursion limit.  Alternatives are
        pushed in reverse order of preference.  A ``#`` state can be reached
        along several paths; on a repeat visit its whole subtree has already
        been explored (a DFS finishes a state before popping anything pushed
        earlier), so it is skipped.  That keeps patterns such as
        ``#.a.#.a.#`` polynomial and yields each pattern once.
        """
        end = len(tokens)
        stack: list[tuple[_Node[V], int, bool]] = [(self._root, 0, False)]
        seen: set[tuple[int, int]] | None = None
        while stack:
            node, index, is_glob = stack.pop()
            if is_glob:
                if seen is None:
                    seen = set()
                state = (id(node), index)
                if state in seen:
                    continue
                seen.add(state)
            if index == end:
                if node.pattern is not None:
                    yield node
                if node.glob is not None:
                    stack.append((node.glob, end, True))
                continue
            glob = node.glob
            if glob is not None:
                # '#' consuming everything left, then fewer and fewer tokens
                # (pushed first = tried last).  Normalisation leaves a '#'
                # node only literal children, so only positions holding one
                # of them can continue the pattern.
                stack.append((glob, end, True))
                children = glob.children
                if children:
                    for later in range(end - 1, index - 1, -1):
                        if tokens[later] in children:
                            stack.append((glob, later, True))
            if node.one is not None:
                stack.append((node.one, index + 1, False))
            child = node.children.get(tokens[index])
            if child is not None:
                stack.append((child, index + 1, False))
