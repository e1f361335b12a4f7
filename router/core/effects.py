"""Effects the routing core asks the adapter to carry out.

Small frozen records: what to attach, refuse, or how a sender's credit must
change.  They are produced on control-plane events (attach, detach), never
per message.
"""

from __future__ import annotations

import attrs

from autolink import AutoLink
from router.core.records import Connection, InLink, OutLink, RoutedEnd, RouterLink


@attrs.frozen(kw_only=True)
class AttachRefused:
    """Refuse an attach: answer it, then detach with ``condition``.

    ``null_terminus`` answers with a null target/source first, as AMQP 1.0
    2.6.3 asks of a refused attach (and as qdrouterd does for a coordinator).
    """

    condition: str
    description: str
    null_terminus: bool = False


@attrs.frozen(kw_only=True)
class IncomingAccepted:
    """A client sender was bound; reply with ``address`` as the target address
    (the generated one for a dynamic target, else what the client asked)."""

    link: InLink
    address: str | None


@attrs.frozen(kw_only=True)
class OutgoingAccepted:
    """A client receiver was bound; reply with ``address`` as the source
    address (the generated one for a dynamic source)."""

    link: OutLink
    address: str | None


@attrs.frozen(kw_only=True)
class UnblockSender:
    """The sender's address gained a destination: clear drain, top credit up."""

    link: InLink


@attrs.frozen(kw_only=True)
class BlockSender:
    """The sender's address lost its last destination: give no more credit,
    and with ``drain`` ask the sender to give back what it has
    (docs/routing.md#credit)."""

    link: InLink
    drain: bool = True


@attrs.frozen(kw_only=True)
class SendFrame:
    """Send ``data`` (an encoded control message) pre-settled on the
    router-outgoing control link of ``link``."""

    link: RouterLink
    data: bytes


@attrs.frozen(kw_only=True)
class AttachAutoLink:
    """Attach an auto-link's link on ``conn``: a sender whose target is
    ``address`` (``out``), else a receiver whose source is ``address``; the
    other terminus empty (docs/brokers.md#the-life-of-an-auto-link).  The answer goes to
    ``Router.autolink_attached``."""

    autolink: AutoLink[Connection]
    conn: Connection
    sender: bool
    address: str


@attrs.frozen(kw_only=True)
class DetachAutoLink:
    """An auto-link was deleted: close its link (attached, or still waiting
    for the container's answer); the link's deliveries end as for any link
    that goes away."""

    autolink: AutoLink[Connection]


@attrs.frozen(kw_only=True)
class ForwardAttach:
    """Attach the far end of a link-routed pair on ``far.conn``
    (docs/brokers.md#where-a-routed-attach-goes): the role opposite the
    client's, the client's termini copied,
    the container-facing terminus addressed ``address``, named ``name``."""

    near: RoutedEnd
    far: RoutedEnd
    name: str
    address: str


@attrs.frozen(kw_only=True)
class AnswerAttach:
    """Answer the client's attach on ``near`` with the far side's termini and
    the container-facing address ``address``; with ``null`` the terminus is
    null, the attach is refused and a detach follows (docs/brokers.md#the-routed-pair)."""

    near: RoutedEnd
    address: str | None
    null: bool = False


@attrs.frozen(kw_only=True)
class DetachRouted:
    """Detach one link of a link-routed pair with this error, closing it
    unless ``closed`` is false; its unsettled deliveries get outcomes first."""

    end: RoutedEnd
    condition: str | None
    description: str | None
    closed: bool = True


@attrs.frozen(kw_only=True)
class AttachOwnLink:
    """Attach ``link``, a link the router makes itself on ``link.conn`` (the
    links of an edge uplink, docs/networks.md#edge-routers): a sender when
    ``link`` is an ``OutLink``, else a receiver, with these terminus
    addresses and ``capabilities`` on both termini.  ``dynamic`` asks the
    peer for a dynamic source (the peer's answer goes to
    ``Router.own_link_answered``)."""

    link: InLink | OutLink
    source: str | None = None
    target: str | None = None
    capabilities: tuple[str, ...] = ()
    dynamic: bool = False


@attrs.frozen(kw_only=True)
class DetachOwnLink:
    """Detach ``link``, one of the router's own links the core has already
    unbound; what it holds ends as for any link that goes away."""

    link: InLink | OutLink


@attrs.frozen(kw_only=True)
class SendOnLink:
    """Send ``data`` (a message the router makes itself) on ``link``, queued
    until the link has credit: pre-settled, or unsettled when ``settled`` is
    false (its outcome goes nowhere; a management request that must say which
    connection it came on)."""

    link: OutLink
    data: bytes
    settled: bool = True


@attrs.frozen(kw_only=True)
class RouteMessage:
    """Route ``data``, a pre-settled message the router makes itself (a reply
    to a request), as if a client had sent it on an anonymous link."""

    data: bytes


@attrs.frozen(kw_only=True)
class LookupAnswered:
    """The interior answered an edge's link-route lookup for the client
    attach ``handle`` (or could not: no uplink, no answer in time, which
    reads as "not link-routed"): go on with it
    (docs/networks.md#link-routes-through-an-edge)."""

    handle: object
    link_route: bool
    destinations: bool


@attrs.frozen(kw_only=True)
class CloseConnection:
    """Close ``conn`` (condition ``amqp:connection:forced``, this
    description): a peer that went silent."""

    conn: Connection
    description: str


CreditEffect = UnblockSender | BlockSender
RoutedEffect = ForwardAttach | AnswerAttach | DetachRouted
OwnLinkEffect = (AttachOwnLink | DetachOwnLink | SendOnLink | RouteMessage | CloseConnection
                 | LookupAnswered)
Effect = (UnblockSender | BlockSender | SendFrame | AttachAutoLink | DetachAutoLink
          | RoutedEffect | OwnLinkEffect)
