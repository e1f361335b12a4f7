"""The core's side of link routes (docs/brokers.md#link-routes): advertising active routes,
learning other routers' routes, where an attach goes, and the effects of
what happens to a routed pair."""

from __future__ import annotations

import itertools

from addressing import AddressTable, Direction
from linkroute import Detach, LinkRouteSpec
from router.core import (
    AnswerAttach,
    AttachRefused,
    Connection,
    ConnectionId,
    DetachRouted,
    ForwardAttach,
    Role,
    RoutedEnd,
    Router,
)
from router.core.routing import MobileAddressesChanged
from tests.unit.router.helpers import converge, interior

IN, OUT = Direction.IN, Direction.OUT


def routes(*, container: str = "broker", **kw: object) -> tuple[LinkRouteSpec, ...]:
    return tuple(LinkRouteSpec(direction=d, prefix="b", connection=container, **kw)  # type: ignore[arg-type]
                 for d in (IN, OUT))


def standalone(*specs: LinkRouteSpec, allow_resumable: bool = True) -> Router:
    counter = itertools.count()
    return Router(router_id="R1", addresses=AddressTable(), token=lambda: f"t{next(counter)}",
                  link_routes=specs, allow_resumable_link_route=allow_resumable)


def broker(n: int = 1) -> Connection:
    c = Connection(ConnectionId(n), role=Role.ROUTE_CONTAINER, name="broker")
    c.container_id = "rabbit"
    return c


def client(n: int = 10) -> Connection:
    c = Connection(ConnectionId(n))
    c.container_id = "app"
    return c


def routed(router: Router, conn: Connection, address: str = "b.q", *,
           receiving: bool = True) -> tuple[RoutedEnd, ForwardAttach]:
    near, effects = router.link_routed_attach(conn, name="L", address=address,
                                              receiving=receiving)
    assert isinstance(near, RoutedEnd)
    (forward,) = effects
    assert isinstance(forward, ForwardAttach) and forward.near is near
    return near, forward


def test_unmatched_addresses_are_message_routed() -> None:
    router = standalone(*routes())
    assert router.link_routed_attach(client(), name="L", address="other",
                                     receiving=True) == (None, [])
    assert router.link_routed_attach(client(), name="L", address="b.q",
                                     receiving=False)[0] is not None, "out matches receivers"


def test_no_serving_connection_refuses_with_no_route() -> None:
    router = standalone(*routes())
    refusal, effects = router.link_routed_attach(client(), name="L", address="b.q",
                                                 receiving=True)
    assert refusal == AttachRefused(condition="qd:no-route-to-dest",
                                    description="No route to the destination node")
    assert effects == []


def test_a_client_attach_goes_to_the_broker_with_the_rewritten_address_and_name() -> None:
    router = standalone(*routes(del_external_prefix="b.", add_external_prefix="queues/"))
    conn = broker()
    router.connection_opened(conn)
    near, forward = routed(router, client(), "b.orders")
    far = forward.far
    assert (far.conn, far.receiving, near.receiving) == (conn, False, True)
    assert forward.address == "queues/orders"
    assert forward.name == "L@app", "a client's link name gains its container id"
    assert near.partner is far and far.partner is near
    effects = router.routed_answered(far, "queues/orders", null=False)
    assert effects == [AnswerAttach(near=near, address="b.orders", null=False)]
    assert near.pair is not None and near.pair.open


def test_a_refusal_by_the_broker_reaches_the_client_as_a_null_terminus_and_its_error() -> None:
    router = standalone(*routes())
    router.connection_opened(broker())
    near, forward = routed(router, client())
    assert router.routed_answered(forward.far, None, null=True) == [
        AnswerAttach(near=near, address=None, null=True)]
    refusal = Detach(condition="amqp:not-found", description="no such queue")
    assert router.routed_detached(forward.far, refusal) == [
        DetachRouted(end=near, condition="amqp:not-found", description="no such queue")]
    assert not near.conn.routed and not forward.far.conn.routed, "both ends forgotten"


