"""TCP services across a network of routers (docs/tcp.md#across-the-network):
a tcpListener on one hopd, tcpConnectors on others, real TCP clients and
services on loopback, the connections carried as streamed messages."""

from __future__ import annotations

import contextlib
import os
import socket
import threading

import pytest

from tests.system.conftest import StartRouter
from tests.system.mgmt import Management
from tests.system.network import Network, start_network
from tests.system.tcpservices import TCP_LISTENING, EchoServer, exchange, half_closed
from tests.waiting import free_port, wait_for

LINE = {"A": [], "B": ["A"], "C": ["B"]}


def _listener(address: str) -> str:
    return f"tcpListener {{\n    host: 127.0.0.1\n    port: 0\n    address: {address}\n}}\n"


def _connector(name: str, address: str, port: int) -> str:
    return (f"tcpConnector {{\n    name: {name}\n    host: 127.0.0.1\n    port: {port}\n"
            f"    address: {address}\n}}\n")


def _tcp_port(net: Network, router_id: str) -> int:
    return int(net[router_id].wait_log(TCP_LISTENING.pattern).group(1))


def _line(start_router: StartRouter, connectors: dict[str, str],
          topology: dict[str, list[str]] = LINE) -> tuple[Network, int]:
    """The routers of ``topology`` (a line of three unless given), a
    listener for ``svc`` on A and the connectors given per router."""
    extras = {"A": _listener("svc")}
    for router_id, text in connectors.items():
        extras[router_id] = extras.get(router_id, "") + text
    net = start_network(start_router, topology, extras=extras)
    return net, _tcp_port(net, "A")


def test_a_service_two_routers_away_is_reached_with_both_half_closes(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    echo.append(EchoServer("far"))
    net, port = _line(start_router, {"C": _connector("c0", "svc", echo[0].port)})
    payload = os.urandom(3 << 20)  # beyond the read window: flow control must turn
    name, got = exchange(port, payload)
    assert name == b"far"
    assert got == payload
    assert net["A"].wait_log(r"streamed to address svc across the network")
    # A service that speaks first, and a client that sends nothing at all.
    name, got = exchange(port, b"")
    assert (name, got) == (b"far", b"")
    assert echo[0].accepted == 2


def test_a_service_that_answers_and_closes_at_once_is_heard_across_the_line(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    # The client sends and half-closes; the service echoes and closes at
    # once, often before the stream back has credit: its answer still comes.
    echo.append(EchoServer("quiet", greet=False))
    _net, port = _line(start_router, {"C": _connector("c0", "svc", echo[0].port)})
    for i in range(10):
        assert half_closed(port, b"abcd%d" % i) == b"abcd%d" % i


def test_many_connections_at_once_cross_the_line_whole(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    echo.append(EchoServer("far"))
    _net, port = _line(start_router, {"C": _connector("c0", "svc", echo[0].port)})
    payloads = [os.urandom(100_000 + i) for i in range(12)]
    results: dict[int, tuple[bytes, bytes]] = {}

    def one(i: int) -> None:
        results[i] = exchange(port, payloads[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(payloads))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == list(range(len(payloads)))
    for i, payload in enumerate(payloads):
        assert results[i] == (b"far", payload)


def test_connections_are_balanced_over_connectors_on_two_routers(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    # A star: A reaches B and C directly, and counts the streams open over each.
    echo.extend([EchoServer("b"), EchoServer("c")])
    net, port = _line(start_router, {"B": _connector("cb", "svc", echo[0].port),
                                      "C": _connector("cc", "svc", echo[1].port)},
                       {"B": [], "C": [], "A": ["B", "C"]})
    mgmt = Management(net.url("A"))
    wait_for(lambda: any(row["name"].endswith("svc") and row["remoteCount"] == 2
                         for row in mgmt.query("router.address", "name", "remoteCount")),
             20, "both connectors' routers known at A")
    mgmt.conn.close()
    # Held open at once, so that each is outstanding when the next is routed.
    socks = []
    names = []
    for _ in range(6):
        sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        sock.sendall(b"x")
        socks.append(sock)
        line = bytearray()
        while not line.endswith(b"\n"):
            chunk = sock.recv(1)
            assert chunk, "the service's name"
            line.extend(chunk)
        names.append(bytes(line).strip())
    for sock in socks:
        sock.close()
    assert set(names) == {b"b", b"c"}, names
    assert min(names.count(b"b"), names.count(b"c")) >= 2, names


def test_a_connector_whose_service_refuses_is_passed_over_for_another(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    echo.append(EchoServer("good"))
    dead = free_port()  # nothing listens there
    net, port = _line(start_router, {"B": _connector("dead", "svc", dead),
                                     "C": _connector("good", "svc", echo[0].port)})
    for _ in range(4):
        assert exchange(port, b"hello") == (b"good", b"hello")
    net["B"].wait_log(r"TCP connector dead cannot reach 127\.0\.0\.1:\d+")


def test_a_client_is_reset_when_the_only_connector_cannot_reach_its_service(
        start_router: StartRouter) -> None:
    net, port = _line(start_router, {"C": _connector("dead", "svc", free_port())})
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"anyone?")
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(100) == b""
    net["A"].wait_log(r"reset \(no connector of its address could reach its service\)")


def test_a_reset_service_resets_the_client_across_the_line(
        start_router: StartRouter) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    net, port = _line(start_router, {"C": _connector("c0", "svc", server.getsockname()[1])})
    with server, socket.create_connection(("127.0.0.1", port), timeout=30) as client:
        client.sendall(b"ping")
        served, _ = server.accept()
        assert served.recv(4) == b"ping"
        served.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        served.close()  # an RST
        with pytest.raises(ConnectionResetError):
            while client.recv(100):
                pass
    net["A"].wait_log(r"stream \S+ reset")


def test_management_shows_the_connection_on_both_routers(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    echo.append(EchoServer("far"))
    net, port = _line(start_router, {"C": _connector("c0", "svc", echo[0].port)})
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(b"12345")
        assert sock.recv(4) == b"far\n"
        got = b""
        while len(got) < 5:
            got += sock.recv(5 - len(got))
        on_a = Management(net.url("A"))
        wait_for(lambda: bool(on_a.query("tcpConnection")), 10, "A's row")
        rows = on_a.query("tcpConnection")
        assert [(r["direction"], r["address"]) for r in rows] == [("in", "svc")]
        assert rows[0]["bytesIn"] == 5
        on_c = Management(net.url("C"))
        rows = on_c.query("tcpConnection")
        assert [(r["direction"], r["address"]) for r in rows] == [("out", "svc")]
        assert rows[0]["host"] == f"127.0.0.1:{echo[0].port}"
        assert on_c.query("tcpConnector")[0]["connectionsOpened"] == 1
        # The AMQP connections that carry it are the router's own: not listed.
        assert len(on_a.query("connection")) == len(on_c.query("connection"))
        on_a.conn.close()
        on_c.conn.close()



def test_a_client_on_one_edge_reaches_a_service_on_another(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    echo.append(EchoServer("edge2"))
    net = start_network(start_router, {"I": []}, edges={"E1": ["I"], "E2": ["I"]},
                        extras={"E1": _listener("svc"),
                                "E2": _connector("e2", "svc", echo[0].port)})
    port = _tcp_port(net, "E1")
    payload = os.urandom(1 << 20)
    assert exchange(port, payload) == (b"edge2", payload)
    assert exchange(port, b"again") == (b"edge2", b"again")
    net["E1"].wait_log(r"streamed to address svc across the network")
    assert echo[0].accepted == 2
