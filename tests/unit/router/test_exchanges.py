"""The core's side of exchanges (docs/routing.md#exchanges): an exchange's
address has a destination, advertised to other routers, while the exchange
has a binding or an alternate; what its consumer is given goes to the
exchanges' pending list for the adapter."""

from __future__ import annotations

import itertools

from addressing import AddressTable, BindingSpec, ExchangeSpec
from router.core import (
    BlockSender,
    Connection,
    ConnectionId,
    IncomingAccepted,
    Router,
    UnblockSender,
)


def make_router(*, interior: bool = False, exchanges: tuple[ExchangeSpec, ...] = (),
                bindings: tuple[BindingSpec, ...] = ()) -> Router:
    counter = itertools.count()
    return Router(router_id="R1", addresses=AddressTable(), token=lambda: f"t{next(counter)}",
                  interior=interior, exchanges=exchanges, bindings=bindings)


def producer(router: Router, address: str) -> IncomingAccepted:
    accepted = router.incoming_link_attached(Connection(ConnectionId(1)), name="p",
                                             address=address)[0]
    assert isinstance(accepted, IncomingAccepted)
    return accepted


def test_an_exchange_is_a_destination_only_while_it_can_forward() -> None:
    router = make_router()
    exchange, effects = router.exchanges.add_exchange(ExchangeSpec(name="e", address="E",
                                                                   phase=2))
    assert effects == [] and not router.exchanges.consumers
    sender = producer(router, "E")
    assert sender.link.blocked, "an exchange without bindings has nowhere to send"
    binding, effects = router.exchanges.add_binding(
        BindingSpec(exchange_name="e", binding_key="k", next_hop_address="N"))
    consumer = router.exchanges.consumers[exchange]
    assert consumer.record is not None and consumer.record.key == "M2E"
    assert consumer.record is not sender.link.record, "bound at its own phase, 2"
    sender_at_2 = router.incoming_link_attached(Connection(ConnectionId(2)), name="p2",
                                                address="E", capabilities=("qd.waypoint.2",))
    assert isinstance(sender_at_2[0], IncomingAccepted)
    assert sender_at_2[0].link.record is consumer.record
    assert not sender_at_2[0].link.blocked
    effects = router.exchanges.remove_binding(binding)
    assert [type(e) for e in effects] == [BlockSender]
    assert exchange not in router.exchanges.consumers
    assert "M2E" in router.records, "its sender still uses the record"


def test_a_binding_gives_waiting_senders_credit_and_deleting_the_exchange_takes_it() -> None:
    router = make_router()
    exchange, _ = router.exchanges.add_exchange(ExchangeSpec(name="e", address="E"))
    sender = producer(router, "E")
    _, effects = router.exchanges.add_binding(
        BindingSpec(exchange_name="e", next_hop_address="N"))
    assert effects == [UnblockSender(link=sender.link)]
    effects = router.exchanges.remove_exchange(exchange)
    assert effects == [BlockSender(link=sender.link, drain=True)]
    assert list(router.exchanges) == [] and list(router.exchanges.bindings()) == []


def test_an_alternate_alone_makes_the_exchange_a_destination() -> None:
    router = make_router(exchanges=(ExchangeSpec(name="e", address="E",
                                                 alternate_address="A"),))
    sender = producer(router, "E")
    assert not sender.link.blocked


def test_what_the_consumer_is_given_waits_for_the_adapter() -> None:
    router = make_router(exchanges=(ExchangeSpec(name="e", address="E"),),
                         bindings=(BindingSpec(exchange_name="e", next_hop_address="N"),))
    exchange = next(iter(router.exchanges))
    consumer = router.exchanges.consumers[exchange]
    consumer.queue.append((b"message", None))
    assert not consumer.queue, "nothing is held in the consumer's queue"
    assert router.exchanges.pending == [(exchange, consumer, b"message", None)]


def test_an_interior_router_advertises_the_exchanges_address() -> None:
    router = make_router(interior=True, exchanges=(ExchangeSpec(name="e", address="E"),),
                         bindings=(BindingSpec(exchange_name="e", next_hop_address="N"),))
    network = router.network
    assert network is not None
    assert "M0E" in network.protocol.local_addresses
    exchange = next(iter(router.exchanges))
    router.exchanges.remove_exchange(exchange)
    assert "M0E" not in network.protocol.local_addresses
    assert "M0E" not in router.records, "freed with its last user"
