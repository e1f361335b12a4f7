"""The soak's clients (bench.soak), each a process of its own so that the
soak can kill one the way a crash would.

``python -m bench.soak_clients ROLE --id N --urls URL[,URL...] ADDRESS [options]``

- ``send``: an at-least-once producer.  Numbered messages (application
  properties ``i`` = the client's id, ``n`` = its sequence number) at
  ``--rate`` per second (0: as fast as credit allows); every message whose
  outcome is not ACCEPTED (released, modified, its link or connection lost
  before the outcome came) is sent again.  SIGTERM stops new messages; the
  sender then waits up to ``--grace`` seconds for the outstanding outcomes.
- ``recv``: a consumer that writes each message's (``i``, ``n``) to
  ``--record`` (8 bytes, one write each) before accepting it, so that what
  it took survives SIGKILL; ``--relink S`` detaches and attaches its link
  again every S seconds.
- ``request``: connects, attaches a dynamic receiver for replies, sends
  ``--batch`` requests to ADDRESS with that reply-to, waits for every reply
  (asking again after 10 s without one), leaves, and does it again on the
  next router in ``--urls``, until SIGTERM.
- ``serve``: answers each request on an anonymous sender to its reply-to.

Every client goes back to its list of routers when a connection or a link
is lost.  At exit it prints one JSON line of counts on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import struct
import sys
import time
from collections import deque
from typing import Any

from proton import Delivery, Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

RECORD = struct.Struct("<II")
TICK_S = 0.01
REPLY_WAIT_S = 10.0


class _Client(MessagingHandler):  # type: ignore[misc]
    """A connection to the first of ``urls`` that answers, made again (to
    the next one) when it is lost; ``attach`` makes the role's links."""

    def __init__(self, args: argparse.Namespace, prefetch: int = 0) -> None:
        super().__init__(prefetch=prefetch, auto_accept=False)
        self.args = args
        self.urls: list[str] = args.urls.split(",")
        self.turn = 0
        self.conn: Any = None
        self.container: Any = None
        self.stopping = False
        # SIGTERM: finish (producers: no new messages, wait for outcomes).
        self.stopping_requested = False
        self.counts: dict[str, int] = {"connections": 0, "connections_lost": 0,
                                       "links_lost": 0}

    def count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    # -- the connection ------------------------------------------------------------

    def on_start(self, event: Any) -> None:
        self.container = event.container
        self.connect()
        self.container.schedule(TICK_S, self)

    def connect(self) -> None:
        url = self.urls[self.turn % len(self.urls)]
        self.turn += 1
        self.conn = self.container.connect(url, reconnect=False, allowed_mechs="ANONYMOUS")

    def on_connection_opened(self, event: Any) -> None:
        if event.connection == self.conn:
            self.count("connections")
            self.attach()

    def on_disconnected(self, event: Any) -> None:
        if event.connection != self.conn:
            return
        self.count("connections_lost")
        self.conn = None
        self.lost()
        if not self.stopping:
            # Back to the list after a pause, not in a tight loop.
            self.container.schedule(0.2 + random.random() * 0.3, _Call(self.reconnect))

    def reconnect(self) -> None:
        if self.conn is None and not self.stopping:
            self.connect()

    def on_connection_error(self, event: Any) -> None:
        self.on_disconnected(event)

    def on_transport_closed(self, event: Any) -> None:
        # Also when proton closed the connection itself, which it does when
        # the peer ends a session with an error (RabbitMQ's at its shutdown):
        # proton then calls no on_disconnected.
        self.on_disconnected(event)

    def on_connection_closing(self, event: Any) -> None:
        self.on_disconnected(event)

    def on_link_error(self, event: Any) -> None:
        self._link_closed(event)

    def on_link_closing(self, event: Any) -> None:
        self._link_closed(event)

    def _link_closed(self, event: Any) -> None:
        if event.connection == self.conn and not self.stopping:
            self.count("links_lost")
            self.link_lost(event.link)

    # -- the role's part ---------------------------------------------------------------

    def attach(self) -> None:
        raise NotImplementedError

    def lost(self) -> None:
        """The connection is gone, and every link and delivery on it."""

    def link_lost(self, link: Any) -> None:
        """The peer detached ``link``: attach another after a pause."""
        self.container.schedule(0.5, _Call(self._reattach, self.conn))

    def _reattach(self, conn: Any) -> None:
        if conn is not None and conn == self.conn and not self.stopping:
            self.attach()

    def tick(self) -> None:
        """Called every TICK_S."""

    def on_timer_task(self, event: Any) -> None:
        self.tick()
        if not self.finished():
            self.container.schedule(TICK_S, self)
        else:
            self.stopping = True
            if self.conn is not None:
                self.conn.close()
            self.container.stop()

    def finished(self) -> bool:
        return False

    def summary(self) -> dict[str, Any]:
        return {"role": self.args.role, "id": self.args.id, "address": self.args.address,
                **self.counts}


