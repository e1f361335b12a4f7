"""The AMQP side of the data source: a receiver in a thread, a sender in the task.

Both are proton clients of the router. :class:`Inbox` keeps a receiver in
a thread of its own, so that messages keep arriving between Spark's calls;
every proton object stays in that thread and other threads hand it work
through a queue. :class:`Outbox` sends one Spark partition from the task's
own thread and returns only when the router has accepted every message.
Both drive proton's C engine from a loop of their own (:mod:`spark.wire`).
"""

from __future__ import annotations

import itertools
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from cproton_ffi import ffi, lib

from spark.errors import AmqpConnectError, AmqpDeliveryError
from spark.ledger import Record, Token
from spark.options import Endpoint as Where
from spark.wire import Wire, condition_text

log = logging.getLogger(__name__)


class Inbox:
    """A receiver with manual acceptance and bounded credit, in a thread of its own.

    At most ``credit`` messages are held unaccepted: credit is given back
    only as messages are settled, or as the owner calls :meth:`flow`. The
    thread drives a :class:`spark.wire.Wire`; every proton object stays in
    it, and other threads hand it work through a queue and a wake-up socket.
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
        # Deliveries by token, touched only in the receiver's thread.
        self._deliveries: dict[int, Any] = {}
        self._next_token = 0
        self.ready = threading.Event()
        self.closing = False
        self.opened = False
        self.failure: str | None = None
        self._cond = threading.Condition()
        self._arrived: list[Record] = []
        # Each delivery's bytes are read into this, then copied once into bytes.
        self._buffer = ffi.new("char[]", 65536)
        self._ops: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._wake, self._waker = socket.socketpair()
        self._wake.setblocking(False)
        self._waker.setblocking(False)
        self._address = where.address
        self._close_by: float | None = None
        self._thread = threading.Thread(target=self._run, name="amqp-inbox", daemon=True)

    def _run(self) -> None:
        try:
            wire = Wire(self.where)
        except AmqpConnectError as exc:
            self.fail(str(exc))
            return
        try:
            self._attach(wire)
            while not wire.closed:
                wire.pump(0.5, self._wake)
                self._drain_wake()
                self.run_ops()
                self._events(wire)
                if self._close_by is not None and time.monotonic() > self._close_by:
                    break
        except Exception as exc:  # a bug here: report it to the caller
            log.exception("the AMQP receiver thread stopped")
            self.fail(f"the AMQP receiver stopped: {exc!r}")
        finally:
            self._deliveries.clear()
            wire.close(0.0 if self._close_by is None else 0.5)

    def _attach(self, wire: Wire) -> None:
        ssn = lib.pn_session(wire.conn)
        lib.pn_session_open(ssn)
        name = self.name or f"hop-spark-{id(self)}"
        link = self.link = lib.pn_receiver(ssn, name.encode())
        source = lib.pn_link_source(link)
        if self.where.address is not None:
            lib.pn_terminus_set_address(source, self.where.address.encode())
        if self.durable:  # a source terminus that outlives the link
            for terminus in (source, lib.pn_link_target(link)):
                lib.pn_terminus_set_durability(terminus, lib.PN_DELIVERIES)
                lib.pn_terminus_set_expiry_policy(terminus, lib.PN_EXPIRE_NEVER)
        lib.pn_link_open(link)
        lib.pn_link_flow(link, self.initial_credit)

    def _drain_wake(self) -> None:
        try:
            while self._wake.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _events(self, wire: Wire) -> None:
        got: list[Record] = []
        for kind, handle in wire.events():
            if kind == lib.PN_DELIVERY:
                self._delivered(handle, got)
            elif kind == lib.PN_LINK_REMOTE_OPEN:
                source = lib.pn_link_remote_source(handle)
                address = lib.pn_terminus_get_address(source)
                if address == ffi.NULL and not lib.pn_terminus_is_dynamic(source):
                    continue  # a refusal comes next, with a detach
                if address != ffi.NULL:
                    self._address = ffi.string(address).decode()
                self.opened = True
                self.ready.set()
            elif kind in (lib.PN_LINK_REMOTE_CLOSE, lib.PN_LINK_REMOTE_DETACH):
                if not self.closing:
                    cond = condition_text(lib.pn_link_remote_condition(handle))
                    address = self.where.address
                    self.fail(f"the router refused or closed the link to {address!r} ({cond})"
                              if cond else f"the router closed the link to {address!r}")
            elif kind == lib.PN_CONNECTION_REMOTE_CLOSE:
                if not self.closing:
                    self.fail(f"the router closed the connection ({wire.connection_failure()})")
            elif kind == lib.PN_TRANSPORT_CLOSED and not self.closing:
                self.fail(wire.lost())
        if got:
            # One hand-over for everything this wake-up brought, not one a message.
            with self._cond:
                self._arrived.extend(got)
                self._cond.notify_all()

    def _delivered(self, dlv: Any, got: list[Record]) -> None:
        link = self.link
        if lib.pn_delivery_aborted(dlv):
            lib.pn_delivery_settle(dlv)
            lib.pn_link_flow(link, 1)
            return
        if not lib.pn_delivery_readable(dlv) or lib.pn_delivery_partial(dlv):
            return
        size = lib.pn_delivery_pending(dlv)
        if size > len(self._buffer):
            self._buffer = ffi.new("char[]", size)
        read = lib.pn_link_recv(link, self._buffer, size) if size > 0 else 0
        data = ffi.buffer(self._buffer, read)[:] if read > 0 else b""
        lib.pn_link_advance(link)
        got.append(self.arrived(dlv, data, self._address))

    # -- in the receiver thread ---------------------------------------------------

    def arrived(self, delivery: Any, data: bytes, address: str | None) -> Record:
        """The record of one delivery, kept for settling; the caller hands it over."""
        token = self._next_token
        self._next_token += 1
        self._deliveries[token] = delivery
        record = Record(data=data, address=address or self.where.address,
                        received_at_s=time.time(), message_id=None, token=token)
        if self.decode is not None:
            self.decode(record)  # here: proton's decoder must not run in two threads
        return record

    def fail(self, what: str) -> None:
        with self._cond:
            if self.failure is None:
                self.failure = what
            self._cond.notify_all()

    def _settle(self, tokens: list[Token], outcome: int) -> None:
        for token in tokens:
            dlv = self._deliveries.pop(token, None)  # type: ignore[call-overload]
            if dlv is not None:
                lib.pn_delivery_update(dlv, outcome)
                lib.pn_delivery_settle(dlv)

    def run_ops(self) -> None:
        while True:
            try:
                op = self._ops.get_nowait()
            except queue.Empty:
                return
            op()

    # -- from any thread ----------------------------------------------------------

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

    def _submit(self, op: Callable[[], None]) -> None:
        self._ops.put(op)
        try:
            self._waker.send(b"!")
        except (BlockingIOError, InterruptedError):
            pass  # already awake to come
        except OSError:
            pass  # the thread has ended

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

    def wait_for(self, count: int, timeout_s: float) -> None:
        """Wait until ``count`` messages have arrived since the last :meth:`take`,
        or ``timeout_s`` passes."""
        with self._cond:
            self._cond.wait_for(lambda: len(self._arrived) >= count
                                or self.failure is not None, timeout_s)

    def settle(self, accept: list[Token], release: list[Token] | None = None, *,
               replenish: bool = True, wait: bool = True) -> None:
        """Accept and release deliveries, and (unless told not to) give the credit back;
        with ``wait`` False, return once the receiver's thread has the work (it
        is done in order with everything else handed to it)."""
        release = release or []
        if not accept and not release:
            return
        if not wait:
            def later() -> None:
                self._settle(accept, lib.PN_ACCEPTED)
                self._settle(release, lib.PN_RELEASED)
                if replenish and self.link is not None and not self.closing:
                    lib.pn_link_flow(self.link, len(accept) + len(release))
            self._submit(later)
            return
        done = threading.Event()

        def op() -> None:
            try:
                self._settle(accept, lib.PN_ACCEPTED)
                self._settle(release, lib.PN_RELEASED)
                if replenish and self.link is not None and not self.closing:
                    lib.pn_link_flow(self.link, len(accept) + len(release))
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
                lib.pn_link_flow(self.link, credit)
        self._submit(op)

    def close(self, release: list[Token] | None = None) -> None:
        """Release what is given, close the connection and stop the thread."""
        release = release or []

        def op() -> None:
            self._settle(release, lib.PN_RELEASED)
            self.closing = True
            if self.link is not None:
                lib.pn_connection_close(lib.pn_session_connection(lib.pn_link_session(self.link)))
            self._close_by = time.monotonic() + 1.0
        if self._thread.is_alive():
            self._submit(op)
            self._thread.join(self.where.connect_timeout_s)
        self._wake.close()
        self._waker.close()


class Outbox:
    """Send messages (encoded, with their message ids) unsettled, at most
    ``window`` in flight, until all are accepted, over a
    :class:`spark.wire.Wire` driven from the task's own thread: a batch of
    messages per wake-up, no reactor."""

    def __init__(self, where: Where, messages: Iterator[tuple[bytes, Any]], *,
                 target: str | None,
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
                    data, message_id = next(self.messages)
                except StopIteration:
                    exhausted = True
                    break
                tag[0] = self.sent
                lib.pn_delivery(link, tag_bytes)  # the link's current delivery
                lib.pn_link_send(link, ffi.from_buffer(data), len(data))
                lib.pn_link_advance(link)
                self.unsettled[self.sent] = message_id
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
                self.failure = wire.lost(f" with {len(self.unsettled)} message(s) unsettled")
        return progressed


_OUTCOME_NAMES = {lib.PN_REJECTED: "rejected", lib.PN_RELEASED: "released",
                  lib.PN_MODIFIED: "modified"}
