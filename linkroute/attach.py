"""What happens to a link-routed attach (docs/brokers.md#where-a-routed-attach-goes).

Owns the decision for a client attach that matched a link route: refused
(a resumable terminus the router is told not to route, or no destination:
``qd:no-route-to-dest``), sent on to a local container (round robin across
the connections that serve the route, with the route's address rewriting),
or sent on toward another router that advertises the route (round robin);
and the name the forwarded link gets.  What happens afterwards, to the pair
of links, is ``linkroute.pairing``'s.

It must not know what connections or routers are: they are the caller's
opaque values.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import attrs

from addressing import RouteContainer
from linkroute.spec import LinkRouteSpec
from linkroute.table import RouteEntry

P = TypeVar("P", bound=RouteContainer)
R = TypeVar("R")

NO_ROUTE_CONDITION = "qd:no-route-to-dest"
NO_ROUTE_DESCRIPTION = "No route to the destination node"


@attrs.frozen(kw_only=True)
class ToContainer(Generic[P]):
    """Attach on ``peer``, a connection to the container, with ``address``
    as the container-facing terminus address (rewritten by the route)."""

    peer: P
    address: str
    spec: LinkRouteSpec


@attrs.frozen(kw_only=True)
class ToRouter(Generic[R]):
    """Attach toward ``router``, another router advertising the route; the
    address is passed on unchanged (the last router rewrites it)."""

    router: R


@attrs.frozen(kw_only=True)
class Refusal:
    """Refuse the client's attach with this error."""

    condition: str
    description: str


NO_ROUTE = Refusal(condition=NO_ROUTE_CONDITION, description=NO_ROUTE_DESCRIPTION)
EXPIRATION_REFUSED = Refusal(condition="qd:link-expiration",
                             description="Requested link expiration not allowed")


def route_attach(entry: RouteEntry[P], address: str, remotes: list[R], *,
                 resumable: bool = False, allow_resumable: bool = True
                 ) -> ToContainer[P] | ToRouter[R] | Refusal:
    """Where a link-routed attach goes (docs/brokers.md#where-a-routed-attach-goes).

    Args:
        entry: the link route the attach matched.
        address: the address of the terminus that faces the container (the
            target of a client sender, the source of a client receiver).
        remotes: the routers advertising the route, in the order to try
            them; rotated in place so that attaches take turns.
        resumable: the client's terminus outlives its connection (a
            timeout, or expiry policy ``never``).
        allow_resumable: the router's ``allowResumableLinkRoute``.
    """
    if resumable and not allow_resumable:
        return EXPIRATION_REFUSED
    peer = entry.next_peer()
    if peer is not None:
        route = entry.route_of(peer)
        assert route is not None, "a serving connection belongs to one of the entry's routes"
        return ToContainer(peer=peer, address=external_address(address, route.spec),
                           spec=route.spec)
    if remotes:
        router = remotes[0]
        if len(remotes) > 1:
            remotes.append(remotes.pop(0))
        return ToRouter(router=router)
    return NO_ROUTE


def external_address(address: str, spec: LinkRouteSpec) -> str:
    """The address the container sees (docs/brokers.md#address-rewriting): ``delExternalPrefix``
    removed when the address starts with it and is longer, then
    ``addExternalPrefix`` put in front."""
    removed = spec.del_external_prefix
    if removed and address.startswith(removed) and len(address) > len(removed):
        address = address[len(removed):]
    return (spec.add_external_prefix or "") + address


def client_address(address: str, spec: LinkRouteSpec) -> str:
    """The address the client sees in the container's answer: the inverse
    of ``external_address``."""
    added = spec.add_external_prefix
    if added and address.startswith(added):
        address = address[len(added):]
    return (spec.del_external_prefix or "") + address


def routed_name(name: str, container_id: str | None) -> str:
    """The name of the forwarded link (docs/brokers.md#where-a-routed-attach-goes): the client's
    link name, with ``@<its container id>`` when it came from a client (not
    from another router), so links of different clients cannot collide at
    the container."""
    return name if container_id is None else f"{name}@{container_id}"


__all__ = ["EXPIRATION_REFUSED", "NO_ROUTE", "NO_ROUTE_CONDITION", "NO_ROUTE_DESCRIPTION",
           "Refusal", "ToContainer", "ToRouter", "client_address", "external_address",
           "route_attach", "routed_name"]
