"""Router CPU per message, measured in process without scheduling noise.

One ``Engine`` serves two proton clients over socket pairs, all on this
thread: a sender that keeps its credit full of 100-byte unsettled messages
and a receiver that accepts each one and keeps a credit window open.  Only
the time spent inside ``Engine.run_once`` is counted, so the figure is the
router's own cost per message (proton's engine included), independent of
what the clients and the OS scheduler do.

    python -m bench.engine_cost [N] [--profile FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import socket
import tempfile
import time
from collections.abc import Callable
from typing import Any

from proton import Collector, Connection, Delivery, Endpoint, Event, Message, Transport

import conf
from addressing import AddressTable, Direction
from linkroute import LinkRouteSpec
from router.adapter import Engine, connector_settings, listener_settings
from router.assembly import build_engine
from router.core import Router

BODY = Message(body=b"x" * 100).encode()


class _Client:
    def __init__(self, engine: Engine, listener: Any, name: str) -> None:
        mine, theirs = socket.socketpair()
        mine.setblocking(False)
        theirs.setblocking(False)
        engine.listeners.adopt(theirs, listener, name)
        self.sock = mine
        self.collector = Collector()
        self.connection = Connection()
        self.connection.container = name
        self.connection.collect(self.collector)
        self.transport = Transport()
        self.transport.bind(self.connection)
        self.connection.open()
        self.session = self.connection.session()
        self.session.open()

    def io(self) -> None:
        while self.transport.pending() > 0:
            data = self.transport.peek(min(self.transport.pending(), 1 << 20))
            try:
                sent = self.sock.send(data)
            except BlockingIOError:
                break
            self.transport.pop(sent)
        while True:
            capacity = self.transport.capacity()
            if capacity <= 0:
                break
            try:
                data = self.sock.recv(capacity)
            except BlockingIOError:
                break
            if not data:
                break
            self.transport.push(data)

    def events(self) -> list[Event]:
        out: list[Event] = []
        while True:
            event = self.collector.peek()
            if event is None:
                return out
            out.append(event)
            self.collector.pop()


def _router(router_id: str, clock: Callable[[], float], *, addresses: AddressTable,
            link_routes: tuple[LinkRouteSpec, ...] = (), instance: int = 0,
            connect_to: str | None = None) -> tuple[Engine, Any, Any]:
    """An in-process router with its normal and its second listener (route-
    container; inter-router when ``instance`` makes it an interior router of
    a network, then on a Unix socket); ``connect_to``: the path of another's
    inter-router listener, dialled by an inter-router connector."""
    interior = instance > 0
    core = Router(router_id=router_id, addresses=addresses, token=lambda: "t",
                  link_routes=link_routes, interior=interior, instance=instance)
    connectors = [connector_settings(conf.ConnectorSection(
        host=connect_to, port="0", role=conf.Role.INTER_ROUTER))] if connect_to else []
    engine = build_engine(core=core, router_id=router_id, clock=clock, management=False,
                          raise_internal_errors=True, connectors=connectors)
    listener = engine.listeners.listen(
        listener_settings(conf.ListenerSection(host="127.0.0.1", port="0")))
    if interior:
        path = tempfile.mktemp(prefix=f"hop-cost-{router_id}-", suffix=".sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        sock.listen(8)
        sock.setblocking(False)
        second = engine.listeners.listen(listener_settings(conf.ListenerSection(
            host=path, port="0", role=conf.Role.INTER_ROUTER)), sock)
    else:
        second = engine.listeners.listen(listener_settings(conf.ListenerSection(
            host="127.0.0.1", port="0", role=conf.Role.ROUTE_CONTAINER)))
    return engine, listener, second


def measure(count: int, window: int = 1000,
            profiler: cProfile.Profile | None = None, *, receivers: int = 1,
            addresses: AddressTable | None = None, address: str = "cost",
            link_routed: bool = False, line: bool = False) -> tuple[float, int]:
    """Seconds spent in the router for ``count`` messages, and messages moved
    (accepted at the sender).  ``receivers`` consumers of ``address`` each
    accept every message they get; ``addresses`` says how it is distributed
    (balanced by default).  ``link_routed``: the consumer is a broker on a
    route-container connection, and the producer's link to ``address`` is
    routed to it (a link route for the address, direction ``in``).
    ``line``: three interior routers A - B - C over Unix sockets, the
    producer on A and the consumers on C; the network's clock runs until the
    producer has credit, then stands still (no timer fires while counted),
    and the seconds are the three routers'."""
    now = [0.0]

    def clock() -> float:
        return now[0]

    table = addresses or AddressTable()
    if line:
        middle, _, inter = _router("B", clock, addresses=table, instance=2)
        near, entry, _ = _router("A", clock, addresses=table, instance=1,
                                 connect_to=inter.host)
        far, exit_, _ = _router("C", clock, addresses=table, instance=3,
                                connect_to=inter.host)
        engines = [near, middle, far]
        for engine in (near, far):
            engine.start_connectors()
        consumer_engine, consumer_listener, producer_engine = far, exit_, near
        producer_listener = entry
    else:
        routes = (LinkRouteSpec(prefix=address, direction=Direction.IN,
                                container_id="broker"),) if link_routed else ()
        engine, listener, brokers = _router("Cost", clock, addresses=table, link_routes=routes)
        engines = [engine]
        consumer_engine, consumer_listener = engine, listener
        producer_engine, producer_listener = engine, listener
    consumers: list[tuple[_Client, Any]] = []
    if link_routed:
        consumers.append((_Client(engine, brokers, "broker"), None))
    for i in range(0 if link_routed else receivers):
        recv = _Client(consumer_engine, consumer_listener, f"recv{i}")
        rlink = recv.session.receiver("r")
        rlink.source.address = address
        rlink.open()
        rlink.flow(window)
        consumers.append((recv, rlink))
    send = _Client(producer_engine, producer_listener, "send")
    slink = send.session.sender("s")
    slink.target.address = address
    slink.open()
    clients = [*(recv for recv, _ in consumers), send]
    # Until the producer has credit: the broker's connection open (its link
    # route there), the network's routes found.
    for _ in range(2000):
        for client in clients:
            client.io()
        for engine in engines:
            engine.run_once(0)
        for client in clients:
            client.io()
        _answer_routed_links(consumers, window)
        send.events()
        if slink.credit > 0:
            break
        now[0] += 0.05
    else:
        raise RuntimeError("the producer got no credit")
    if line:
        os.unlink(inter.host)  # connected: the path is no longer needed
    sent = accepted = received = 0
    tag = 0
    in_router = 0.0
    cpu = time.thread_time  # CPU time: preemption by other processes is not counted
    while accepted < count:
        for client in clients:
            client.io()
        if profiler is not None:
            profiler.enable()
        t0 = cpu()
        for engine in engines:
            engine.run_once(0)
        in_router += cpu() - t0
        if profiler is not None:
            profiler.disable()
        for client in clients:
            client.io()
        received += _answer_routed_links(consumers, window)
        for event in send.events():
            if event.type == Event.DELIVERY and event.delivery.settled:
                accepted += 1
                event.delivery.settle()
        while slink.credit > 0 and sent < count:
            tag += 1
            slink.delivery(str(tag))
            slink.send(BODY)
            slink.advance()
            sent += 1
    for engine in engines:
        engine.stop()
    return in_router, accepted


