"""Links between routers cut from outside under load, then healed: the
routers live on, the connection between them fails (its sockets shut
down, or silent as behind a dead switch until the idle timeout), for an
inter-router connection and for an edge router's uplink. An at-least-once
producer loses nothing: every message ends accepted and received, every
delivery gets exactly one outcome; how long traffic took to flow again
after the heal is recorded. And a delivery the consumer accepted while
the router in the middle was dying ends settled at both ends."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

import pytest
from proton import Delivery

from tests.system.clients import connect, pump, send_async, wait_all
from tests.system.conftest import StartRouter
from tests.system.flows import AtLeastOnce
from tests.system.harness import Hop
from tests.system.network import UPLINK, interior_conf, latest_routes, start_network
from tests.system.proxy import CuttableProxy
from tests.waiting import wait_for

IDLE_S = 4
#: Listeners and connectors of the link under test time out after IDLE_S
#: of silence.
def _quick_idle_listener(role: str) -> str:
    return (f"listener {{\n    host: 127.0.0.1\n    port: 0\n    role: {role}\n"
            f"    idleTimeoutSeconds: {IDLE_S}\n}}\n")


def _connector(port: int, role: str) -> str:
    return (f"connector {{\n    host: 127.0.0.1\n    port: {port}\n    role: {role}\n"
            f"    idleTimeoutSeconds: {IDLE_S}\n}}\n")


def _pair(start_router: StartRouter, role: str) -> tuple[Hop, Hop, CuttableProxy]:
    """Interior A, and B (interior, or edge for role 'edge') connected to it
    through a cuttable proxy."""
    a = start_router(interior_conf("A", {}, extra=_quick_idle_listener(role)), name="A",
                     listeners=4)
    proxy = CuttableProxy(a.ports[3])
    if role == "inter-router":
        b = start_router(interior_conf("B", {}, extra=_connector(proxy.port, role)), name="B",
                         listeners=3)
        wait_for(lambda: "A" in (latest_routes(b) or {}), 20, "B's route to A")
    else:
        b = start_router("router {\n    mode: edge\n    id: B\n}\n"
                         "listener {\n    host: 127.0.0.1\n    port: 0\n}\n"
                         + _connector(proxy.port, role), name="B", listeners=1)
        b.wait_log(UPLINK.pattern)
    return a, b, proxy


def _flowing_again(flow: AtLeastOnce, since: float, timeout: float = 60.0) -> float:
    """Seconds from ``since`` until the flow has more messages accepted."""
    before = len(flow.accepted)
    wait_for(lambda: len(flow.accepted) > before, timeout,
             f"traffic after the heal: {flow.describe()}")
    return time.monotonic() - since


@pytest.mark.parametrize("how", ["cut", "blackhole"])
@pytest.mark.parametrize("role", ["inter-router", "edge"])
def test_a_link_cut_under_load_then_healed_loses_nothing(
        start_router: StartRouter, role: str, how: str,
        record_property: Callable[[str, object], None]) -> None:
    a, b, proxy = _pair(start_router, role)
    # The producer on B (beyond the link), the consumer on A.
    flow = AtLeastOnce(b.url, a.url, "cut.q", count=1200, rate=150)
    try:
        flow.start()
        wait_for(lambda: len(flow.accepted) >= 100, 30, "traffic before the cut")
        (proxy.cut if how == "cut" else proxy.blackhole)()
        # Long enough for both routers to notice (a blackhole: the idle timeout).
        time.sleep(1.0 if how == "cut" else IDLE_S * 2)
        healed = time.monotonic()
        proxy.heal()
        convergence = _flowing_again(flow, healed)
        flow.wait(120)
    finally:
        proxy.close()
    assert flow.accepted == set(range(flow.count)) and flow.accepted <= flow.received
    assert not flow.in_flight, "a delivery never got its outcome"
    assert flow.outcomes.get("rejected", 0) == 0, flow.outcomes
    record_property("heal_to_traffic_s", round(convergence, 3))
    record_property("outcomes", dict(flow.outcomes))
    record_property("duplicates", flow.duplicates)
    print(f"\n{role} link {how}: traffic {convergence:.2f} s after the heal; "
          f"{flow.describe()}")
    assert proxy.accepted >= 2, "the link was made again through the proxy"


def test_a_delivery_accepted_while_the_middle_router_dies_ends_settled_at_both_ends(
        start_router: StartRouter, killable: StartRouter) -> None:
    # A - B - C: the producer on A, the consumer on C, which settles only
    # after the producer does. B is stopped; the consumer accepts the first
    # message (its outcome reaches C, not A); B dies; then the consumer
    # accepts the second. The producer gets an outcome for both, and C
    # settles both of the consumer's deliveries: nothing is left unsettled.
    net = start_network(start_router, {"A": [], "B": ["A"], "C": ["B"]},
                        starters={"B": killable})
    net.wait_route("A", "C", "B", 2)
    producer, consumer = connect(net.url("A")), connect(net.url("C"))
    conns = [producer, consumer]
    try:
        receiver = consumer.create_receiver("middle.q", credit=2)
        sender = producer.create_sender("middle.q")
        wait_all(conns, lambda: sender.link.credit > 0, what="credit for middle.q")
        sent = [send_async(sender, "accepted as B dies"), send_async(sender, "accepted after")]
        wait_all(conns, lambda: receiver.fetcher.has_message == 2, what="both messages at C")
        receiver.fetcher.pop()
        receiver.fetcher.pop()
        first, second = receiver.fetcher.unsettled
        net["B"].proc.send_signal(signal.SIGSTOP)
        try:
            first.update(Delivery.ACCEPTED)  # accepted; settled only after the producer
            pump(consumer, 0.5)
            assert not first.settled, "settled before the producer could know"
        finally:
            net.kill("B")
        wait_all(conns, lambda: all(d.settled for d in sent), timeout=30,
                 what="the producer's outcomes")
        outcomes = {Delivery.ACCEPTED, Delivery.MODIFIED, Delivery.RELEASED}
        assert all(d.remote_state in outcomes for d in sent), [d.remote_state for d in sent]
        wait_all(conns, lambda: first.settled, timeout=30,
                 what="C to settle the delivery accepted before B died")
        second.update(Delivery.ACCEPTED)
        wait_all(conns, lambda: second.settled, timeout=30,
                 what="C to settle the delivery accepted after B died")
    finally:
        for conn in conns:
            conn.close()
