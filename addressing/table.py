"""The configured-address table: which ``address`` entry governs an address.

Owns the set of :class:`~addressing.spec.AddressSpec` entries keyed by their
prefix or pattern (docs/routing.md#prefixes-and-patterns), best-match lookup
on the stripped address, the treatment derived from it
(docs/routing.md#treatment), and a bounded per-address lookup cache.

Rules:

1. Matching semantics live in ``addressing.patterns``; this module only
   decides what text is matched (the address after
   ``addressing.keys.strip_address``) and what a match means.
2. It never reads the clock or holds address records: qdrouterd fixes an
   address record's treatment when the record is created, so callers keep
   what they looked up; removing an entry does not change existing records.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import attrs

from addressing.errors import AddressError
from addressing.keys import strip_address
from addressing.patterns import PatternTable
from addressing.spec import AddressSpec

log = logging.getLogger(__name__)

DEFAULT_CACHE_SIZE = 4096
"""Addresses remembered by :meth:`AddressTable.lookup` before the oldest is dropped."""


@attrs.define(eq=False, repr=False)
class AddressTable:
    """Configured ``address`` entries and best-match lookup.

    A prefix spec is stored as the pattern ``<prefix>/#``, so a prefix and
    the equivalent pattern are the same entry.  Lookups are cached per
    address string; the cache is bounded (``cache_size``, oldest entry
    dropped first) because anonymous senders choose the addresses, and it is
    cleared on every :meth:`add` and :meth:`remove`.
    """

    cache_size: int = DEFAULT_CACHE_SIZE
    _patterns: PatternTable[AddressSpec] = attrs.field(init=False, factory=PatternTable)
    _names: dict[str, str] = attrs.field(init=False, factory=dict)
    _cache: dict[str, AddressSpec | None] = attrs.field(init=False, factory=dict)

    def __repr__(self) -> str:
        return f"<AddressTable of {len(self._patterns)} addresses>"

    def __len__(self) -> int:
        return len(self._patterns)

    def __iter__(self) -> Iterator[tuple[str, AddressSpec]]:
        """Yield ``(stored pattern, spec)`` in insertion order."""
        return iter(self._patterns)

    def add(self, spec: AddressSpec) -> str:
        """Add a configured address.

        Args:
            spec: the entry; its ``prefix`` or ``pattern`` is the key.

        Returns:
            The stored (normalised) pattern.

        Raises:
            AddressError: the name is already used, or an entry with the
                same normalised pattern exists ("already exists").
        """
        if spec.name is not None and spec.name in self._names:
            raise AddressError(f"name conflicts with an existing entity: {spec.name!r}")
        if spec.prefix is not None:
            pattern = self._patterns.add_prefix(spec.prefix, spec)
        else:
            assert spec.pattern is not None
            pattern = self._patterns.add(spec.pattern, spec)
        if spec.name is not None:
            self._names[spec.name] = pattern
        self._cache.clear()
        label = f" {spec.name!r}" if spec.name else ""
        log.info("address%s configured: pattern %r, %s", label, pattern, spec.distribution.value)
        return pattern

    def remove(self, name_or_pattern: str) -> AddressSpec:
        """Remove a configured address by name, else by pattern.

        A name takes precedence over a pattern with the same text.  A prefix
        spec is removed by its name or by its stored pattern ``<prefix>/#``
        (any equivalent spelling, e.g. ``<prefix>.#``).

        Returns:
            The removed spec.

        Raises:
            AddressError: no entry has that name or pattern.
        """
        pattern = self._names.get(name_or_pattern, name_or_pattern)
        try:
            spec = self._patterns.remove(pattern)
        except AddressError:
            raise AddressError(f"no address with name or pattern {name_or_pattern!r}") from None
        if spec.name is not None:
            del self._names[spec.name]
        self._cache.clear()
        log.info("address %s removed (pattern %r)", spec.name or "", pattern)
        return spec

    def forget(self, address: str) -> None:
        """Drop the cached lookup of ``address``: an address that will not be
        asked for again (a freed dynamic address) need not wait for the
        cache's bound to push it out."""
        self._cache.pop(address, None)

    @property
    def cached(self) -> int:
        """How many lookups the cache holds."""
        return len(self._cache)

    def lookup(self, address: str) -> AddressSpec | None:
        """Return the best-matching configured address, or None.

        Args:
            address: an address as received; scheme, authority and one
                trailing separator are ignored (``strip_address``).  For
                ``_local``/``_topo``/``_edge`` forms the whole remaining text
                is matched, as qdrouterd does.
        """
        try:
            return self._cache[address]
        except KeyError:
            pass
        spec = self._patterns.match(strip_address(address))
        cache = self._cache
        if len(cache) >= self.cache_size:
            # Dicts keep insertion order: drop the oldest entry.
            del cache[next(iter(cache))]
        cache[address] = spec
        return spec
