"""TCP services through one router (docs/tcp.md): tcpListener and
tcpConnector on a real hopd, real TCP clients and services on loopback."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.system.conftest import StartRouter
from tests.system.harness import Hop, hopd_command, router_conf
from tests.system.mgmt import PREFIX, Management
from tests.system.tcpservices import TCP_LISTENING, EchoServer, exchange, read_line
from tests.system.test_metrics import HTTP_LISTENER, scrape
from tests.system.test_tools import hopstat
from tests.waiting import free_port, wait_for


def _bridges(address: str, *ports: int) -> str:
    text = f"tcpListener {{\n    host: 127.0.0.1\n    port: 0\n    address: {address}\n}}\n"
    for n, port in enumerate(ports):
        text += (f"tcpConnector {{\n    name: c{n}\n    host: 127.0.0.1\n    port: {port}\n"
                 f"    address: {address}\n}}\n")
    return text


def _tcp_port(hop: Hop) -> int:
    return int(hop.wait_log(TCP_LISTENING.pattern).group(1))




def test_a_service_is_reached_through_the_router_with_both_half_closes(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    echo.append(EchoServer("alpha"))
    hop = start_router(router_conf(_bridges("svc", echo[0].port)))
    port = _tcp_port(hop)
    payload = os.urandom(3_000_000)
    name, got = exchange(port, payload)
    assert name == b"alpha"
    assert got == payload
    mgmt = Management(hop.url)
    try:
        wait_for(lambda: mgmt.query("tcpListener", "connectionsClosed")[0]
                 ["connectionsClosed"] == 1, what="the connection counted as closed")
        (listener,) = mgmt.query("tcpListener", "address", "connectionsOpened", "bytesIn",
                                 "bytesOut")
        (connector,) = mgmt.query("tcpConnector", "name", "connectionsOpened", "bytesIn",
                                  "bytesOut")
    finally:
        mgmt.close()
    assert listener == {"address": "svc", "connectionsOpened": 1, "bytesIn": len(payload),
                        "bytesOut": len(payload) + len(b"alpha\n")}
    assert connector == {"name": "c0", "connectionsOpened": 1, "bytesIn": len(payload),
                         "bytesOut": len(payload) + len(b"alpha\n")}


def test_connections_are_balanced_over_the_connectors(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    echo.extend([EchoServer("a"), EchoServer("b")])
    hop = start_router(router_conf(_bridges("svc", echo[0].port, echo[1].port)))
    port = _tcp_port(hop)
    socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(6)]
    try:
        names = sorted(read_line(s).strip() for s in socks)
    finally:
        for s in socks:
            s.close()
    # Open at once, each goes to the connector with fewer open: three each.
    assert names == [b"a"] * 3 + [b"b"] * 3


def test_a_connector_whose_service_refuses_is_passed_over(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    echo.append(EchoServer("alive"))
    dead = free_port()
    hop = start_router(router_conf(_bridges("svc", dead, echo[0].port)))
    port = _tcp_port(hop)
    for _ in range(3):
        name, got = exchange(port, b"ping")
        assert (name, got) == (b"alive", b"ping")
    mgmt = Management(hop.url)
    try:
        rows = {r["name"]: r for r in mgmt.query("tcpConnector", "name", "connectionsOpened",
                                                 "connectionsRefused")}
    finally:
        mgmt.close()
    assert rows["c1"]["connectionsOpened"] == 3
    assert rows["c0"]["connectionsOpened"] == 0 and rows["c0"]["connectionsRefused"] >= 1
    assert f"cannot reach 127.0.0.1:{dead}" in hop.log_text()


def test_a_client_is_reset_when_no_connector_can_reach_a_service(
        start_router: StartRouter) -> None:
    hop = start_router(router_conf(_bridges("svc", free_port())))
    port = _tcp_port(hop)
    # The reset may come as soon as the connect (loopback is quick) or at the read.
    with pytest.raises(ConnectionResetError), \
            socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"hello")
        sock.recv(10)
    hop.wait_log(r"reset: no connector of its address could reach its service")


def test_a_connection_is_held_until_its_address_has_a_connector(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    echo.append(EchoServer("late"))
    hop = start_router(router_conf(_bridges("svc")))
    port = _tcp_port(hop)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"waiting")
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(10)
        hop.wait_log(r"held: address svc has no connector")
        mgmt = Management(hop.url)
        try:
            status, description, body = mgmt.request(
                {"address": "svc", "host": "127.0.0.1", "port": str(echo[0].port)},
                operation="CREATE", type=PREFIX + "tcpConnector", name="late")
            assert status == 201, description
            assert body["identity"] == "tcpConnector/late"
        finally:
            mgmt.close()
        sock.settimeout(10)
        assert read_line(sock) == b"late\n"
        got = b""
        while len(got) < len(b"waiting"):
            got += sock.recv(10)
        assert got == b"waiting"


def test_management_shows_each_carried_connection_both_sides(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    echo.append(EchoServer("svc"))
    hop = start_router(router_conf(_bridges("svc", echo[0].port)))
    port = _tcp_port(hop)
    mgmt = Management(hop.url)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            client_port = sock.getsockname()[1]
            assert read_line(sock) == b"svc\n"
            sock.sendall(b"12345")
            got = b""
            while len(got) < 5:
                got += sock.recv(10)

            def both() -> list[dict[str, object]]:
                return mgmt.query("tcpConnection", "direction", "host", "address", "bytesIn",
                                  "bytesOut")

            wait_for(lambda: any(r["bytesIn"] == 5 for r in both()), what="bytes counted")
            rows = sorted(both(), key=lambda r: str(r["direction"]))
            shown = hopstat(hop, "--tcp")
        assert rows == [
            {"direction": "in", "host": f"127.0.0.1:{client_port}", "address": "svc",
             "bytesIn": 5, "bytesOut": 9},
            {"direction": "out", "host": f"127.0.0.1:{echo[0].port}", "address": "svc",
             "bytesIn": 5, "bytesOut": 9},
        ]
        # hopstat --tcp: the bridges with their counts, the connection's two sides.
        assert "TCP Bridges" in shown and "TCP Connections" in shown
        assert re.search(rf"\bc0\s+connector\s+svc\s+127\.0\.0\.1\s+{echo[0].port}"
                         r"\s+1\s+0\s+0\s+5\s+9\b", shown), shown
        assert re.search(rf"\bin\s+svc\s+127\.0\.0\.1:{client_port}\s+5\s+9\b", shown), shown
        assert re.search(rf"\bout\s+svc\s+127\.0\.0\.1:{echo[0].port}\s+5\s+9\b", shown)
        wait_for(lambda: not mgmt.query("tcpConnection", "direction"),
                 what="the connection gone from management once closed")
        # A listener made and deleted at run time.
        status, description, body = mgmt.request(
            {"address": "svc", "host": "127.0.0.1", "port": "0"}, operation="CREATE",
            type=PREFIX + "tcpListener", name="extra")
        assert status == 201, description
        extra = int(body["port"])
        assert exchange(extra, b"x") == (b"svc", b"x")
        status, description, _ = mgmt.request(operation="DELETE", type=PREFIX + "tcpListener",
                                              name="extra")
        assert status == 204, description
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", extra), timeout=5).close()
    finally:
        mgmt.close()


def test_a_listener_whose_port_is_taken_stops_the_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        busy = taken.getsockname()[1]
        conf_path = tmp_path / "busy.conf"
        conf_path.write_text(router_conf(
            f"tcpListener {{\n    host: 127.0.0.1\n    port: {busy}\n    address: svc\n}}\n"))
        done = subprocess.run(hopd_command("-c", str(conf_path)), capture_output=True,
                              text=True, timeout=60)
    assert done.returncode == 1
    assert "required TCP listener failed" in done.stderr + done.stdout
    assert "Traceback" not in done.stderr + done.stdout


def test_many_connections_at_once_all_arrive_whole(
        start_router: StartRouter, echo: list[EchoServer]) -> None:
    echo.extend([EchoServer("a"), EchoServer("b")])
    hop = start_router(router_conf(_bridges("svc", echo[0].port, echo[1].port)))
    port = _tcp_port(hop)
    results: list[bool] = []
    payloads = [os.urandom(200_000 + n) for n in range(16)]

    def one(payload: bytes) -> None:
        name, got = exchange(port, payload)
        results.append(name in (b"a", b"b") and got == payload)

    threads = [threading.Thread(target=one, args=(p,)) for p in payloads]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == [True] * 16, f"after {time.monotonic() - started:.1f} s"
    assert echo[0].accepted + echo[1].accepted == 16


def test_the_tcp_bench_runs_every_scenario_through_the_router(tmp_path: Path) -> None:
    """``python -m bench.tcp``, briefly, through one router and a line of
    three: every byte a client sent is counted by the sink behind the
    routers (the client fails otherwise)."""
    done = subprocess.run([sys.executable, "-m", "bench.tcp", "--seconds", "0.5", "--count",
                           "50", "--streams", "2", "--line", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "tcp.json").read_text())
    assert set(results) == {"direct", "hop", "hop-line"}
    for way in results.values():
        assert way["bulk"]["bytes"] > 0 and way["parallel"]["bytes"] > 0
        assert way["connect"]["connections"] > 0 and way["rr"]["count"] == 50
    assert results["hop"]["bulk"]["router_cpu_s"] > 0
    assert results["hop-line"]["bulk"]["router_cpu_s"] > 0


@pytest.mark.parametrize("workers", [1, 2])
def test_metrics_count_each_bridge(start_router: StartRouter, echo: list[EchoServer],
                                   workers: int) -> None:
    """``/metrics``: a bridge's connections and bytes, labelled by kind, name
    and address; on two workers, gathered for the whole router."""
    echo.append(EchoServer("m"))
    refused = free_port()
    text = router_conf(HTTP_LISTENER + _bridges("svc", refused, echo[0].port))
    hop = start_router(text, listeners=2, args=("--workers", str(workers)))
    hop.wait_log(r"Operational, \d+ Threads Running", 60)  # the workers joined
    port = _tcp_port(hop)
    assert exchange(port, b"abc") == (b"m", b"abc")

    def bridges() -> dict[str, float]:
        return {k: v for k, v in scrape(hop.ports[1])[2].items() if k.startswith("hop_tcp_")}

    c0, c1 = (f"{{address=svc,bridge={c},kind=tcpConnector}}" for c in ("c0", "c1"))
    seen: list[dict[str, float]] = []

    def counted() -> bool:
        # A worker that has only just joined its siblings answers for itself
        # alone: wait for a scrape of the whole router.
        seen.append(bridges())
        return seen[-1].get("hop_tcp_connections_closed_total" + c1) == 1

    wait_for(counted, what="the connection counted as closed")
    samples = seen[-1]
    listener = [v for k, v in samples.items()
                if "kind=tcpListener" in k and k.startswith("hop_tcp_bytes_in_total")]
    assert listener == [3], samples
    assert samples["hop_tcp_bytes_out_total" + c1] == 5
    assert samples["hop_tcp_connections_opened_total" + c1] == 1
    assert samples["hop_tcp_connections_refused_total" + c0] == 1
