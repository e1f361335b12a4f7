"""The core's side of auto-links: attaching on route-container connections,
binding the answered link to its address at its phase, failure and retry,
and the credit of the producers they feed (docs/brokers.md#waypoints-and-auto-links,
docs/routing.md#fallback)."""

from __future__ import annotations

import itertools

from addressing import AddressSpec, AddressTable, Direction
from autolink import AutoLink, AutoLinkSpec, AutoLinkState
from router.core import (
    AttachAutoLink,
    BlockSender,
    Connection,
    ConnectionId,
    IncomingAccepted,
    InLink,
    OutgoingAccepted,
    OutLink,
    Role,
    Router,
    UnblockSender,
)

S = AutoLinkState


def make_router(*autolinks: AutoLinkSpec, addresses: tuple[AddressSpec, ...] = ()) -> Router:
    table = AddressTable()
    for spec in addresses:
        table.add(spec)
    counter = itertools.count()
    return Router(router_id="R1", addresses=table, token=lambda: f"t{next(counter)}",
                  auto_links=autolinks)


def broker(n: int = 1, name: str | None = "broker", container: str = "rabbit") -> Connection:
    c = Connection(ConnectionId(n), role=Role.ROUTE_CONTAINER, name=name)
    c.container_id = container
    return c


def client(n: int = 10) -> Connection:
    return Connection(ConnectionId(n))


def out(address: str = "q", **kw: object) -> AutoLinkSpec:
    return AutoLinkSpec(address=address, direction=Direction.OUT, connection="broker", **kw)  # type: ignore[arg-type]


def in_(address: str = "q", **kw: object) -> AutoLinkSpec:
    return AutoLinkSpec(address=address, direction=Direction.IN, connection="broker", **kw)  # type: ignore[arg-type]


WAYPOINT = AddressSpec(prefix="q", waypoint=True)


def state(autolink: AutoLink[Connection]) -> AutoLinkState:
    return autolink.state


def answered(router: Router, effect: AttachAutoLink) -> InLink | OutLink:
    link, _ = router.auto_links.attached(effect.autolink, name="qdlink.x",
                                       address=effect.address, handle=None)
    assert link is not None
    return link


def attach_all(router: Router, conn: Connection) -> list[AttachAutoLink]:
    effects = router.connection_opened(conn)
    assert all(isinstance(e, AttachAutoLink) for e in effects)
    return effects  # type: ignore[return-value]


def test_only_route_container_connections_get_autolinks() -> None:
    router = make_router(out())
    plain = client()
    plain.name = "broker"
    assert router.connection_opened(plain) == []
    (effect,) = attach_all(router, broker())
    assert (effect.sender, effect.address) == (True, "q")
    assert effect.autolink.state is S.ATTACHING


def test_the_attach_uses_the_external_address_and_the_link_the_internal_one() -> None:
    router = make_router(out(external_address="broker.q"), in_(external_address="broker.q"),
                         addresses=(WAYPOINT,))
    first, second = attach_all(router, broker())
    assert (first.address, second.address) == ("broker.q", "broker.q")
    assert (first.sender, second.sender) == (True, False)
    link = answered(router, second)
    assert isinstance(link, InLink)
    assert link.address == "q", "messages from the queue are routed by the internal address"
    assert link.record is not None and link.record.key == "M1q"


def test_out_autolink_is_a_consumer_of_phase_0_that_unblocks_producers() -> None:
    router = make_router(out(), addresses=(WAYPOINT,))
    producer = router.incoming_link_attached(client(), name="p", address="q")[0]
    assert isinstance(producer, IncomingAccepted) and producer.link.blocked
    (effect,) = attach_all(router, broker())
    link, effects = router.auto_links.attached(effect.autolink, name="qdlink.x", address="q",
                                             handle=None)
    assert isinstance(link, OutLink) and link.record is not None
    assert link.record is producer.link.record and link.record.key == "M0q"
    assert effects == [UnblockSender(link=producer.link)]
    assert effect.autolink.state is S.ACTIVE and effect.autolink.link_id == link.link_id


def test_in_autolink_feeds_phase_1_consumers_and_is_never_drained() -> None:
    router = make_router(in_(), addresses=(WAYPOINT,))
    (effect,) = attach_all(router, broker())
    link = answered(router, effect)
    assert isinstance(link, InLink) and link.phase == 1 and link.blocked
    consumer, effects = router.outgoing_link_attached(client(), name="c", address="q")
    assert isinstance(consumer, OutgoingAccepted)
    assert effects == [UnblockSender(link=link)]
    assert router.link_detached(consumer.link) == [BlockSender(link=link, drain=False)]


def test_answer_without_address_waits_for_the_detach() -> None:
    router = make_router(out())
    (effect,) = attach_all(router, broker())
    link, effects = router.auto_links.attached(effect.autolink, name="x", address=None,
                                             handle=None)
    assert (link, effects) == (None, [])
    al = effect.autolink
    assert al.state is S.ATTACHING
    router.auto_links.detached(al, "amqp:not-found: no such queue", now=5.0)
    assert state(al) is S.FAILED
    assert effect.autolink.last_error == "amqp:not-found: no such queue"


