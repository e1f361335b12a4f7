"""Re-forwarding: a delivery one consumer gives back goes to the next
(docs/routing.md#re-forwarding-released-deliveries).

Owns keeping the message of an unsettled delivery for an address with a
``redeliveryLimit``, and, when its copy comes back RELEASED or MODIFIED
without ``undeliverable-here``, sending it to a destination it has not
been to (a local consumer, another router, the uplink or an edge's
downlink) before the producer hears anything.  The decisions are
``router.core.redelivery``'s; this module reads the consumer's disposition
and sends the copy.  Nothing here runs for a message on its way, only for
one that came back: the per-message parts call ``hold`` behind a test of
the address's limit.
"""

from __future__ import annotations

import logging
from typing import Any

from addressing import Distribution, effective_priority
from router.adapter.forwarding.network import NetworkForwarding, addressed
from router.adapter.forwarding.sending import Sender, local_copy
from router.adapter.pending import Counters
from router.adapter.pn import NULL, ffi, lib
from router.core import (
    AddressRecord,
    Held,
    MessageFormatError,
    MessageInfo,
    MessageReader,
    OutLink,
    RemoteTarget,
    Router,
    RouterAnnotations,
    Transfer,
    UplinkTarget,
)
from router.core.amqp import PeerProtocolError
from router.core.message import NO_ANNOTATIONS
from router.core.redelivery import choose_again, may_redeliver, redelivered_copy
from router.core.settlement import MODIFIED

log = logging.getLogger(__name__)

_CLOSEST = Distribution.CLOSEST


def _live(ol: OutLink) -> bool:
    """A consumer that can be sent to: attached, on a connection not closing."""
    return ol.handle is not None and not ol.conn.handle.closed


def _encoded(data: Any) -> bytes | None:
    """The AMQP encoding of a proton data tree (``pn_data_t``), None when empty."""
    if data == NULL:
        return None
    lib.pn_data_rewind(data)
    size = lib.pn_data_encoded_size(data)
    if size <= 0:
        return None
    buf = ffi.new("char[]", size)
    n = lib.pn_data_encode(data, buf, size)
    return bytes(ffi.buffer(buf, n)) if n > 0 else None


