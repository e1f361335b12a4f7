"""Links that come and go on a connection that stays: what the router held
for each is given back as it goes (router/adapter/endpoints/reaping.py,
docs/reliability.md#what-grows).

Proton keeps every link and session of a connection until it is freed; a
router that never freed them held about 1.5 kB of C heap for each link a
long-lived connection ever had.  These tests read the router's C heap in
use (the ``router`` entity's ``heapInUse``) before and after thousands of
links, and so need a C library that says (glibc).
"""

from __future__ import annotations

from typing import Any

import pytest
from proton import Delivery
from proton.utils import BlockingConnection

from router.adapter.loop.trim import c_heap
from tests.system.brokered import LOG_INFO, broker_connector
from tests.system.clients import connect, pump, send_async, send_settled, wait_settled
from tests.system.conftest import StartRouter
from tests.system.harness import router_conf
from tests.system.mgmt import Management
from tests.system.peers import Peer
from tests.system.rabbitmq import free_port

pytestmark = pytest.mark.skipif(c_heap() is None,
                                reason="the C library cannot say what its heap holds")

#: Links attached and detached in each test, after a first few.
LINKS = 2000
#: What the C heap may grow by over them: the leak was about 3 MB.
ALLOWED_BYTES = 1 << 20


class AcceptingPeer(Peer):
    """A route container that listens, answers every attach and accepts
    what it is sent."""

    def __init__(self, url: str) -> None:
        super().__init__(url, listen=True, container_id="churn-peer", prefetch=10)

    def on_message(self, event: Any) -> None:
        event.delivery.update(Delivery.ACCEPTED)
        event.delivery.settle()


def _heap(conn: BlockingConnection, mgmt: Management) -> int:
    """The C heap in use, once the router's once-a-second sweep freed what
    closed before now."""
    pump(conn, 2.5)
    [router] = mgmt.query("router", "heapInUse")
    return int(router["heapInUse"])


def test_links_attached_and_detached_on_one_connection_leave_nothing(
        start_router: StartRouter) -> None:
    hop = start_router()
    conn = connect(hop.url)
    mgmt = Management(hop.url, conn=conn)  # one connection: it stays busy
    try:
        kept = conn.create_sender("churn.kept")
        for k in range(LINKS + 200):
            if k == 200:  # the router's tables have grown to their working size
                before = _heap(conn, mgmt)
            link = conn.create_receiver(f"churn.{k % 50}") if k % 2 \
                else conn.create_sender(f"churn.{k % 50}")
            link.close()
        grown = _heap(conn, mgmt) - before
        assert grown < ALLOWED_BYTES, f"{grown} bytes more C heap after {LINKS} links"
        receiver = conn.create_receiver("churn.kept")
        delivery = send_async(kept, "still served")
        assert receiver.receive(timeout=10).body == "still served"
        receiver.accept()
        assert wait_settled(conn, delivery) == Delivery.ACCEPTED
    finally:
        conn.close()


def test_link_routed_links_and_the_routers_own_sessions_leave_nothing(
        start_router: StartRouter) -> None:
    """Each link-routed link has a link and a session of the router's own on
    the route container's connection, which lives on."""
    port = free_port()
    peer = AcceptingPeer(f"127.0.0.1:{port}")
    peer.start()
    try:
        routes = "".join(f"linkRoute {{\n    prefix: lrchurn\n    direction: {d}\n"
                         "    connection: broker\n}\n" for d in ("in", "out"))
        hop = start_router(router_conf(broker_connector(port) + routes + LOG_INFO))
        hop.wait_log(r"Link Route Activated")
        conn = connect(hop.url)
        mgmt = Management(hop.url, conn=conn)
        try:
            for k in range(LINKS // 2 + 100):
                if k == 100:
                    before = _heap(conn, mgmt)
                link = conn.create_sender(f"lrchurn.{k % 20}") if k % 2 \
                    else conn.create_receiver(f"lrchurn.{k % 20}", credit=1)
                link.close()
            grown = _heap(conn, mgmt) - before
            assert grown < ALLOWED_BYTES, \
                f"{grown} bytes more C heap after {LINKS // 2} link-routed links"
            sender = conn.create_sender("lrchurn.last")
            assert send_settled(conn, sender, ["through"]) == [Delivery.ACCEPTED]
        finally:
            conn.close()
    finally:
        peer.stop()