def test_a_detached_autolink_fails_unbinds_and_is_attached_again_when_due() -> None:
    router = make_router(out())
    conn = broker()
    (effect,) = attach_all(router, conn)
    link = answered(router, effect)
    producer = router.incoming_link_attached(client(), name="p", address="q")[0]
    assert isinstance(producer, IncomingAccepted) and not producer.link.blocked
    effects = router.link_detached(link, now=100.0, error="amqp:resource-deleted: gone")
    assert effects == [BlockSender(link=producer.link)]
    al = effect.autolink
    assert (al.state, al.last_error) == (S.FAILED, "amqp:resource-deleted: gone")
    assert router.next_deadline() == 102.0
    assert router.tick(101.0) == []
    (again,) = router.tick(102.0)
    assert isinstance(again, AttachAutoLink) and again.autolink is al and again.conn is conn


def test_losing_the_broker_makes_it_inactive_until_a_serving_connection_opens() -> None:
    router = make_router(out(), in_(), addresses=(WAYPOINT,))
    first = broker(1)
    for effect in attach_all(router, first):
        answered(router, effect)
    consumer, _ = router.outgoing_link_attached(client(), name="c", address="q")
    assert isinstance(consumer, OutgoingAccepted)
    assert router.connection_closed(first, now=1.0) == []
    assert [al.state for al in router.auto_links.table] == [S.INACTIVE, S.INACTIVE]
    assert not first.in_links and not first.out_links
    assert "M0q" not in router.records, "the out auto-link is no consumer any more"
    assert router.records["M1q"].senders == [], "nor is the in auto-link a producer"
    second = broker(2)
    assert [e.conn for e in attach_all(router, second)] == [second, second]


def test_every_connection_serving_an_autolink_gets_a_link_and_keeps_it() -> None:
    first, second = broker(1, name=None, container="rabbit"), broker(2, name=None,
                                                                    container="rabbit")
    router = make_router(AutoLinkSpec(address="q", direction=Direction.OUT,
                                      container_id="rabbit"))
    (one,) = attach_all(router, first)
    (two,) = attach_all(router, second)
    assert (one.conn, two.conn) == (first, second)
    links = [answered(router, one), answered(router, two)]
    record = links[0].record
    assert record is not None and set(record.consumers) == set(links)
    assert router.connection_closed(first) == []
    assert record.consumers == [links[1]], "the other connection's link stays"
    [entity] = router.auto_links.table
    assert entity.state is S.ACTIVE and entity.link_id == links[1].link_id


def test_fallback_autolinks_bind_to_the_fallback_record_and_to_phase_0() -> None:
    fallback = AddressSpec(prefix="q", enable_fallback=True)
    router = make_router(out(fallback=True), in_(fallback=True), addresses=(fallback,))
    out_effect, in_effect = attach_all(router, broker())
    out_link, in_link = answered(router, out_effect), answered(router, in_effect)
    assert out_link.record is not None and out_link.record.key == "MFq"
    assert isinstance(in_link, InLink) and in_link.fallback and in_link.phase == 0
    assert in_link.record is not None and in_link.record.key == "M0q"
    assert in_link.record.fallback is out_link.record
    assert in_link.blocked, "a fallback producer gets no credit from the fallback itself"
    producer = router.incoming_link_attached(client(), name="p", address="q")[0]
    assert isinstance(producer, IncomingAccepted)
    assert not producer.link.blocked, "a producer may send while only the fallback can take"
    consumer, effects = router.outgoing_link_attached(client(11), name="c", address="q")
    assert isinstance(consumer, OutgoingAccepted)
    assert effects == [UnblockSender(link=in_link)], \
        "a consumer coming back lets the queued fallback messages flow"


def test_a_receiver_with_the_fallback_capability_is_a_fallback_destination() -> None:
    router = make_router(addresses=(AddressSpec(prefix="q", enable_fallback=True),))
    producer = router.incoming_link_attached(client(), name="p", address="q")[0]
    assert isinstance(producer, IncomingAccepted) and producer.link.blocked
    standby, effects = router.outgoing_link_attached(client(11), name="s", address="q",
                                                     capabilities=("qd.fallback",))
    assert isinstance(standby, OutgoingAccepted)
    assert standby.link.record is not None and standby.link.record.key == "MFq"
    assert effects == [UnblockSender(link=producer.link)], "the fallback is somewhere to send"
    fallback_producer = router.incoming_link_attached(client(12), name="f", address="q",
                                                      capabilities=("qd.fallback",))[0]
    assert isinstance(fallback_producer, IncomingAccepted)
    assert fallback_producer.link.fallback and fallback_producer.link.blocked, \
        "a fallback producer is not fed by the fallback"
    assert router.link_detached(standby.link) == [BlockSender(link=producer.link)]
