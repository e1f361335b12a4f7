"""Transactions through a ``$coordinator`` link route (docs/brokers.md#transactions).

No packaged broker here coordinates transactions, so the container is a
small transactional peer from the tests, attached to a route-container
listener of the router: the client's coordinator link is routed to it, the
declare gets its transaction id back, a message sent in the transaction
carries the transactional state to the peer, and the discharge commits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from proton import Message
from proton.handlers import MessagingHandler, TransactionHandler
from proton.reactor import Container

from tests.system.brokered import LOG_INFO
from tests.system.conftest import StartRouter
from tests.system.harness import STANDARD_LISTENER, Hop, router_conf
from tests.system.peers import TransactionalPeer
from tests.waiting import wait_for

CONTAINER_LISTENER = """\
listener {
    name: txn
    host: 127.0.0.1
    port: 0
    role: route-container
    saslMechanisms: ANONYMOUS
    authenticatePeer: no
}
"""

ROUTES = """\
linkRoute {
    prefix: $coordinator
    direction: in
    connection: txn
}
linkRoute {
    prefix: tx
    direction: in
    connection: txn
}
"""


class TransactionalClient(MessagingHandler, TransactionHandler):  # type: ignore[misc]
    """Declares a transaction, sends ``count`` messages in it, commits or aborts."""

    def __init__(self, url: str, address: str, count: int, *, commit: bool = True) -> None:
        super().__init__()
        self.url = url
        self.address = address
        self.count = count
        self.commit = commit
        self.outcome: str | None = None
        self.txn_id: bytes | None = None
        self.sender: Any = None
        self.connection: Any = None
        self.container: Any = None

    def on_start(self, event: Any) -> None:
        self.container = event.container
        self.connection = event.container.connect(self.url, reconnect=False)
        self.sender = event.container.create_sender(self.connection, self.address)
        event.container.declare_transaction(self.connection, handler=self)
        event.container.schedule(20, self)

    def on_timer_task(self, event: Any) -> None:
        self.outcome = self.outcome or "timed out"
        self.container.stop()

    def on_transaction_declared(self, event: Any) -> None:
        txn = event.transaction
        self.txn_id = bytes(txn.id)
        for i in range(self.count):
            txn.send(self.sender, Message(body=f"t{i}"))
        if self.commit:
            txn.commit()
        else:
            txn.abort()

    def on_transaction_declare_failed(self, event: Any) -> None:
        self._done("declare failed")

    def on_transaction_committed(self, event: Any) -> None:
        self._done("committed")

    def on_transaction_aborted(self, event: Any) -> None:
        self._done("aborted")

    def on_transaction_commit_failed(self, event: Any) -> None:
        self._done("commit failed")

    def _done(self, outcome: str) -> None:
        self.outcome = outcome
        self.container.stop()


@pytest.fixture
def coordinated(start_router: StartRouter) -> Iterator[tuple[Hop, TransactionalPeer]]:
    """A router with the coordinator link routes, and the transactional peer
    connected to its route-container listener."""
    hop = start_router(router_conf(ROUTES + LOG_INFO,
                                   listener=STANDARD_LISTENER + CONTAINER_LISTENER),
                       listeners=2)
    peer = TransactionalPeer(f"127.0.0.1:{hop.ports[1]}")
    peer.start()
    try:
        hop.wait_log(r"Link Route Activated '1' on connection txn")
        yield hop, peer
    finally:
        peer.stop()


def test_declare_send_and_commit_reach_the_coordinator_through_a_link_route(
        coordinated: tuple[Hop, TransactionalPeer]) -> None:
    hop, peer = coordinated
    client = TransactionalClient(hop.url, "tx.orders", 3)
    Container(client).run()
    assert client.outcome == "committed"
    assert peer.declared == [client.txn_id]
    wait_for(lambda: len(peer.discharged) == 1, 10, "the discharge")
    assert peer.discharged == [(client.txn_id, False)]
    assert peer.received == [("tx.orders", f"t{i}", client.txn_id) for i in range(3)]


def test_an_aborted_transaction_is_discharged_as_failed(
        coordinated: tuple[Hop, TransactionalPeer]) -> None:
    hop, peer = coordinated
    client = TransactionalClient(hop.url, "tx.orders", 1, commit=False)
    Container(client).run()
    assert client.outcome == "aborted"
    wait_for(lambda: len(peer.discharged) == 1, 10, "the discharge")
    assert peer.discharged == [(client.txn_id, True)]
