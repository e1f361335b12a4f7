"""The router's OPEN (router.adapter.connections.state.OpenFrames): what the
peer reads is what ``open_properties`` and ``offered_capabilities`` say,
for every connection id, with the parts kept encoded per listener."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from proton import Connection, Transport

from router.adapter.connections.state import (
    Conn,
    OpenFrames,
    offered_capabilities,
    open_properties,
)
from router.core import Role
from router.core.amqp.types import Array, Described
from router.core.amqp.values import decode


def _peer_sees(conn: Conn, pn_conn: Connection, wire: bytearray | None = None) -> Connection:
    """Open ``pn_conn`` (the router's side) with ``OpenFrames.open`` and
    return the client's side after the OPEN crossed (the router's bytes
    added to ``wire``)."""
    client = Connection()
    client_transport = Transport()
    client_transport.bind(client)
    server_transport = Transport(Transport.SERVER)
    server_transport.bind(pn_conn)
    client.open()
    OpenFrames().open(conn, b"router-id")
    for _ in range(10):
        for a, b in ((client_transport, server_transport), (server_transport, client_transport)):
            pending = a.pending()
            if pending > 0:
                if a is server_transport and wire is not None:
                    wire += a.peek(pending)
                b.push(a.peek(pending))
                a.pop(pending)
    return client


def _conn(conn_id: int, settings: Any, role: Role = Role.NORMAL) -> tuple[Conn, Connection]:
    pn_conn = Connection()
    conn = SimpleNamespace(cptr=pn_conn._impl, settings=settings,
                           core=SimpleNamespace(conn_id=conn_id, role=role))
    return cast(Conn, conn), pn_conn


@pytest.mark.parametrize("conn_id", [1, 127, 128, 4000, 2**40])
def test_the_peer_reads_the_properties_with_this_connection_s_id(conn_id: int) -> None:
    settings = SimpleNamespace(failover=(), cost=1, section=SimpleNamespace(
        open_properties={"site": "north", "weight": 3, "tags": ["a", "b"]}))
    conn, pn_conn = _conn(conn_id, settings)
    client = _peer_sees(conn, pn_conn)
    assert client.remote_container == "router-id"
    assert client.remote_properties == open_properties(conn)
    assert client.remote_properties["qd.conn-id"] == conn_id
    assert list(client.remote_offered_capabilities) == offered_capabilities(conn)
    assert list(client.remote_desired_capabilities) == offered_capabilities(conn)


def test_connections_of_one_listener_share_all_but_their_id() -> None:
    settings = SimpleNamespace(failover=(), cost=1, section=None)
    seen = []
    for conn_id in (7, 8):
        conn, pn_conn = _conn(conn_id, settings, Role.EDGE)
        seen.append(_peer_sees(conn, pn_conn).remote_properties)
    assert seen[0].pop("qd.conn-id") == 7 and seen[1].pop("qd.conn-id") == 8
    assert seen[0] == seen[1] == {"product": "hop", "version": seen[0]["version"],
                                  "qd.annotations-version": 1}


def test_the_capabilities_go_as_an_array_of_symbols() -> None:
    """A field of multiple symbols is one symbol or an array (AMQP 1.0 part 1,
    section 1.4); qdrouterd finds no capability in a list, and without
    ``qd.streaming-links`` it sends no streaming links to Hop."""
    conn, pn_conn = _conn(1, SimpleNamespace(failover=(), cost=1, section=None))
    wire = bytearray()
    _peer_sees(conn, pn_conn, wire)
    assert wire[:8] == b"AMQP\x00\x01\x00\x00"
    size, doff = int.from_bytes(wire[8:12], "big"), wire[12]
    open_frame, _ = decode(bytes(wire[8 + 4 * doff:8 + size]))
    assert isinstance(open_frame, Described) and open_frame.descriptor == 0x10
    fields = cast(list[Any], open_frame.value)
    for capabilities in fields[7:9]:  # offered, desired
        assert capabilities == Array(0xA3, offered_capabilities(conn))
