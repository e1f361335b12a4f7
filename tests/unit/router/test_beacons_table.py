"""Peer-group beacons, the table of live peers, and the pairing rule."""

from __future__ import annotations

import pytest

from router.core.beacons import Beacon, BeaconError, Ignored, PeerTable, connects_to

B = Beacon(group="g", router_id="B", host="127.0.0.1", port=5673, instance=7)


def test_a_beacon_round_trips_signed_and_unsigned() -> None:
    assert Beacon.decode(B.encode()) == B
    assert Beacon.decode(B.encode(b"s3cret"), b"s3cret") == B


def test_a_beacon_carries_the_listeners_for_clients() -> None:
    with_clients = Beacon(group="g", router_id="B", host="127.0.0.1", port=5673,
                          clients=(("127.0.0.1", 5672), ("10.0.0.2", 5674)))
    assert Beacon.decode(with_clients.encode(b"k"), b"k") == with_clients
    assert b'"n":[["127.0.0.1",5672],["10.0.0.2",5674]]' in with_clients.encode()
    assert b'"n"' not in B.encode(), "no client listener: the field is left out"


def _raw(payload: bytes) -> bytes:
    return b"HOPB\x01\x00" + len(payload).to_bytes(2, "big") + payload


@pytest.mark.parametrize("clients", [b'"x"', b'[["h"]]', b'[["h",0]]', b'[["",5]]',
                                     b'[[1,5]]', b'[["h",true]]', b'[["h",5,6]]'])
def test_bad_client_listeners_make_a_malformed_beacon(clients: bytes) -> None:
    data = _raw(b'{"g":"g","id":"B","h":"h","p":1,"n":' + clients + b"}")
    with pytest.raises(BeaconError) as refused:
        Beacon.decode(data)
    assert refused.value.reason is Ignored.MALFORMED


@pytest.mark.parametrize(("data", "secret", "reason"), [
    (B.encode(b"right"), b"wrong", Ignored.BAD_SIGNATURE),
    (B.encode(), b"secret", Ignored.BAD_SIGNATURE),
    (B.encode(b"secret"), None, Ignored.BAD_SIGNATURE),
    (B.encode(b"k")[:-1] + bytes([B.encode(b"k")[-1] ^ 1]), b"k", Ignored.BAD_SIGNATURE),
    (b"HOPB\x01\x00\x00\x02{}", None, Ignored.MALFORMED),
    (b"HOPB\x02\x00\x00\x00", None, Ignored.MALFORMED),
    (B.encode()[:-1], None, Ignored.MALFORMED),
    (b"hello", None, Ignored.MALFORMED),
])
def test_bad_beacons_are_refused_with_a_reason(data: bytes, secret: bytes | None,
                                               reason: Ignored) -> None:
    with pytest.raises(BeaconError) as refused:
        Beacon.decode(data, secret)
    assert refused.value.reason is reason


def test_exactly_one_side_of_a_pair_connects() -> None:
    assert connects_to("A", "B") and not connects_to("B", "A")
    assert not connects_to("A", "A")


def test_the_table_tracks_live_peers_and_counts_what_it_ignores() -> None:
    table = PeerTable(group="g", router_id="A", secret=None, expiry_s=3.0)
    assert table.heard(B.encode(), 0.0) == B
    assert table.heard(B.encode(), 1.0) is None, "heard again: nothing new"
    restarted = Beacon(group="g", router_id="B", host="127.0.0.1", port=5673, instance=8)
    assert table.heard(restarted.encode(), 1.5) == restarted
    for data, reason in [
        (Beacon(group="other", router_id="C", host="h", port=1).encode(), Ignored.OTHER_GROUP),
        (Beacon(group="g", router_id="A", host="h", port=1).encode(), Ignored.OWN),
        (b"junk", Ignored.MALFORMED),
    ]:
        with pytest.raises(BeaconError):
            table.heard(data, 2.0)
        assert table.ignored[reason] == 1
    assert table.to_connect() == [restarted]
    assert table.expire(4.0) == []
    assert table.expire(4.5) == [restarted] and table.peers == {}
