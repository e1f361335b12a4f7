"""The AMQP side of the data source: a receiver in a thread, a sender in the task.

Both are proton clients of the router. :class:`Inbox` keeps a receiver in
a thread of its own, so that messages keep arriving between Spark's calls;
every proton object stays in that thread and other threads hand it work
through an event injector. :class:`Outbox` sends one Spark partition from
the task's own thread and returns only when the router has accepted every
message.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from cproton_ffi import ffi, lib
from proton import Delivery, Message, Terminus
from proton.handlers import MessagingHandler
from proton.reactor import ApplicationEvent, Container, EventInjector, LinkOption

from spark.errors import AmqpConnectError, AmqpDeliveryError
from spark.ledger import Record, Token
from spark.options import Endpoint as Where
from spark.wire import Wire, condition_text

log = logging.getLogger(__name__)


def _condition(obj: Any) -> str:
    cond = getattr(obj, "condition", None) or getattr(obj, "remote_condition", None)
    if cond is None:
        return ""
    return f"{cond.name}: {cond.description}" if cond.description else str(cond.name)


def _connect(container: Container, where: Where) -> Any:
    kwargs: dict[str, Any] = {"reconnect": False}
    if where.user:
        kwargs.update(user=where.user, password=where.password or "",
                      allowed_mechs="PLAIN", allow_insecure_mechs=True)
    return container.connect(where.url, **kwargs)


class _DurableSource(LinkOption):  # type: ignore[misc]
    """A source terminus that outlives the link: durable, never expiring."""

    def apply(self, link: Any) -> None:
        link.source.durability = Terminus.DELIVERIES
        link.source.expiry_policy = Terminus.EXPIRE_NEVER
        link.target.durability = Terminus.DELIVERIES
        link.target.expiry_policy = Terminus.EXPIRE_NEVER

    def test(self, link: Any) -> bool:
        return bool(link.is_receiver)


class _Watching(MessagingHandler):  # type: ignore[misc]
    """What the receiver and the sender share: a failure said in words.

    ``owner`` is the Inbox or Outbox, with ``where`` and ``opened``; the
    subclass says how a failure is recorded and when the end is expected.
    """

    owner: Any

    def _failed(self, what: str) -> None:
        raise NotImplementedError

    def _quiet(self) -> bool:
        """Whether the connection is ending on purpose."""
        raise NotImplementedError

    def _unsettled(self) -> str:
        return ""

    def on_link_error(self, event: Any) -> None:
        address = self.owner.where.address
        self._failed("the router refused or closed the link"
                     + (f" to {address!r}" if address else "")
                     + f" ({_condition(event.link.remote_condition and event.link)})")

    def on_connection_error(self, event: Any) -> None:
        self._failed(f"the router closed the connection "
                     f"({_condition(event.connection.remote_condition and event.connection)})")

    def on_transport_error(self, event: Any) -> None:
        if not self._quiet():
            self._failed(f"cannot reach the router at {self.owner.where.url} "
                         f"({_condition(event.transport)})")

    def on_connection_opened(self, event: Any) -> None:
        self.owner.opened = True

    def on_disconnected(self, event: Any) -> None:
        if self._quiet():
            return
        url = self.owner.where.url
        why = _condition(event.transport)
        if not self.owner.opened:
            self._failed(f"cannot reach the router at {url} ({why})")
        else:
            self._failed(f"lost the connection to the router at {url}{self._unsettled()}"
                         + (f" ({why})" if why else ""))


class _Receiving(_Watching):
    def __init__(self, inbox: Inbox) -> None:
        super().__init__(prefetch=0, auto_accept=False, auto_settle=False)
        self.inbox = self.owner = inbox

    def on_start(self, event: Any) -> None:
        inbox = self.inbox
        conn = _connect(event.container, inbox.where)
        options = [_DurableSource()] if inbox.durable else None
        inbox.link = event.container.create_receiver(
            conn, inbox.where.address, name=inbox.name, options=options)
        inbox.link.flow(inbox.initial_credit)

    def on_link_opened(self, event: Any) -> None:
        source = event.link.remote_source
        if source is None or (source.address is None and not source.dynamic):
            return  # a refusal comes next, with a detach
        self.inbox.ready.set()

    def on_delivery(self, event: Any) -> None:
        dlv = event.delivery
        link = event.link
        if dlv.aborted:
            dlv.settle()
            link.flow(1)
            return
        if not dlv.readable or dlv.partial:
            return
        data = link.recv(dlv.pending)
        link.advance()
        self.inbox.arrived(dlv, data, link.remote_source.address)

    def on_hop_ops(self, event: Any) -> None:
        self.inbox.run_ops()

    def _failed(self, what: str) -> None:
        self.inbox.fail(what)

    def _quiet(self) -> bool:
        return self.inbox.closing

    def on_link_closed(self, event: Any) -> None:
        if not self.inbox.closing:
            self._failed(f"the router closed the link to {self.inbox.where.address!r}")

class Inbox:
    """A receiver with manual acceptance and bounded credit, in a thread of its own.

    At most ``credit`` messages are held unaccepted: credit is given back
    only as messages are settled, or as the owner calls :meth:`flow`.
    """

    def __init__(self, where: Where, *, credit: int, durable: bool = False,
                 name: str | None = None,
                 decode: Callable[[Record], None] | None = None) -> None:
        self.where = where
        self.initial_credit = credit
        self.durable = durable
        self.name = name
        self.decode = decode
        self.link: Any = None
        # Deliveries by token, touched only in the receiver's thread: proton is
        # not thread-safe, and even dropping the last reference to a proton
        # object runs proton code.
        self._deliveries: dict[int, Delivery] = {}
        self._next_token = 0
        self.ready = threading.Event()
        self.closing = False
        self.opened = False
        self.failure: str | None = None
        self._cond = threading.Condition()
        self._arrived: list[Record] = []
        self._ops: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._injector = EventInjector()
        self._container = Container(_Receiving(self))
        self._container.selectable(self._injector)
        self._thread = threading.Thread(target=self._run, name="amqp-inbox", daemon=True)

    def _run(self) -> None:
        try:
            self._container.run()
        except Exception as exc:  # a bug in a handler: report it to the caller
            log.exception("the AMQP receiver thread stopped")
            self.fail(f"the AMQP receiver stopped: {exc!r}")

    def start(self) -> Inbox:
        self._thread.start()
        deadline = time.monotonic() + self.where.connect_timeout_s
        while not self.ready.wait(0.05):
            if self.failure is not None:
                self.close()
                raise AmqpConnectError(self.failure)
            if time.monotonic() > deadline:
                self.close()
                raise AmqpConnectError(
                    f"cannot reach the router at {self.where.url}: no link to "
                    f"{self.where.address!r} within {self.where.connect_timeout_s:g} s")
        return self

    # -- in the receiver thread ---------------------------------------------------

    def arrived(self, delivery: Delivery, data: bytes, address: str | None) -> None:
        token = self._next_token
        self._next_token += 1
        self._deliveries[token] = delivery
        record = Record(data=data, address=address or self.where.address,
                        received_at_s=time.time(), message_id=None, token=token)
        if self.decode is not None:
            self.decode(record)  # here: proton's decoder must not run in two threads
        with self._cond:
            self._arrived.append(record)
            self._cond.notify_all()

    def fail(self, what: str) -> None:
        with self._cond:
            if self.failure is None:
                self.failure = what
            self._cond.notify_all()

    def _settle(self, tokens: list[Token], outcome: Any) -> None:
        for token in tokens:
            dlv = self._deliveries.pop(token, None)  # type: ignore[call-overload]
            if dlv is not None:
                dlv.update(outcome)
                dlv.settle()

    def run_ops(self) -> None:
        while True:
            try:
                op = self._ops.get_nowait()
            except queue.Empty:
                return
            op()

    # -- from any thread ----------------------------------------------------------

    def _submit(self, op: Callable[[], None]) -> None:
        self._ops.put(op)
        self._injector.trigger(ApplicationEvent("hop_ops"))

    def check(self) -> None:
        if self.failure is not None:
            raise AmqpDeliveryError(self.failure)

    def take(self) -> list[Record]:
        """The messages that arrived since the last call."""
        with self._cond:
            out, self._arrived = self._arrived, []
        return out

    def wait(self, timeout_s: float) -> bool:
        """Wait until a message arrives (True) or ``timeout_s`` passes (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: bool(self._arrived) or self.failure is not None,
                                       timeout_s)

    def settle(self, accept: list[Token], release: list[Token] | None = None, *,
               replenish: bool = True) -> None:
        """Accept and release deliveries, and (unless told not to) give the credit back."""
        release = release or []
        if not accept and not release:
            return
        done = threading.Event()

        def op() -> None:
            try:
                self._settle(accept, Delivery.ACCEPTED)
                self._settle(release, Delivery.RELEASED)
                if replenish and self.link is not None and not self.closing:
                    self.link.flow(len(accept) + len(release))
            finally:
                done.set()
        self._submit(op)
        if not done.wait(self.where.connect_timeout_s):
            self.check()
            raise AmqpDeliveryError(
                f"the receiver did not settle {len(accept) + len(release)} message(s) within "
                f"{self.where.connect_timeout_s:g} s")

    def flow(self, credit: int) -> None:
        def op() -> None:
            if self.link is not None and not self.closing:
                self.link.flow(credit)
        self._submit(op)

    def close(self, release: list[Token] | None = None) -> None:
        """Release what is given, close the connection and stop the thread."""
        release = release or []

        def op() -> None:
            self._settle(release, Delivery.RELEASED)
            self.closing = True
            if self.link is not None:
                self.link.connection.close()
            self._injector.close()
        if not self._thread.is_alive():
            return
        self._submit(op)
        self._thread.join(self.where.connect_timeout_s)


