"""Every management entity's rows carry exactly the attributes its schema declares.

A router with something of every kind (a client's links and a delivery, a
connector, a configured address, link route and auto-link, a vhost, a peer
group) is asked for the rows of every entity source; each row must hold
the schema's attributes of its type, no fewer (a forgotten attribute would
read as null) and no more (a misspelled one would never be read).
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Iterator

import attrs
import pytest
from proton import Message

import conf
from addressing import AddressTable
from router.adapter import connector_settings
from router.adapter.connections.peergroup import DiscoverySettings
from router.management import SCHEMA
from tests.property.inproc import Harness

#: The types whose rows the router above must have at least one of.
EXPECTED = {
    "router", "listener", "connector", "connection", "router.link", "router.address",
    "router.config.address", "router.config.linkRoute", "router.config.autoLink", "policy",
    "vhost", "vhostStats", "discovery", "log", "logStats",
}


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness(addresses=AddressTable(), management=True)
    yield h
    h.close()


def test_every_entity_row_has_exactly_the_schema_attributes(harness: Harness) -> None:
    engine = harness.engine
    node = engine.events.management
    assert node is not None
    sources = node.agent.sources
    # A client with a sender and a receiver, and one message between them.
    client = harness.connect("rows")
    receiver = client.session.receiver("in")
    receiver.source.address = "rows.q"
    receiver.open()
    receiver.flow(10)
    sender = client.session.sender("out")
    sender.target.address = "rows.q"
    sender.open()
    harness.pump()
    delivery = sender.delivery(b"t1")
    sender.send(Message(body="hello").encode())
    sender.advance()
    harness.pump()
    assert delivery.remote_state or receiver.current is not None
    # Entities created as management creates them.
    sources["router.config.address"].create("a1", {"prefix": "rows", "distribution": "closest"})
    sources["router.config.linkRoute"].create("lr1", {"prefix": "broker.", "direction": "in"})
    sources["router.config.autoLink"].create("al1", {"address": "queue.x", "direction": "out",
                                                     "connection": "broker"})
    sources["vhost"].create("v1", {"hostname": "v1", "groups": {
        "$default": {"users": "*", "remoteHosts": "*"}}})
    engine.connectors.add(connector_settings(conf.ConnectorSection(
        name="nowhere", host="127.0.0.1", port="1", role=conf.Role.ROUTE_CONTAINER)))
    # As peer discovery makes one: settings of no conf section.
    engine.connectors.add(attrs.evolve(connector_settings(conf.ConnectorSection(
        name="peer", host="127.0.0.1", port="2", role=conf.Role.INTER_ROUTER)), section=None))
    engine.group.join(DiscoverySettings(
        group="rows", address="239.255.77.77", port=_free_udp_port(), interface="127.0.0.1",
        ttl=0, interval_s=1.0, expiry_s=3.0, secret=None, announce_host="127.0.0.1",
        announce_port=5672), "Hop.test", 1)
    harness.pump()
    seen = set()
    for type_name, source in sources.items():
        entity_type = SCHEMA.find(type_name)
        assert entity_type is not None, type_name
        expected = set(SCHEMA.attribute_names(entity_type)) - {"type"}
        for row in itertools.islice(source.rows(), 50):
            seen.add(type_name)
            missing, extra = expected - set(row), set(row) - expected
            assert not missing and not extra, \
                f"{type_name}: missing {sorted(missing)}, not in the schema {sorted(extra)}"
    assert seen >= EXPECTED, f"no rows of {sorted(EXPECTED - seen)}"


def test_metrics_expose_every_declared_series_with_its_kind(harness: Harness) -> None:
    """``/metrics`` has a family for every series ``router.management.statistics``
    declares, of the declared kind, and no other router series."""
    from router.adapter.admin.stats import RouterStats
    from router.adapter.http.metrics import Exposition
    from router.management.statistics import (
        AddressStatistics,
        LinkStatistics,
        RouterStatistics,
        TcpBridgeStatistics,
        declared,
    )

    client = harness.connect("metrics")
    receiver = client.session.receiver("in")
    receiver.source.address = "metrics.q"
    receiver.open()
    receiver.flow(1)
    harness.pump()
    engine = harness.engine
    stats = RouterStats(core=harness.router, router_id="Hop.test", section=conf.RouterSection(),
                        connections=engine.transports, links=engine.events.links,
                        counters=engine.forwarder.counters, clock=lambda: 1000.0)
    text = Exposition(stats)().decode()
    types = dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE"))
    declared_series = {stat.metric.name: stat.metric.kind
                       for record in (RouterStatistics, LinkStatistics, AddressStatistics,
                                      TcpBridgeStatistics)
                       for _, stat in declared(record) if stat.metric is not None}
    assert len(declared_series) == sum(
        1 for record in (RouterStatistics, LinkStatistics, AddressStatistics,
                                      TcpBridgeStatistics)
        for _, stat in declared(record) if stat.metric is not None), "a series declared twice"
    # prometheus_client names a counter's family without its ``_total`` suffix.
    exposed = {name if kind != "counter" else name.removesuffix("_total"): kind
               for name, kind in types.items()
               if name.startswith(("qdr_", "hop_")) and name not in ("hop_connections",
                                                                     "hop_links")}
    wanted = {name.removesuffix("_total") if kind == "counter" else name: kind
              for name, kind in declared_series.items()}
    assert exposed == wanted