def _answer_routed_links(consumers: list[tuple[_Client, Any]], window: int) -> int:
    """The consumers' events: a routed link opened at a broker, each message
    accepted and settled, credit kept open; returns the messages taken."""
    received = 0
    for index, (recv, rlink) in enumerate(consumers):
        for event in recv.events():
            if event.type == Event.SESSION_REMOTE_OPEN \
                    and event.session.state & Endpoint.LOCAL_UNINIT:
                event.session.open()  # the router's session for a routed link
            elif event.type == Event.LINK_REMOTE_OPEN and rlink is None:
                rlink = event.link  # the routed link, at the broker
                rlink.source.copy(rlink.remote_source)
                rlink.target.copy(rlink.remote_target)
                rlink.open()
                rlink.flow(window)
                consumers[index] = (recv, rlink)
            elif event.type == Event.DELIVERY and not event.delivery.partial:
                delivery = event.delivery
                rlink.recv(delivery.pending)
                rlink.advance()
                delivery.update(Delivery.ACCEPTED)
                delivery.settle()
                received += 1
                if rlink.credit < window // 2:
                    rlink.flow(window - rlink.credit)
    return received


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.engine_cost")
    parser.add_argument("count", type=int, nargs="?", default=50_000)
    parser.add_argument("--profile", help="write a cProfile of the router's part here")
    args = parser.parse_args()
    measure(2000)  # warm up
    if args.profile:
        profiler = cProfile.Profile()
        seconds, moved = measure(args.count, profiler=profiler)
        profiler.dump_stats(args.profile)
    else:
        seconds, moved = measure(args.count)
    print(f"{moved} messages: {seconds * 1e6 / moved:.2f} us of router time per message")


if __name__ == "__main__":
    main()
