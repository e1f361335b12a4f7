"""The URLs applications use: ``peer://`` for an embedded router and
``discovery://`` for a client that looks its routers up."""

from __future__ import annotations

import pytest

import conf
from conf import Role
from router.client_discovery import DiscoveryError, parse_discovery_url
from router.embedded import PeerError, peer_conf


def test_a_peer_url_is_an_interior_router_in_its_group() -> None:
    cfg = peer_conf("peer://orders/node1?announceInterval=250&secret=s&peerPort=0")
    assert cfg.router.mode.value == "interior" and cfg.router.id == "node1"
    roles = {li.name: (li.role, li.host, li.port) for li in cfg.listeners}
    assert roles == {"clients": (Role.NORMAL, "127.0.0.1", "0"),
                     "peers": (Role.INTER_ROUTER, "127.0.0.1", "0")}
    assert cfg.discovery is not None
    assert (cfg.discovery.group, cfg.discovery.announce_interval, cfg.discovery.secret,
            cfg.discovery.listener) == ("orders", 250, "s", "peers")


def test_a_peer_without_a_name_gets_a_unique_id_and_extra_sections_apply() -> None:
    first = peer_conf("peer://g", [("address", {"prefix": "jobs", "distribution": "closest"})])
    second = peer_conf("peer://g/")
    assert first.router.id and first.router.id != second.router.id
    assert first.router.id.startswith("Peer_")
    assert [(a.prefix, a.distribution.value) for a in first.addresses] == [("jobs", "closest")]


@pytest.mark.parametrize(("url", "says"), [
    ("amqp://g/n", "expected peer://GROUP/NAME"),
    ("peer:///n", "expected peer://GROUP/NAME"),
    ("peer://g/a/b", "contains '/'"),
    ("peer://g/n?colour=red", "unknown option colour"),
    ("peer://g/n?ttl=lots", "'ttl'"),
    ("peer://g/n?address=10.0.0.1", "'address'"),
    ("peer://g/n?clientPort=99999", "'port'"),
])
def test_bad_peer_urls_say_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(PeerError, match=says) as refused:
        peer_conf(url)
    assert url in str(refused.value)


def test_a_discovery_url_names_the_group_and_maps_the_reconnect_options() -> None:
    spec = parse_discovery_url(
        "discovery://(multicast://orders?interface=127.0.0.1&secret=k)?initialReconnectDelay=100"
        "&maxReconnectDelay=2000&backOffMultiplier=3&maxReconnectAttempts=4&randomize=false")
    assert (spec.group, spec.address, spec.port, spec.interface, spec.secret) == (
        "orders", "239.255.2.3", 6155, "127.0.0.1", b"k")
    assert not spec.randomize
    delays = list(spec.backoff())
    # Four passes over the list: the first at once, then 0.1 s, x3 each time, at most 2 s.
    assert delays == pytest.approx([0.0, 0.1, 0.3, 0.9])


def test_a_group_named_by_name_only_uses_the_discovery_section_s_address_and_port() -> None:
    found = parse_discovery_url("discovery://(multicast://g)")
    section = conf.parse("discovery {\n    group: g\n}\n", "hopd.conf").discovery
    assert section is not None
    assert (found.address, found.port) == (section.address, section.port)


def test_discovery_url_flags_are_read_as_the_conf_reads_booleans() -> None:
    spec = parse_discovery_url("discovery://(multicast://g)?randomize=0"
                               "&useExponentialBackOff=off")
    assert not spec.randomize and not spec.exponential
    assert parse_discovery_url("discovery://(multicast://g)?randomize=YES").randomize
    with pytest.raises(DiscoveryError, match="randomize must be true or false, got 'ture'"):
        parse_discovery_url("discovery://(multicast://g)?randomize=ture")


def test_discovery_url_forms() -> None:
    activemq = parse_discovery_url("discovery:(multicast://default)")
    assert (activemq.group, activemq.port, activemq.max_attempts) == ("default", 6155, 0)
    assert activemq.randomize and activemq.interface == "0.0.0.0"
    explicit = parse_discovery_url("discovery://(multicast://239.1.2.3:7000?group=g)"
                                   "?useExponentialBackOff=false&initialReconnectDelay=50")
    assert (explicit.address, explicit.port, explicit.group) == ("239.1.2.3", 7000, "g")
    steady = iter(explicit.backoff())
    assert [next(steady) for _ in range(4)] == [0.0, 0.05, 0.05, 0.05]
    assert parse_discovery_url("discovery://(multicast://g:7001)").port == 7001


@pytest.mark.parametrize(("url", "says"), [
    ("multicast://g", "expected discovery://"),
    ("discovery://(multicast://g", "expected discovery://"),
    ("discovery://(multicast://g)x", "expected discovery://"),
    ("discovery://(tcp://g)", "multicast://GROUP"),
    ("discovery://(multicast://10.1.1.1:5?group=g)", "not an IPv4 multicast"),
    ("discovery://(multicast://239.1.1.1:5)", "needs \\?group="),
    ("discovery://(multicast://g?interface=eth0)", "interface must be an IPv4"),
    ("discovery://(multicast://g?colour=red)", "unknown option colour"),
    ("discovery://(multicast://g)?reconnectDelay=5", "unknown option reconnectDelay"),
    ("discovery://(multicast://g)?initialReconnectDelay=soon", "must be a number"),
    ("discovery://(multicast://g)?backOffMultiplier=0.5", "at least 1"),
    ("discovery://(multicast://g)?maxReconnectAttempts=1.5", "whole number"),
    ("discovery://(multicast://g)?randomize=maybe", "true or false"),
    ("discovery://(multicast://g)?initialReconnectDelay=500&maxReconnectDelay=100",
     "below initialReconnectDelay"),
    ("discovery://(multicast://g?secretFile=/nonexistent/s)", "cannot read secretFile"),
])
def test_bad_discovery_urls_say_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(DiscoveryError, match=says):
        parse_discovery_url(url)
