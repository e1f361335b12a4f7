"""Exchanges in one router: their addresses bound, the messages they take.

The domain (specs, bindings by key, the rules on names, duplicates and
circles) is ``addressing.exchanges``'; this module applies it to this
router's records (docs/routing.md#exchanges).  An exchange is an
in-process consumer of its address at its phase, bound like a client's
receiver, so that its address has a destination (its senders get credit)
and is advertised to other routers and an edge's interior, while the
exchange has a binding or an alternate; with neither, nothing could take
its messages and the address has no destination in it, as in qdrouterd.

What the consumer is given is not held: its queue (``ExchangeQueue``) puts
each message on ``pending`` for the adapter to forward after the wake-up
that delivered it, as the management node's requests are.  Forwarding
the copies and settling the message is the adapter's
(``router.adapter.forwarding.exchanges``).  A part of ``Router``, given what
it needs from it as functions; pure: it returns effects.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from typing import Final

from addressing import Binding, BindingSpec, Exchange, ExchangeSpec, ExchangeTable
from router.core.effects import Effect
from router.core.ids import ConnectionId, LinkId
from router.core.records import AddressRecord, Connection, Fanout, InLink, OutLink, Stream, Transfer

log = logging.getLogger(__name__)

Ref = Transfer | Fanout | None
#: A message an exchange took: the exchange, its consumer, the message (or
#: the ``Stream`` of a large one still arriving, its first bytes kept for
#: the consumer in ``Stream.heads``) and its delivery.
Taken = tuple[Exchange, OutLink, bytes | Stream, Ref]
#: The record a consumer of (address, phase) binds to.
Bind = Callable[[str, int], AddressRecord]
#: Bind a router-outgoing link as a destination of a record.
AddConsumer = Callable[[AddressRecord, OutLink, float], list[Effect]]
#: Unbind a link (``Router.link_detached``).
Detach = Callable[[OutLink, float], list[Effect]]
#: The id of the exchanges' connection: not the in-process one (0, the
#: management agent's, whose addresses are never advertised beyond an edge
#: router), as an exchange's consumer stands for the consumers its bindings
#: lead to, wherever they are.
EXCHANGES_CONNECTION: Final = ConnectionId(-1)


class ExchangeQueue(deque[tuple[bytes | Stream, Ref]]):
    """The queue of an exchange's consumer: what is appended goes to the
    exchanges' ``pending`` at once, never held here (a streamed message
    too: the exchange forwards it while it arrives)."""

    def __init__(self, exchange: Exchange, link: OutLink, pending: list[Taken]) -> None:
        super().__init__()
        self.exchange = exchange
        self.link = link
        self._pending = pending

    def append(self, item: tuple[bytes | Stream, Ref]) -> None:
        self._pending.append((self.exchange, self.link, item[0], item[1]))


class Exchanging:
    """The router's exchanges.

    Args:
        router_id: this router's id (the container id of the exchanges'
            connection).
        link_id: the next link id of the router.
        ids: identities of configuration entities.
        bind: the record a consumer of an address at a phase binds to.
        add_consumer: binds a consumer and says what that leads to.
        detach: unbinds a link and says what that leads to.
    """

    def __init__(self, *, router_id: str, link_id: Callable[[], LinkId], ids: Iterator[int],
                 bind: Bind, add_consumer: AddConsumer, detach: Detach) -> None:
        self.table = ExchangeTable()
        self._link_id = link_id
        self._ids = ids
        self._bind = bind
        self._add_consumer = add_consumer
        self._detach = detach
        #: The connection the exchanges' consumers and senders are on (not a
        #: peer's: no handle; router annotations are kept, as the adapter
        #: resets ingress and trace itself).
        self.conn = Connection(EXCHANGES_CONNECTION, strip_in=False, strip_out=False,
                               container_id=router_id, name="$exchanges")
        #: The consumer of each exchange that has one now.
        self.consumers: dict[Exchange, OutLink] = {}
        #: What the consumers were given since the adapter last looked.
        self.pending: list[Taken] = []

    def __len__(self) -> int:
        return len(self.table.exchanges)

    def __iter__(self) -> Iterator[Exchange]:
        return iter(self.table)

    def bindings(self) -> Iterator[Binding]:
        return self.table.bindings()

    def add_exchange(self, spec: ExchangeSpec,
                     now: float = 0.0) -> tuple[Exchange, list[Effect]]:
        """Make an exchange (its address bound once it can forward).

        Raises:
            AddressError: as ``ExchangeTable.add_exchange``.
        """
        exchange = self.table.add_exchange(spec, str(next(self._ids)))
        log.info("exchange %r on %r (phase %d) created", spec.name, spec.address, spec.phase)
        return exchange, self._serve_or_not(exchange, now)

    def remove_exchange(self, exchange: Exchange, now: float = 0.0) -> list[Effect]:
        """Delete an exchange and its bindings; messages it holds no more."""
        self.table.remove_exchange(exchange)
        log.info("exchange %r deleted", exchange.name)
        effects: list[Effect] = []
        link = self.consumers.pop(exchange, None)
        if link is not None:
            effects.extend(self._detach(link, now))
        return effects

    def add_binding(self, spec: BindingSpec, now: float = 0.0) -> tuple[Binding, list[Effect]]:
        """Bind a key of an exchange to a next hop.

        Raises:
            AddressError: as ``ExchangeTable.add_binding``.
        """
        exchange, binding = self.table.add_binding(spec, str(next(self._ids)))
        return binding, self._serve_or_not(exchange, now)

    def remove_binding(self, binding: Binding, now: float = 0.0) -> list[Effect]:
        """Delete a binding."""
        exchange = self.table.remove_binding(binding)
        return [] if exchange is None else self._serve_or_not(exchange, now)

    def sender(self, hop_address: str, phase: int, record: AddressRecord) -> InLink:
        """A link that copies to ``hop_address`` at ``phase`` enter routing on,
        bound to ``record`` (the adapter keeps one per next hop)."""
        return InLink(self._link_id(), self.conn, name=f"$exchange->{hop_address}",
                      address=hop_address, record=record, phase=phase)

    def _serve_or_not(self, exchange: Exchange, now: float) -> list[Effect]:
        """Bind the exchange's consumer while it can forward, unbind it when
        it no longer can."""
        link = self.consumers.get(exchange)
        if exchange.serves and link is None:
            spec = exchange.spec
            record = self._bind(spec.address, spec.phase)
            link = OutLink(self._link_id(), self.conn, name=f"$exchange/{exchange.name}",
                           address=spec.address, record=record)
            link.queue = ExchangeQueue(exchange, link, self.pending)
            self.conn.out_links[link.link_id] = link
            self.consumers[exchange] = link
            return self._add_consumer(record, link, now)
        if not exchange.serves and link is not None:
            del self.consumers[exchange]
            return self._detach(link, now)
        return []


__all__ = ["EXCHANGES_CONNECTION", "ExchangeQueue", "Exchanging", "Taken"]
