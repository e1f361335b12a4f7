"""Many edge routers under one interior, simulated with the real cores
(``tests.sim.edges``): credit that follows a consumer anywhere among the
edges with one tracking message per producing edge each way, an edge that
joins late, and the interior's heartbeat watch."""

from __future__ import annotations

import pytest

from tests.sim.edges import EdgeNetwork

EDGES = 60


def network(n: int = EDGES) -> EdgeNetwork:
    net = EdgeNetwork()
    for i in range(n):
        net.add_edge(f"E{i:02d}")
    assert not net.refused, net.refused
    return net


def tracking_messages(net: EdgeNetwork) -> int:
    return net.carried["SendOnLink to edge"]


def test_a_consumer_on_one_edge_gives_every_edge_producer_credit_and_takes_it_back() -> None:
    net = network()
    producers = {edge_id: net.producer(edge_id, "orders") for edge_id in net.edges}
    assert all(p.blocked for p in producers.values()), "no consumer anywhere yet"
    before = tracking_messages(net)
    consumer = net.consumer("E17", "orders")
    assert not any(p.blocked for p in producers.values())
    # One answer per other producing edge; E17's own producer has a local consumer.
    assert tracking_messages(net) - before == EDGES - 1
    before = tracking_messages(net)
    net.detach("E17", consumer)
    assert all(p.blocked for p in producers.values())
    assert tracking_messages(net) - before == EDGES - 1


def test_with_consumers_on_two_edges_only_the_other_one_is_told_when_one_goes() -> None:
    net = network(10)
    producers = {edge_id: net.producer(edge_id, "jobs") for edge_id in net.edges}
    first = net.consumer("E01", "jobs")
    before = tracking_messages(net)
    net.consumer("E02", "jobs")
    # E01 now has a destination beyond it: one answer, to E01 alone.
    assert tracking_messages(net) - before == 1
    before = tracking_messages(net)
    net.detach("E01", first)
    # Everyone keeps credit (E02's consumer); only E02 is told that nothing is
    # left beyond it, and its producer keeps its local consumer.
    assert not any(p.blocked for p in producers.values())
    assert tracking_messages(net) - before == 1


def test_an_edge_that_joins_late_learns_of_consumers_already_there() -> None:
    net = network(20)
    net.consumer("E05", "late.service")
    net.add_edge("Elate")
    producer = net.producer("Elate", "late.service")
    assert not producer.blocked
    nobody = net.producer("Elate", "nobody.listens")
    assert nobody.blocked


def test_an_edge_whose_uplink_goes_takes_its_consumers_with_it() -> None:
    net = network(10)
    producers = [net.producer(edge_id, "svc") for edge_id in net.edges if edge_id != "E03"]
    net.consumer("E03", "svc")
    assert not any(p.blocked for p in producers)
    net.close_uplink("E03")
    assert all(p.blocked for p in producers)


@pytest.mark.parametrize("silent", [(), ("E04",)])
def test_the_interior_closes_only_edges_whose_heartbeats_stop(silent: tuple[str, ...]) -> None:
    net = network(10)
    net.run(30.0, silent=silent)
    assert sorted(net.uplinks) == sorted(set(net.edges) - set(silent))
    # Every live edge beat about every 2 s.
    assert net.carried["SendOnLink to interior"] >= (10 - len(silent)) * 12