def test_losing_the_broker_detaches_the_clients_with_routed_link_lost() -> None:
    router = standalone(*routes())
    conn = broker()
    router.connection_opened(conn)
    first, f1 = routed(router, client(10))
    second, f2 = routed(router, client(11), receiving=False)
    router.routed_answered(f1.far, "b.q", null=False)
    router.routed_answered(f2.far, "b.q", null=False)
    effects = router.connection_closed(conn)
    assert {(e.end.link_id, e.condition, e.closed) for e in effects
            if isinstance(e, DetachRouted)} == {
        (first.link_id, "qd:routed-link-lost", True),
        (second.link_id, "qd:routed-link-lost", True)}
    refusal, _ = router.link_routed_attach(client(12), name="L", address="b.q", receiving=True)
    assert isinstance(refusal, AttachRefused) and refusal.condition == "qd:no-route-to-dest"


def test_a_client_leaving_detaches_the_broker_link() -> None:
    router = standalone(*routes())
    router.connection_opened(broker())
    app = client()
    _, forward = routed(router, app)
    router.routed_answered(forward.far, "b.q", null=False)
    effects = router.connection_closed(app)
    assert effects == [DetachRouted(end=forward.far, condition="qd:routed-link-lost",
                                    description="Connectivity to the peer container was lost")]


def test_resumable_termini_follow_allow_resumable_link_route() -> None:
    router = standalone(*routes(), allow_resumable=False)
    router.connection_opened(broker())
    refusal, _ = router.link_routed_attach(client(), name="L", address="b.q", receiving=False,
                                           resumable=True)
    assert isinstance(refusal, AttachRefused) and refusal.condition == "qd:link-expiration"


def test_active_routes_are_advertised_and_withdrawn_across_the_network() -> None:
    router = interior(link_routes=routes())
    converge(router)
    network = router.network
    assert network is not None
    assert network.protocol.local_addresses == {}, "inactive link routes are not advertised"
    first, second = broker(1), broker(2)
    router.connection_opened(first)
    router.connection_opened(second)
    assert network.protocol.local_addresses == {"Cb": 4, "Db": 4}, \
        "keys with the linkBalanced hint"
    router.connection_closed(first, 3.0)
    assert network.protocol.local_addresses == {"Cb": 4, "Db": 4}, \
        "still served by the second connection"
    router.connection_closed(second, 4.0)
    assert network.protocol.local_addresses == {}


def test_routes_learnt_from_another_router_send_attaches_toward_it() -> None:
    router = interior()
    to_b, _ = converge(router)
    assert router.network is not None
    router.network.apply_protocol(
        [MobileAddressesChanged(router_id="C", added=(("Cfar", 4),))], 0.0)
    near, effects = router.link_routed_attach(client(), name="L@app", address="far.q",
                                              receiving=True)
    assert isinstance(near, RoutedEnd)
    (forward,) = effects
    assert isinstance(forward, ForwardAttach)
    assert forward.far.conn is to_b.conn, "toward C through its next hop B"
    assert forward.address == "far.q", "only the router owning the container rewrites"
    router.network.apply_protocol(
        [MobileAddressesChanged(router_id="C", removed=("Cfar",))], 0.0)
    assert router.link_routed_attach(client(), name="L", address="far.q",
                                     receiving=True) == (None, []), "forgotten"


def test_an_attach_from_another_router_keeps_its_name() -> None:
    router = standalone(*routes())
    router.connection_opened(broker())
    peer_router = Connection(ConnectionId(20), role=Role.INTER_ROUTER)
    _, forward = routed(router, peer_router)
    assert forward.name == "L"


def test_an_attach_that_must_be_link_routed_is_refused_without_a_match() -> None:
    router = standalone(*routes())
    refusal, _ = router.link_routed_attach(client(), name="L", address="nowhere",
                                           receiving=False, required=True)
    assert isinstance(refusal, AttachRefused) and refusal.condition == "qd:no-route-to-dest"