class Redelivery:
    """Keeps messages and forwards them again.

    Args:
        router: the routing core (addresses, the network, an edge's uplink).
        sender: sends the copies.
        network: the annotations a copy to another router gets.
        counters: the router-wide counts (``deliveriesRedelivered``).
        reader: this router's reading of messages (its memos).
    """

    def __init__(self, router: Router, sender: Sender, network: NetworkForwarding,
                 counters: Counters, reader: MessageReader) -> None:
        self.router = router
        self.reader = reader
        self.sender = sender
        self.network = network
        self.counters = counters

    def again(self, ref: Transfer, ol: OutLink, state: int, disposition: Any) -> bool:
        """The copy of ``ref`` sent on ``ol`` came back with ``state``: forward
        the message again if it may go somewhere else, and say whether it
        did.  ``disposition`` is the consumer's (``pn_disposition_t``), or
        None for a copy the router took back itself (its consumer left:
        MODIFIED means it may have been delivered).  The caller settles the
        copy that came back; when this returns False the producer is told."""
        held = ref.held
        if held is None or ref.in_delivery is None:
            return False
        failed = undeliverable = False
        annotations = None
        if state == MODIFIED:
            if disposition is None:
                failed = True
            else:
                failed = bool(lib.pn_disposition_is_failed(disposition))
                undeliverable = bool(lib.pn_disposition_is_undeliverable(disposition))
                annotations = _encoded(lib.pn_disposition_annotations(disposition))
        record = held.record
        held.failed = held.failed or failed
        to = None
        if may_redeliver(state, undeliverable, held.attempts, record.redelivery_limit):
            to = self._again(ref, held, ol, failed, annotations)
        if to is None:
            # The producer is told now; a later settlement of the same copy
            # (a consumer that gave its outcome first) changes nothing.
            held.attempts = record.redelivery_limit
            held.data = b""
            return False
        held.attempts += 1
        self.counters.redelivered += 1
        record.redelivered += 1
        log.debug("%r: a delivery %s by %r forwarded again, to %r (%d of %d)", ref.in_link,
                  "released" if state != MODIFIED else "modified", ol, to, held.attempts,
                  record.redelivery_limit)
        return True

    def _again(self, ref: Transfer, held: Held, ol: OutLink, failed: bool,
               annotations: bytes | None) -> OutLink | None:
        """Send the message of ``held`` on to a destination it has not been
        to, ``ol`` now among them; the link it went on, or None."""
        if held.tried is None:
            held.tried = [ol]
        else:
            held.tried.append(ol)
        try:
            data = redelivered_copy(held.data, failed, annotations)
            info = self.reader.scan(data)
            ann = self.reader.decode_annotations(data, info) if info.router_keys else None
        except (MessageFormatError, PeerProtocolError) as exc:
            log.warning("%r: not forwarded again: %s", ref.in_link, exc)
            return None
        if held.to is not None and ref.in_link.record is None \
                and (ann is None or ann.to != held.to):
            # The address routing read (a vhost's), as the first time.
            ann = (ann if ann is not None else NO_ANNOTATIONS)._replace(to=held.to)
        if ref.target is not None:
            ref.target.outstanding -= 1
            ref.target = None
        to = self._forward(ref, held, data, info, ann)
        if to is not None:
            held.data = data
        return to

    def _forward(self, ref: Transfer, held: Held, data: bytes, info: MessageInfo,
                 ann: RouterAnnotations | None) -> OutLink | None:
        """Send ``data`` to a destination ``held`` has not been to; the link
        it went on, None when there is none."""
        il = ref.in_link
        record = held.record
        consumers = [ol for ol in record.consumers if _live(ol)]
        if il.transit and il.router_link is None:
            # From an edge: never back over its connection.
            consumers = [ol for ol in consumers if ol.conn is not il.conn]
        closest = record.distribution is _CLOSEST
        tried = held.tried
        assert tried is not None
        if self.router.uplink is not None:
            # An edge router: its consumers, then the uplink, unless the
            # message came down it.
            ups: list[UplinkTarget] = [] if il.transit else record.remotes
            chosen_up = choose_again(closest, consumers, ups, tried, _uplink)
            if chosen_up is None:
                return None
            if isinstance(chosen_up, UplinkTarget):
                return self._send(ref, chosen_up.link, self.network.upward_copy(
                    il, data, info, ann, held.phase), False)
            return self._send_local(ref, record, chosen_up, data, info, ann)
        remotes = record.remotes
        if remotes and type(remotes[0]) is UplinkTarget:
            # An edge's own address, on the interior it is attached to.
            downs = [t for t in remotes if not (il.transit and il.router_link is None
                                                and t.link.conn is il.conn)]
            chosen_down = choose_again(closest, consumers, downs, tried, _uplink)
            if chosen_down is None:
                return None
            if isinstance(chosen_down, UplinkTarget):
                to, phase = addressed(il, ann, held.phase)
                return self._send(ref, chosen_down.link, self.sender.encoder.annotate(
                    data, info, ann, to=to, phase=phase), False)
            return self._send_local(ref, record, chosen_down, data, info, ann)
        network = self.router.network
        origin = ann.origin if ann is not None else None
        visited = ann.visited if ann is not None else frozenset()
        priority = effective_priority(record.priority, info.priority)
        far = [t for t in (sorted(remotes, key=_cost) if closest else remotes)
               if t.link.peer not in visited
               and (network is None or network.valid_origin(t, origin))]

        def via(target: RemoteTarget) -> OutLink | None:
            return target.link.data_link(priority)

        chosen = choose_again(closest, consumers, far, tried, via)
        if chosen is None:
            return None
        if isinstance(chosen, OutLink):
            return self._send_local(ref, record, chosen, data, info, ann)
        out = via(chosen)
        assert out is not None
        hop = chosen.hop
        ref.target = hop
        hop.outstanding += 1
        record.transit += 1
        to, phase = addressed(il, ann, held.phase)
        return self._send(ref, out, self.sender.encoder.annotate(data, info, ann, to=to,
                                                                 phase=phase), True)

    def _send_local(self, ref: Transfer, record: AddressRecord, ol: OutLink, data: bytes,
                    info: MessageInfo, ann: RouterAnnotations | None) -> OutLink:
        consumers = record.consumers
        if len(consumers) > 1 and consumers[-1] is not ol and ol in consumers:
            consumers.remove(ol)  # the round-robin moves on past it
            consumers.append(ol)
        payload, keys = local_copy(ol, data, info, ann, self.reader)
        return self._send(ref, ol, payload, keys)

    def _send(self, ref: Transfer, ol: OutLink, data: bytes, keys: bool) -> OutLink:
        ref.out_delivery = None
        ref.out_link = None
        self.sender.send(ol, data, ref, keys)
        return ol


def _uplink(target: UplinkTarget) -> OutLink:
    return target.link


def _cost(target: RemoteTarget) -> int:
    return target.cost


__all__ = ["Redelivery"]