class _Call:
    """A timer task calling ``fn(*args)``."""

    def __init__(self, fn: Any, *args: Any) -> None:
        self.fn = fn
        self.args = args

    def on_timer_task(self, event: Any) -> None:
        self.fn(*self.args)


class Producer(_Client):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.body = b"x" * args.size
        self.sender: Any = None
        self.next = 0
        self.todo: deque[int] = deque()
        self.in_flight: dict[Any, int] = {}
        self.rejected: list[int] = []
        self.budget = 0.0
        self.last = time.monotonic()
        self.end_by = 0.0
        self.deadline = time.monotonic() + args.seconds if args.seconds else 0.0

    def attach(self) -> None:
        self.sender = self.container.create_sender(self.conn, self.args.address)

    def lost(self) -> None:
        self._resend_all()
        self.sender = None

    def link_lost(self, link: Any) -> None:
        if link == self.sender:
            self._resend_all()
            self.sender = None
            super().link_lost(link)

    def _resend_all(self) -> None:
        """Outcomes that can no longer come: send those messages again."""
        if self.in_flight:
            self.count("resent_unknown", len(self.in_flight))
            self.todo.extendleft(sorted(self.in_flight.values(), reverse=True))
            self.in_flight.clear()

    def producing(self) -> bool:
        if self.deadline and time.monotonic() > self.deadline:
            return False
        return not self.stopping_requested

    def tick(self) -> None:
        now = time.monotonic()
        rate = self.args.rate
        self.budget = min(self.budget + (now - self.last) * rate, max(rate * 0.1, 1.0))
        self.last = now
        self._send(limited=rate > 0)

    def on_sendable(self, event: Any) -> None:
        if self.args.rate == 0:
            self._send(limited=False)

    def _send(self, limited: bool) -> None:
        sender = self.sender
        if sender is None or not sender.state & sender.REMOTE_ACTIVE:
            return
        making = self.producing()
        while sender.credit > 0 and (self.todo or making):
            if limited and self.budget < 1.0:
                return
            if self.todo:
                n = self.todo.popleft()
                self.count("resent")
            else:
                n = self.next
                self.next += 1
            delivery = sender.send(Message(body=self.body, durable=True,
                                           properties={"i": self.args.id, "n": n}))
            self.in_flight[delivery] = n
            self.count("sent")
            self.budget -= 1.0

    def _outcome(self, event: Any, name: str) -> None:
        n = self.in_flight.pop(event.delivery, None)
        if n is None:
            return
        self.count(name)
        if name == "accepted":
            return
        if name == "rejected":
            self.rejected.append(n)
        else:
            self.todo.append(n)

    def on_accepted(self, event: Any) -> None:
        self._outcome(event, "accepted")

    def on_rejected(self, event: Any) -> None:
        self._outcome(event, "rejected")

    def on_released(self, event: Any) -> None:
        modified = event.delivery.remote_state == Delivery.MODIFIED
        self._outcome(event, "modified" if modified else "released")

    def finished(self) -> bool:
        if self.producing():
            return False
        if not self.in_flight and not self.todo:
            return True
        if not self.end_by:  # the grace for the outcomes begins
            self.end_by = time.monotonic() + self.args.grace
        return time.monotonic() > self.end_by

    def summary(self) -> dict[str, Any]:
        # What has no outcome at the end: on a link that is up (a delivery the
        # router never settled), or waiting to be sent again.
        return {**super().summary(), "generated": self.next,
                "no_outcome": sorted(self.in_flight.values()),
                "not_resent": sorted(self.todo), "rejected_numbers": self.rejected}


