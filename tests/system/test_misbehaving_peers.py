"""Brokers that misbehave must not hurt anyone else (the brokered issue's
"Real brokers misbehave; Hop survives").

A peer behind a waypoint ends its sessions and grants and takes credit at
odd moments: every delivery sent to it still gets exactly one outcome, its
auto-links recover, and unrelated traffic through the same router flows
throughout.  RabbitMQ 3.10 ends the session when asked to drain a receiver
it cannot fill: a client draining a link-routed receiver loses that link
with the error, and nothing else on the broker connection is touched.
"""

from __future__ import annotations

from proton import Delivery

from tests.system.brokered import LOG_INFO, broker_connector, wait_autolinks, waypoint
from tests.system.clients import (
    connect,
    receive_all,
    send_async,
    wait_all,
    wait_through_detaches,
)
from tests.system.conftest import StartRouter
from tests.system.harness import router_conf
from tests.system.peers import MisbehavingPeer
from tests.system.rabbitmq import RabbitMQ, free_port
from tests.system.test_link_routes import link_routes

OUTCOMES = {Delivery.ACCEPTED, Delivery.RELEASED, Delivery.MODIFIED}


def test_a_peer_playing_with_credit_and_sessions_hurts_nobody_else(
        start_router: StartRouter) -> None:
    port = free_port()
    peer = MisbehavingPeer(f"127.0.0.1:{port}")
    peer.start()
    try:
        hop = start_router(router_conf(broker_connector(port, "odd") + waypoint("odd", "odd")
                                       + LOG_INFO))
        wait_autolinks(hop, "odd", directions=("out",))
        producer, calm = connect(hop.url), connect(hop.url)
        try:
            sender = producer.create_sender("odd")
            odd = [send_async(sender, f"o{i}") for i in range(40)]
            calm_receiver = calm.create_receiver("calm", credit=20)
            calm_sender = calm.create_sender("calm")
            steady = []
            for i in range(60):
                steady.append(send_async(calm_sender, f"c{i}"))
                if i % 10 == 9:
                    receive_all(calm_receiver, 10)
            wait_all([producer, calm], lambda: all(d.settled for d in odd + steady), 60,
                     "every delivery settled")
            assert [d.remote_state for d in steady] == [Delivery.ACCEPTED] * 60, \
                "unrelated traffic is untouched"
            assert {d.remote_state for d in odd} <= OUTCOMES
            accepted = sum(d.remote_state == Delivery.ACCEPTED for d in odd)
            assert accepted >= peer.accepted - 1, "what the peer accepted, the producer learnt"
        finally:
            producer.close()
            calm.close()
        assert peer.sessions_ended >= 2
        log = hop.log_text()
        assert log.count("Auto Link Activation Failed") >= 2
        assert log.count("Auto link attached: dir=out address=odd") >= 3, \
            "the auto-link came back after each session the peer ended"
    finally:
        peer.stop()


def test_rabbitmq_ending_the_session_on_drain_takes_down_only_that_link(
        start_router: StartRouter, rabbitmq: RabbitMQ) -> None:
    hop = start_router(router_conf(broker_connector(rabbitmq.port) + link_routes("lrd")
                                   + waypoint("wpd") + LOG_INFO))
    wait_autolinks(hop, "wpd")
    conn = connect(hop.url)
    try:
        sender = conn.create_sender("lrd.busy")
        before = send_async(sender, "before")
        drainer = conn.create_receiver("lrd.empty", credit=0)
        drainer.link.drain(10)
        detaches = wait_through_detaches(
            conn, lambda: bool(drainer.link.state & drainer.link.REMOTE_CLOSED) and
            before.settled, what="the drained link detached")
        assert detaches == ["amqp:internal-error"], \
            "the client sees the error the broker ended the session with"
        after = [send_async(sender, f"after{i}") for i in range(5)]
        waypoint_sender = conn.create_sender("wpd")
        via_autolink = send_async(waypoint_sender, "autolinks unhurt")
        conn.wait(lambda: all(d.settled for d in [*after, via_autolink]), msg="still served")
        assert before.remote_state == Delivery.ACCEPTED
        assert [d.remote_state for d in after] == [Delivery.ACCEPTED] * 5
        assert via_autolink.remote_state == Delivery.ACCEPTED
    finally:
        conn.close()
    log = hop.log_text()
    assert "Auto Link Activation Failed" not in log
    assert log.count("Connection Opened: dir=out") == 1, "the broker connection stayed up"