class Outbox:
    """Send messages unsettled, at most ``window`` in flight, until all are
    accepted, over a :class:`spark.wire.Wire` driven from the task's own
    thread: a batch of messages per wake-up, no reactor."""

    def __init__(self, where: Where, messages: Iterator[Message], *, target: str | None,
                 window: int, send_timeout_s: float) -> None:
        self.where = where
        self.messages = messages
        self.target = target
        self.window = window
        self.send_timeout_s = send_timeout_s
        # In flight: delivery tag -> message id.
        self.unsettled: dict[int, Any] = {}
        self.failure: str | None = None
        self.sent = 0
        self.accepted = 0

    def run(self) -> int:
        """Send everything; the number accepted. Raises when any was not accepted."""
        try:
            first = next(self.messages)
        except StopIteration:
            return 0  # an empty partition: nothing to wait for, not even credit
        self.messages = itertools.chain((first,), self.messages)
        wire = Wire(self.where)
        try:
            self._send_all(wire)
        finally:
            wire.close()
        if self.failure is not None:
            if not wire.opened:
                raise AmqpConnectError(self.failure)
            raise AmqpDeliveryError(self.failure)
        return self.accepted

    def _send_all(self, wire: Wire) -> None:
        ssn = lib.pn_session(wire.conn)
        lib.pn_session_open(ssn)
        link = lib.pn_sender(ssn, f"hop-spark-{id(self)}".encode())
        if self.target is not None:
            lib.pn_terminus_set_address(lib.pn_link_target(link), self.target.encode())
        lib.pn_link_set_snd_settle_mode(link, lib.PN_SND_UNSETTLED)
        lib.pn_link_open(link)
        tag = ffi.new("uint64_t*")
        tag_bytes = ffi.new("pn_bytes_t*", (8, ffi.cast("char*", tag)))[0]
        exhausted = False
        last_progress = time.monotonic()
        while self.failure is None:
            # Send what credit and the window allow.
            while not exhausted and len(self.unsettled) < self.window \
                    and lib.pn_link_credit(link) > 0:
                try:
                    msg = next(self.messages)
                except StopIteration:
                    exhausted = True
                    break
                data = msg.encode()
                tag[0] = self.sent
                lib.pn_delivery(link, tag_bytes)  # the link's current delivery
                lib.pn_link_send(link, ffi.from_buffer(data), len(data))
                lib.pn_link_advance(link)
                self.unsettled[self.sent] = msg.id
                self.sent += 1
            if exhausted and not self.unsettled:
                return
            wire.pump(0.5)
            progressed = self._events(wire, link)
            now = time.monotonic()
            if progressed:
                last_progress = now
            elif now - last_progress > self.send_timeout_s:
                why = ("no credit" if lib.pn_link_credit(link) == 0 else "no outcome") + \
                    f" from the router for {self.send_timeout_s:g} s"
                where = f"address {self.target!r}" if self.target else "the anonymous sender"
                self.failure = f"{why} on {where}: does the address have a consumer?"

    def _events(self, wire: Wire, link: Any) -> bool:
        """Take the outcomes and failures that arrived; whether any outcome did."""
        progressed = False
        for kind, handle in wire.events():
            if kind == lib.PN_DELIVERY:
                dlv = handle
                state = lib.pn_delivery_remote_state(dlv)
                if state == 0 and not lib.pn_delivery_settled(dlv):
                    continue  # no outcome yet
                tag = lib.pn_delivery_tag(dlv)
                key = int.from_bytes(ffi.buffer(tag.start, tag.size), "little")
                message_id = self.unsettled.pop(key, None)
                lib.pn_delivery_settle(dlv)
                progressed = True
                if state == lib.PN_ACCEPTED:
                    self.accepted += 1
                elif self.failure is None:
                    outcome = _OUTCOME_NAMES.get(state, f"settled with outcome {state}")
                    cond = condition_text(lib.pn_disposition_condition(
                        lib.pn_delivery_remote(dlv)))
                    detail = f" ({cond})" if cond else ""
                    self.failure = (f"message {message_id} was {outcome}{detail}; the task "
                                    "fails so that Spark runs it again")
            elif kind in (lib.PN_LINK_REMOTE_CLOSE, lib.PN_LINK_REMOTE_DETACH):
                if self.failure is None:
                    cond = condition_text(lib.pn_link_remote_condition(handle))
                    address = self.target
                    self.failure = ("the router refused or closed the link"
                                    + (f" to {address!r}" if address else "")
                                    + (f" ({cond})" if cond else ""))
            elif kind == lib.PN_CONNECTION_REMOTE_CLOSE:
                if self.failure is None:
                    self.failure = f"the router closed the connection ({wire.connection_failure()})"
            elif kind == lib.PN_TRANSPORT_CLOSED and self.failure is None:
                url = self.where.url
                why = wire.transport_failure()
                if not wire.opened:
                    self.failure = (f"cannot reach the router at {url}"
                                    + (f" ({why})" if why else ""))
                else:
                    self.failure = (f"lost the connection to the router at {url} with "
                                    f"{len(self.unsettled)} message(s) unsettled"
                                    + (f" ({why})" if why else ""))
        return progressed


_OUTCOME_NAMES = {lib.PN_REJECTED: "rejected", lib.PN_RELEASED: "released",
                  lib.PN_MODIFIED: "modified"}
