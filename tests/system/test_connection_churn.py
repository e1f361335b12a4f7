"""Connections that come and go: what the router held for each is freed as
the connection is torn down, by reference counting, not at Python's next
full collection (docs/reliability.md#connections-that-end).

The adapter's record of a connection (``Conn``) and the core's
(``Connection``) referred to each other, so each closed connection stayed
in the heap, with what it held, until a generation-2 collection, which in
a router with a large heap may be many minutes away.  These tests run the
router embedded in the test's own process with the cyclic collector off,
churn connections through it (closed, and killed with links attached and
a delivery in flight) and count the core's connection records in the heap.
"""

from __future__ import annotations

import gc
import secrets
import subprocess
import sys
from collections.abc import Iterator

import pytest
from proton.reactor import AtMostOnce

from router.core import Connection
from router.embedded import Peer, peer
from tests.system.clients import connect, receive_all, send_async, wait_all
from tests.system.rabbitmq import free_port

#: Connections churned in each test.
CHURNED = 12

#: A producer that sends two unsettled messages to ``churn/held`` and waits
#: to be killed.
PRODUCER = r"""
import sys, time
from proton import Message
from proton.utils import BlockingConnection
conn = BlockingConnection(sys.argv[1], timeout=10)
conn.create_receiver("churn/unused", credit=5)
sender = conn.create_sender("churn/held")
conn.wait(lambda: sender.link.credit >= 2, timeout=10)
for n in range(2):
    sender.link.send(Message(body=n))
conn.wait(lambda: sender.link.queued == 0, timeout=10)
print("sent", flush=True)
while True:
    conn.container.process()
    time.sleep(0.05)
"""


@pytest.fixture
def embedded() -> Iterator[Peer]:
    """An embedded router in this process, with the cyclic collector off
    while the test runs (what is freed, is freed by reference counting)."""
    url = (f"peer://churn-{secrets.token_hex(4)}/solo?port={free_port()}"
           "&announceInterval=150&expiry=1200")
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with peer(url) as router:
            yield router
    finally:
        if was_enabled:
            gc.enable()


def records(router: Peer) -> list[Connection]:
    """The core connection records the heap holds, garbage included (the
    collector is off: nothing unreachable has been collected)."""
    return router.call(lambda: [o for o in gc.get_objects() if type(o) is Connection])


def made_since(router: Peer, before: list[Connection]) -> list[Connection]:
    """The records in the heap that were not in ``before`` (which the
    caller holds, so no new record can reuse the id of one freed since)."""
    old = {id(o) for o in before}
    return [o for o in records(router) if id(o) not in old]


def test_closed_connections_are_freed_as_they_close(embedded: Peer) -> None:
    warm = connect(embedded.url)
    warm.close()
    before = records(embedded)
    for n in range(CHURNED):
        conn = connect(embedded.url)
        receiver = conn.create_receiver("churn/echo", credit=3)
        sender = conn.create_sender("churn/echo", options=AtMostOnce())
        send_async(sender, n)
        assert [m.body for m in receive_all(receiver, 1, accept=False)] == [n]
        conn.close()
    # Each close is torn down on the router's loop; the next call waits behind it.
    wait_all([], lambda: not made_since(embedded, before),
             what="the closed connections' records freed")


def test_killed_producers_are_freed_once_their_deliveries_end(embedded: Peer) -> None:
    consumer = connect(embedded.url)
    receiver = consumer.create_receiver("churn/held", credit=2 * CHURNED)
    before = records(embedded)
    for _ in range(CHURNED):
        producer = subprocess.Popen([sys.executable, "-c", PRODUCER, embedded.url],
                                    stdout=subprocess.PIPE, text=True)
        try:
            assert producer.stdout is not None
            assert producer.stdout.readline() == "sent\n"
            # The consumer has both, unsettled, before their producer goes.
            assert [m.body for m in receive_all(receiver, 2, accept=False)] == [0, 1]
        finally:
            producer.kill()
            producer.wait()
        receiver.accept()
        receiver.accept()
    wait_all([consumer], lambda: not made_since(embedded, before),
             what="the killed producers' records freed")
    consumer.close()
