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
from addressing.spec import MAX_PHASE

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


def _check_phase(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if not 0 <= value <= MAX_PHASE:
        raise AddressError(f"{attribute.name}: phase must be between 0 and {MAX_PHASE}, "
                           f"got {value}")


@attrs.frozen(kw_only=True)
class ExchangeSpec:
    """What an ``exchange`` section or CREATE says (docs/routing.md#exchanges)."""

    name: str
    address: str
    phase: int = attrs.field(default=0, validator=_check_phase)
    alternate_address: str | None = None
    alternate_phase: int = attrs.field(default=0, validator=_check_phase)
    match_method: MatchMethod = MatchMethod.AMQP

    def __attrs_post_init__(self) -> None:
        if not self.name:
            raise AddressError("an exchange needs a name")
        if not self.address:
            raise AddressError(f"exchange {self.name!r}: address is mandatory")


@attrs.frozen(kw_only=True)
class BindingSpec:
    """What a ``binding`` section or CREATE says: the exchange it belongs to,
    the key (None: every subject) and the next hop."""

    name: str | None = None
    exchange_name: str
    binding_key: str | None = None
    next_hop_address: str
    next_hop_phase: int = attrs.field(default=0, validator=_check_phase)

    def __attrs_post_init__(self) -> None:
        if not self.next_hop_address:
            raise AddressError("a binding needs a nextHopAddress")


@attrs.frozen
class NextHop:
    """Where an exchange sends a copy: an address at a phase."""

    address: str
    phase: int = 0


@attrs.define(eq=False)
class Binding:
    """One binding of an exchange, and the messages whose subject matched it."""

    spec: BindingSpec
    identity: str
    hop: NextHop
    tokens: tuple[str, ...]
    matched: int = 0


@attrs.define(eq=False)
class Exchange:
    """One exchange: its bindings by key and what it did with its messages.

    ``received`` counts every message the exchange took; each is then
    ``forwarded`` (to at least one next hop, ``diverted`` among them when only
    the alternate took it) or ``dropped`` (nowhere took it).
    """

    spec: ExchangeSpec
    identity: str
    keys: BindingKeys[Binding]
    bindings: list[Binding] = attrs.Factory(list)
    received: int = 0
    forwarded: int = 0
    diverted: int = 0
    dropped: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def hop(self) -> NextHop:
        """The exchange's own address and phase (what it receives on)."""
        return NextHop(self.spec.address, self.spec.phase)

    @property
    def alternate(self) -> NextHop | None:
        spec = self.spec
        if spec.alternate_address is None:
            return None
        return NextHop(spec.alternate_address, spec.alternate_phase)

    @property
    def serves(self) -> bool:
        """Whether a message can go anywhere from here: the exchange has a
        binding or an alternate (else its address has no destination in it)."""
        return bool(self.bindings) or self.spec.alternate_address is not None

    def next_hops(self, subject: str | None) -> list[NextHop]:
        """The next hops of a message with ``subject``, each once, in the order
        their bindings were made; every binding that matches counts it."""
        hops: list[NextHop] = []
        for binding in self.keys.match(subject):
            binding.matched += 1
            if binding.hop not in hops:
                hops.append(binding.hop)
        return hops


class ExchangeTable:
    """The exchanges of one router by name, with the rules qdrouterd's agent
    applies to them: names and addresses (at a phase) are unique, a binding
    names an exchange that exists, and one exchange has no two bindings of the
    same key and next hop.  Hop adds one rule: a binding may not make the
    router's exchanges send a message round in a circle (qdrouterd would
    forward it for ever).  An address has one exchange at most, whatever its
    phase, as in qdrouterd.  Pure: the router binds the exchanges' addresses."""

    def __init__(self) -> None:
        self.exchanges: dict[str, Exchange] = {}

    def __iter__(self) -> Iterator[Exchange]:
        return iter(list(self.exchanges.values()))

    def bindings(self) -> Iterator[Binding]:
        for exchange in list(self.exchanges.values()):
            yield from exchange.bindings

    def add_exchange(self, spec: ExchangeSpec, identity: str) -> Exchange:
        """Make an exchange.

        Raises:
            AddressError: its name or its address is taken, or its
                alternate would lead a message back to it.
        """
        if spec.name in self.exchanges:
            raise AddressError(f"duplicate exchange name {spec.name!r}")
        for other in self.exchanges.values():
            if other.spec.address == spec.address:
                raise AddressError(f"duplicate exchange address {spec.address!r}: exchange "
                                   f"{other.name!r} has it (at phase {other.spec.phase})")
        exchange = Exchange(spec=spec, identity=identity, keys=BindingKeys(spec.match_method))
        alternate = exchange.alternate
        if alternate is not None:
            self._refuse_circle(exchange, alternate, "its alternate")
        self.exchanges[spec.name] = exchange
        return exchange

    def remove_exchange(self, exchange: Exchange) -> None:
        """Take an exchange out, with its bindings."""
        if self.exchanges.get(exchange.name) is exchange:
            del self.exchanges[exchange.name]

    def add_binding(self, spec: BindingSpec, identity: str) -> tuple[Exchange, Binding]:
        """Bind a key of an exchange to a next hop.

        Raises:
            AddressError: no such exchange, a name its exchange has already,
                the same key and next hop bound already, a key the exchange's
                method refuses, or a next hop that leads a message back.
        """
        exchange = self.exchanges.get(spec.exchange_name)
        if exchange is None:
            raise AddressError(f"no exchange named {spec.exchange_name!r}")
        hop = NextHop(spec.next_hop_address, spec.next_hop_phase)
        tokens = key_tokens(exchange.spec.match_method,
                            MATCH_EVERYTHING if spec.binding_key is None else spec.binding_key)
        for other in exchange.bindings:
            if spec.name is not None and other.spec.name == spec.name:
                raise AddressError(f"exchange {exchange.name!r} has a binding named "
                                   f"{spec.name!r} already")
            if other.tokens == tokens and other.hop == hop:
                raise AddressError(
                    f"exchange {exchange.name!r} binds key {spec.binding_key or '#'!r} to "
                    f"{hop.address!r} (phase {hop.phase}) already")
        self._refuse_circle(exchange, hop, "the binding")
        binding = Binding(spec=spec, identity=identity, hop=hop, tokens=tokens)
        exchange.keys.add(spec.binding_key, binding)
        exchange.bindings.append(binding)
        return exchange, binding

    def remove_binding(self, binding: Binding) -> Exchange | None:
        """Take a binding out; the exchange it was in, if it still exists."""
        exchange = self.exchanges.get(binding.spec.exchange_name)
        if exchange is None or binding not in exchange.bindings:
            return None
        exchange.bindings.remove(binding)
        exchange.keys.remove(binding.spec.binding_key, binding)
        return exchange

    def _refuse_circle(self, exchange: Exchange, hop: NextHop, what: str) -> None:
        """Refuse a next hop of ``exchange`` from which the exchanges of this
        table can send a message back to ``exchange``."""
        by_hop = {other.hop: other for other in self.exchanges.values()}
        by_hop[exchange.hop] = exchange
        seen: set[NextHop] = set()
        todo = [hop]
        while todo:
            at = todo.pop()
            if at == exchange.hop:
                raise AddressError(
                    f"{what} of exchange {exchange.name!r} would send its messages back to "
                    f"{exchange.spec.address!r} (phase {exchange.spec.phase}) for ever")
            if at in seen:
                continue
            seen.add(at)
            other = by_hop.get(at)
            if other is None:
                continue
            todo.extend(b.hop for b in other.bindings)
            if other.alternate is not None:
                todo.append(other.alternate)
