"""A connection's proton objects (router.adapter.connections.transports): made on raw
pointers, with no wrapper of the binding's left on a plain connection,
and a client talking to it over a socket opens as usual."""

from __future__ import annotations

import socket
import time

from proton import Connection, Endpoint, Transport

import conf
from router.adapter.connections.settings import listener_settings
from router.adapter.connections.transports import Transports
from router.adapter.forwarding.accel import event_arrays, next_event
from router.adapter.loop.eventloop import EventLoop
from router.adapter.pending import Pending
from router.adapter.pn import ffi, lib


def _pump(transports: Transports, server: socket.socket, client: Transport,
          client_sock: socket.socket) -> None:
    """Move bytes both ways a few times: the client's output to the router's
    socket, the router's reads and writes, the router's output to the client."""
    conn = transports.conns[server.fileno()]
    for _ in range(20):
        while client.pending() > 0:
            data = client.peek(client.pending())
            client_sock.sendall(data)
            client.pop(len(data))
        transports.read(conn)
        transports.write(conn)
        client_sock.setblocking(False)
        try:
            data = client_sock.recv(65536)
        except BlockingIOError:
            data = b""
        if data:
            client.push(data)


def test_a_plain_connection_keeps_no_wrapper_and_opens() -> None:
    transports = Transports(EventLoop(time.monotonic), Pending(), "R")
    server, client_sock = socket.socketpair()
    server.setblocking(False)
    settings = listener_settings(conf.ListenerSection(host="127.0.0.1", port="5672"))
    conn = transports.start(server, settings, "peer:1")
    try:
        # The binding keeps its attributes in the object's record once a
        # wrapper was made: none for a transport or connection started here.
        assert lib.pn_record_get_py(lib.pn_transport_attachments(conn.tptr)) == ffi.NULL
        assert lib.pn_record_get_py(lib.pn_connection_attachments(conn.cptr)) == ffi.NULL
        assert transports.by_transport[conn.tptr] is conn
        assert transports.by_connection[conn.cptr] is conn

        client = Transport()
        client.sasl().allowed_mechs("ANONYMOUS")
        pn_client = Connection()
        pn_client.container = "client-1"
        client.bind(pn_client)
        pn_client.open()
        _pump(transports, server, client, client_sock)
        # The peer's OPEN reached the router's connection object.
        assert ffi.string(lib.pn_connection_remote_container(conn.cptr)) == b"client-1"
        kinds = []
        ptrs, ints = event_arrays()
        while kind := next_event(transports.collector, 1, ptrs, ints):
            kinds.append(kind)
        assert lib.PN_CONNECTION_REMOTE_OPEN in kinds
        # A wrapper made on demand (TLS, tracing) sees the same transport.
        assert conn.transport._impl == conn.tptr
        assert not pn_client.state & Endpoint.REMOTE_ACTIVE, "the router has not opened yet"
    finally:
        transports.release(conn)
        client_sock.close()
    assert not transports.conns and not transports.by_transport