class Consumer(_Client):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args, prefetch=args.credit)
        self.fd = os.open(args.record, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.receiver: Any = None
        self.relink_at = 0.0

    def attach(self) -> None:
        self.receiver = self.container.create_receiver(self.conn, self.args.address)
        if self.args.relink:
            self.relink_at = time.monotonic() + self.args.relink * (0.5 + random.random())

    def link_lost(self, link: Any) -> None:
        if link == self.receiver:
            self.receiver = None
            super().link_lost(link)

    def on_message(self, event: Any) -> None:
        props = event.message.properties or {}
        os.write(self.fd, RECORD.pack(int(props["i"]), int(props["n"])))
        self.count("received")
        self.accept(event.delivery)

    def tick(self) -> None:
        if self.relink_at and time.monotonic() > self.relink_at and self.receiver is not None:
            # Detach and attach again: what the link held unsettled goes back
            # to its sender's router as released.
            self.receiver.close()
            self.count("relinks")
            self.relink_at = 0.0
            self.container.schedule(0.2, _Call(self._reattach, self.conn))

    def finished(self) -> bool:
        return self.stopping_requested


class Requester(_Client):
    """Cycles of: connect, dynamic reply-to, ``--batch`` requests, leave."""

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args, prefetch=50)
        self.reply_to: str | None = None
        self.sender: Any = None
        self.next = 0
        # The batch's unanswered requests -> when last sent (None: to send).
        self.open: dict[int, float | None] = {}
        self.in_flight: dict[Any, int] = {}
        self.answered: set[int] = set()
        self.batch_done = False
        self.end_by = 0.0

    def attach(self) -> None:
        self.reply_to = None
        self.batch_done = False
        self.container.create_receiver(self.conn, None, dynamic=True)
        self.sender = self.container.create_sender(self.conn, self.args.address)

    def on_link_opened(self, event: Any) -> None:
        if event.connection == self.conn and event.receiver is not None:
            self.reply_to = event.receiver.remote_source.address

    def lost(self) -> None:
        self.in_flight.clear()
        for n in self.open:
            self.open[n] = None  # ask again on the next connection
        self.sender = None
        self.reply_to = None

    def link_lost(self, link: Any) -> None:
        self._leave()  # either link gone: start again, elsewhere

    def _leave(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
            self.lost()
            self.container.schedule(0.3, _Call(self.reconnect))

    def tick(self) -> None:
        now = time.monotonic()
        sender = self.sender
        if self.reply_to is None or sender is None or not sender.state & sender.REMOTE_ACTIVE:
            return
        if not self.open:
            if self.stopping_requested:
                return
            if self.batch_done:  # a batch answered here: leave
                self.count("cycles")
                self._leave()
                return
            for _ in range(self.args.batch):
                self.open[self.next] = None
                self.next += 1
        for n, sent in list(self.open.items()):
            if sender.credit <= 0:
                break
            if sent is not None and now - sent < REPLY_WAIT_S:
                continue
            if sent is not None:
                self.count("resent_no_reply")
            request = Message(body=b"?", reply_to=self.reply_to, correlation_id=n,
                              properties={"i": self.args.id, "n": n})
            self.in_flight[sender.send(request)] = n
            self.open[n] = now
            self.count("requests_sent")

    def on_accepted(self, event: Any) -> None:
        if self.in_flight.pop(event.delivery, None) is not None:
            self.count("accepted")

    def _again(self, event: Any, name: str) -> None:
        n = self.in_flight.pop(event.delivery, None)
        if n is not None:
            self.count(name)
            if n in self.open:
                self.open[n] = None  # send again at once

    def on_rejected(self, event: Any) -> None:
        self._again(event, "rejected")

    def on_released(self, event: Any) -> None:
        self._again(event, "released")

    def on_message(self, event: Any) -> None:
        n = int(event.message.correlation_id)
        self.accept(event.delivery)
        if n in self.answered:
            self.count("duplicate_replies")
            return
        self.answered.add(n)
        self.count("answered")
        self.open.pop(n, None)
        if not self.open:
            self.batch_done = True

    def finished(self) -> bool:
        if not self.stopping_requested:
            return False
        if not self.open:
            return True
        # The grace begins here, not in ``tick``: SIGTERM may land between the
        # two, and an unset ``end_by`` must not count as a grace gone by.
        if not self.end_by:
            self.end_by = time.monotonic() + self.args.grace
        return time.monotonic() > self.end_by

    def summary(self) -> dict[str, Any]:
        return {**super().summary(), "requests": self.next, "unanswered": sorted(self.open)}


class Server(_Client):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args, prefetch=args.credit)
        self.replies: Any = None

    def attach(self) -> None:
        self.container.create_receiver(self.conn, self.args.address)
        self.replies = self.container.create_sender(self.conn, None)

    def on_message(self, event: Any) -> None:
        request = event.message
        replies = self.replies
        if replies is None or replies.credit <= 0 or not request.reply_to:
            # No way to answer now: the requester asks again.
            self.release(event.delivery, delivered=False)
            self.count("declined")
            return
        replies.send(Message(address=request.reply_to, correlation_id=request.correlation_id,
                             body=b"!"))
        self.accept(event.delivery)
        self.count("answered")

    def on_released(self, event: Any) -> None:
        self.count("replies_released")

    def on_accepted(self, event: Any) -> None:
        self.count("replies_accepted")

    def finished(self) -> bool:
        return self.stopping_requested


ROLES: dict[str, type[_Client]] = {"send": Producer, "recv": Consumer,
                                   "request": Requester, "serve": Server}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak_clients", description=__doc__)
    parser.add_argument("role", choices=sorted(ROLES))
    parser.add_argument("address")
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--urls", required=True, help="routers, comma-separated, in turn")
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="send for this long, then finish (0: until SIGTERM)")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--grace", type=float, default=60.0)
    parser.add_argument("--record", default=os.devnull)
    parser.add_argument("--credit", type=int, default=100)
    parser.add_argument("--relink", type=float, default=0.0)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args(argv)
    client = ROLES[args.role](args)

    def stop(signum: int, frame: object) -> None:
        client.stopping_requested = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    Container(client).run()
    print(json.dumps(client.summary()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
