"""Brokered messaging across a Hop and a qdrouterd 1.x router.

The broker (a real RabbitMQ) is connected to one kind of router, the clients
to the other: link routes advertised by one kind (MAU keys ``C``/``D``) are
learnt by the other, which forwards the client's attach over the mixed
inter-router connection; a waypoint's messages come back from the broker at
phase 1 across the mixed hop.
"""

from __future__ import annotations

import time

import pytest
from proton import Delivery
from proton.utils import BlockingConnection, BlockingSender, LinkDetached

from tests.interop.mixed import MakeNetwork, MixedNetwork, management_query
from tests.system.brokered import broker_connector, waypoint
from tests.system.clients import connect, receive_all, send_settled
from tests.system.rabbitmq import RabbitMQ
from tests.system.test_link_routes import link_routes
from tests.waiting import wait_for

KINDS = ["hopd", "qdrouterd"]
TIMEOUT_S = 30.0


def attach_when_routed(conn: BlockingConnection, address: str) -> BlockingSender:
    """Attach a sender once the clients' router has learnt the link route
    (until then its attach is refused with qd:no-route-to-dest)."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            return conn.create_sender(address)
        except LinkDetached as refused:
            if refused.condition != "qd:no-route-to-dest" or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def wait_link_route_learnt(url: str, prefix: str) -> None:
    """Wait until the router at ``url`` lists both keys of the link route for
    ``prefix`` (``C`` in, ``D`` out): they come in a MAU, which may follow the
    routes themselves by a tick or two. Before that, an attach to the prefix
    is an ordinary address (a sender is attached without credit)."""
    wanted = {f"C{prefix}", f"D{prefix}"}

    def learnt() -> bool:
        keys = {row.get("key") for row in
                management_query(url, "org.apache.qpid.dispatch.router.address")}
        return wanted <= keys

    wait_for(learnt, TIMEOUT_S, f"{sorted(wanted)} learnt at {url}", interval=0.2)


def broker_pair(make: MakeNetwork, broker_on: str, extra: str, shared: str = ""
                ) -> tuple[MixedNetwork, str, str]:
    """Two routers, the one of kind ``broker_on`` with ``extra``; returns the
    network, the broker's router and the clients' router."""
    net = make(shared)
    if broker_on == "hopd":
        net.add_hop("HopB", extra=extra)
        net.add_qdr("QdrA", ["HopB"])
        with_broker, with_clients = "HopB", "QdrA"
    else:
        net.add_qdr("QdrA", extra=extra)
        net.add_hop("HopB", ["QdrA"])
        with_broker, with_clients = "QdrA", "HopB"
    net.wait_converged()
    return net, with_broker, with_clients


@pytest.mark.parametrize("broker_on", KINDS)
def test_link_route_learnt_across_the_mixed_hop(mixed: MakeNetwork, rabbitmq: RabbitMQ,
                                                broker_on: str) -> None:
    prefix = f"ilr{broker_on[0]}"
    net, _, clients = broker_pair(mixed, broker_on,
                                  broker_connector(rabbitmq.port) + link_routes(prefix))
    wait_link_route_learnt(net.url(clients), prefix)
    conn = connect(net.url(clients))
    try:
        sender = attach_when_routed(conn, f"{prefix}.q")
        assert send_settled(conn, sender, [f"m{i}" for i in range(5)]) == \
            [Delivery.ACCEPTED] * 5
        assert rabbitmq.queue_depth(f"{prefix}.q") == 5
        # qdrouterd 1.19.0 in front of RabbitMQ 3.10 aborts (a proton assertion
        # in pn_link_flow) once a link-routed receiver gets RabbitMQ's flow
        # frames, with or without Hop in the path: there the queue is read
        # from the broker itself.
        reader = conn if broker_on == "hopd" else connect(rabbitmq.url)
        receiver = reader.create_receiver(f"{prefix}.q", credit=5)
        assert [m.body for m in receive_all(receiver, 5)] == [f"m{i}" for i in range(5)]
        if reader is not conn:
            reader.close()
    finally:
        conn.close()


@pytest.mark.parametrize("broker_on", KINDS)
def test_waypoint_phases_cross_the_mixed_hop(mixed: MakeNetwork, rabbitmq: RabbitMQ,
                                             broker_on: str) -> None:
    address = f"iwp{broker_on[0]}"
    address_section = f"address {{\n    prefix: {address}\n    waypoint: yes\n}}\n"
    links = waypoint(address).replace(address_section, "")
    net, _, clients = broker_pair(mixed, broker_on, broker_connector(rabbitmq.port) + links,
                                  shared=address_section)
    conn = connect(net.url(clients))
    try:
        sender = conn.create_sender(address)
        conn.wait(lambda: sender.link.credit > 0, timeout=TIMEOUT_S,
                  msg="credit once the out auto-link's address is learnt")
        assert send_settled(conn, sender, [f"w{i}" for i in range(5)]) == \
            [Delivery.ACCEPTED] * 5
        receiver = conn.create_receiver(address, credit=5)
        bodies = sorted(m.body for m in receive_all(receiver, 5, timeout=TIMEOUT_S))
        assert bodies == [f"w{i}" for i in range(5)]
    finally:
        conn.close()
