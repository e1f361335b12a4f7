"""Any bytes as a beacon are either a valid beacon or refused with a reason."""

from __future__ import annotations

import contextlib

from hypothesis import example, given
from hypothesis import strategies as st

from router.core.beacons import Beacon, BeaconError, PeerTable

VALID = Beacon(group="g", router_id="B", host="127.0.0.1", port=5673).encode(b"k")


@given(st.binary(max_size=2048), st.sampled_from([None, b"k"]))
@example(VALID, b"k")
@example(VALID[:20] + b"\xff" + VALID[21:], b"k")
@example(b"HOPB\x01\x00\x00\x0b[1,2,3,4,5]", None)
def test_any_bytes_decode_or_are_refused(data: bytes, secret: bytes | None) -> None:
    try:
        beacon = Beacon.decode(data, secret)
    except BeaconError as error:
        assert error.reason is not None
        return
    assert Beacon.decode(beacon.encode(secret), secret) == beacon


@given(st.lists(st.binary(max_size=300), max_size=20))
def test_a_table_fed_garbage_keeps_no_peer(datagrams: list[bytes]) -> None:
    table = PeerTable(group="g", router_id="A", secret=b"k", expiry_s=3.0)
    for n, data in enumerate(datagrams):
        with contextlib.suppress(BeaconError):
            table.heard(data, float(n))
    assert table.peers == {}
    assert sum(table.ignored.values()) == len(datagrams)
