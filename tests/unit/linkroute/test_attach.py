"""Where a link-routed attach goes, its name, and the address rewriting."""

from __future__ import annotations

import attrs

from addressing import Direction
from linkroute import (
    EXPIRATION_REFUSED,
    NO_ROUTE,
    LinkRouteSpec,
    LinkRouteTable,
    ToContainer,
    ToRouter,
    client_address,
    external_address,
    route_attach,
    routed_name,
)


@attrs.frozen
class Peer:
    container_id: str
    name: str | None = None


def table(**kw: object) -> LinkRouteTable[Peer]:
    return LinkRouteTable([LinkRouteSpec(direction=Direction.IN, prefix="b", **kw)])  # type: ignore[arg-type]


def test_local_container_first_then_remote_routers_in_turn_then_no_route() -> None:
    t = table(container_id="rabbit")
    entry = t.match("b.q", Direction.IN)
    assert entry is not None
    remotes = ["R2", "R3"]
    assert route_attach(entry, "b.q", remotes) == ToRouter(router="R2")
    assert route_attach(entry, "b.q", remotes) == ToRouter(router="R3")
    assert route_attach(entry, "b.q", remotes) == ToRouter(router="R2")
    assert route_attach(entry, "b.q", []) == NO_ROUTE
    peer = Peer("rabbit")
    t.connection_opened(peer)
    decision = route_attach(entry, "b.q", remotes)
    assert isinstance(decision, ToContainer) and decision.peer is peer
    assert decision.address == "b.q"


def test_resumable_termini_are_refused_only_when_not_allowed() -> None:
    t = table(container_id="rabbit")
    entry = t.match("b.q", Direction.IN)
    assert entry is not None
    t.connection_opened(Peer("rabbit"))
    assert route_attach(entry, "b.q", [], resumable=True, allow_resumable=False) == \
        EXPIRATION_REFUSED
    assert isinstance(route_attach(entry, "b.q", [], resumable=True), ToContainer)


def test_external_prefixes_are_applied_toward_the_container_and_undone_back() -> None:
    add = LinkRouteSpec(direction=Direction.IN, prefix="foo", add_external_prefix="bar.")
    assert external_address("foo.q", add) == "bar.foo.q"
    assert client_address("bar.foo.q", add) == "foo.q"
    delete = LinkRouteSpec(direction=Direction.IN, prefix="foo", del_external_prefix="foo.")
    assert external_address("foo.q", delete) == "q"
    assert client_address("q", delete) == "foo.q"
    assert external_address("foo.", delete) == "foo.", "only a longer address loses the prefix"
    both = LinkRouteSpec(direction=Direction.IN, prefix="foo", del_external_prefix="foo.",
                         add_external_prefix="queues/")
    assert external_address("foo.q", both) == "queues/q"
    assert client_address("queues/q", both) == "foo.q"


def test_the_decision_carries_the_rewritten_address() -> None:
    t = table(container_id="rabbit", del_external_prefix="b.")
    entry = t.match("b.orders", Direction.IN)
    assert entry is not None
    t.connection_opened(Peer("rabbit"))
    decision = route_attach(entry, "b.orders", list[str]())
    assert isinstance(decision, ToContainer) and decision.address == "orders"


def test_names_gain_the_client_container_except_between_routers() -> None:
    assert routed_name("sender-1", "client-A") == "sender-1@client-A"
    assert routed_name("sender-1@client-A", None) == "sender-1@client-A"
