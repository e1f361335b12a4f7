"""TCP connections carried between Hop and qdrouterd 1.18 routers
(docs/tcp.md#across-the-network): a ``tcpListener`` on a router of one
kind, a ``tcpConnector`` on a router of the other, real TCP clients and
services on loopback, the streams in between in qdrouterd 1.18's format.

qdrouterd carried TCP from 1.15 to 1.18 and removed it in 1.19: with a
qdrouterd of another version these tests are skipped, saying so.
"""

from __future__ import annotations

import contextlib
import re
import socket
import subprocess
from collections.abc import Iterator

import pytest

from tests.interop.mixed import MakeNetwork, MixedNetwork, management_query
from tests.system.tcpservices import EchoServer, exchange, half_closed
from tests.waiting import free_port, wait_for

KINDS = ["hopd", "qdrouterd"]
ROUTED_TIMEOUT_S = 30.0


@pytest.fixture(scope="module", autouse=True)
def _qdrouterd_with_tcp(qdrouterd: str) -> None:
    out = subprocess.run([qdrouterd, "--version"], capture_output=True, text=True,
                         timeout=10).stdout.strip()
    match = re.match(r"(\d+)\.(\d+)", out)
    if match is None or not (1, 15) <= (int(match[1]), int(match[2])) <= (1, 18):
        pytest.skip(f"qdrouterd {out or '(unknown version)'} has no TCP adaptor "
                    "(qdrouterd had one from 1.15 to 1.18)")


@pytest.fixture
def services() -> Iterator[list[EchoServer]]:
    made: list[EchoServer] = []
    yield made
    for server in made:
        server.close()


def listener(port: int) -> str:
    return (f"tcpListener {{\n    host: 127.0.0.1\n    port: {port}\n    address: svc\n"
            "    siteId: site1\n}\n")


def connector(port: int) -> str:
    return f"tcpConnector {{\n    host: 127.0.0.1\n    port: {port}\n    address: svc\n}}\n"


def add(net: MixedNetwork, kind: str, router_id: str, peers: list[str], extra: str) -> None:
    if kind == "hopd":
        net.add_hop(router_id, peers, extra=extra)
    else:
        net.add_qdr(router_id, peers, extra=extra)


def wait_routed(net: MixedNetwork, router_id: str) -> None:
    """Wait until ``router_id`` knows a consumer of ``svc`` on another router."""
    def known() -> bool:
        rows = management_query(net.url(router_id), "org.apache.qpid.dispatch.router.address")
        return any(str(row["name"]).endswith("svc") and (row.get("remoteCount") or 0) > 0
                   for row in rows)
    wait_for(known, ROUTED_TIMEOUT_S, f"svc reachable from {router_id}")


def line(make: MakeNetwork, kinds: list[str], server: EchoServer) -> tuple[MixedNetwork, int]:
    """Routers R0..Rn of ``kinds`` in a line, the listener on R0 and the
    connector to ``server`` on the last; returns the listener's port."""
    net = make()
    port = free_port()
    last = len(kinds) - 1
    for i, kind in enumerate(kinds):
        extra = (listener(port) if i == 0 else "") + (connector(server.port) if i == last else "")
        add(net, kind, f"R{i}", [f"R{i - 1}"] if i else [], extra)
    net.wait_converged()
    # Every router on the way: one that has not learnt the address yet
    # releases a stream, and qdrouterd 1.18's listener closes its client then.
    for i in range(last):
        wait_routed(net, f"R{i}")
    return net, port


@pytest.mark.parametrize("client_side", KINDS)
def test_a_connection_crosses_from_one_kind_to_the_other(
        mixed: MakeNetwork, services: list[EchoServer], client_side: str) -> None:
    services.append(EchoServer("far"))
    service_side = "qdrouterd" if client_side == "hopd" else "hopd"
    net, port = line(mixed, [client_side, service_side], services[0])
    payload = bytes(range(256)) * 4096  # 1 MiB: beyond either router's read window
    assert exchange(port, payload) == (b"far", payload)
    assert exchange(port, b"") == (b"far", b"")
    assert services[0].accepted == 2
    hop = net["R0" if client_side == "hopd" else "R1"]
    pattern = (r"streamed to address svc across the network" if client_side == "hopd"
               else r"connected to 127\.0\.0\.1:\d+ for stream \S+@site1")
    hop.wait_log(pattern)


@pytest.mark.parametrize("client_side", KINDS)
def test_half_closes_cross_both_ways(mixed: MakeNetwork, services: list[EchoServer],
                                     client_side: str) -> None:
    # The client ends its stream first; the service echoes, then ends its own.
    services.append(EchoServer("quiet", greet=False))
    service_side = "qdrouterd" if client_side == "hopd" else "hopd"
    _net, port = line(mixed, [client_side, service_side], services[0])
    for i in range(5):
        assert half_closed(port, b"abcd%d" % i) == b"abcd%d" % i


@pytest.mark.parametrize(("kinds", "sizes"), [
    (["hopd", "qdrouterd", "hopd"], (10, 200_000, 1 << 20)),
    # qdrouterd 1.18 at both ends loses the last bytes of a large answer
    # itself (three qdrouterd in a line do too;
    # docs/tcp.md#with-qdrouterd-118-in-the-network): answers of a few kB.
    (["qdrouterd", "hopd", "qdrouterd"], (10, 1000, 8000)),
], ids=["through-qdrouterd", "through-hopd"])
def test_streams_cross_a_router_of_the_other_kind_in_transit(
        mixed: MakeNetwork, services: list[EchoServer], kinds: list[str],
        sizes: tuple[int, ...]) -> None:
    services.append(EchoServer("far"))
    _net, port = line(mixed, kinds, services[0])
    for i, size in enumerate(sizes):
        payload = bytes([i]) * size
        assert exchange(port, payload) == (b"far", payload)


def test_a_reset_service_on_hopd_ends_a_qdrouterd_client(mixed: MakeNetwork) -> None:
    # The other way round qdrouterd 1.18's connector side does not notice its
    # service's reset at all (docs/compatibility.md), so the client waits.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    net = mixed()
    port = free_port()
    net.add_qdr("R0", extra=listener(port))
    net.add_hop("R1", ["R0"], extra=connector(server.getsockname()[1]))
    net.wait_converged()
    wait_routed(net, "R0")
    with server, socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        client.sendall(b"ping")
        served, _ = server.accept()
        got = b""
        while len(got) < 4:
            got += served.recv(4 - len(got))
        assert got == b"ping"
        served.sendall(b"pong")
        served.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        served.close()  # an RST
        answer = bytearray()
        with contextlib.suppress(ConnectionResetError):
            while chunk := client.recv(100):
                answer.extend(chunk)
        # What came before the reset may or may not have been written out;
        # the client's connection ends either way, well before its timeout.
        assert bytes(answer) in (b"", b"pong")
    net["R1"].wait_log(r"TCP service stream \S+ reset")
