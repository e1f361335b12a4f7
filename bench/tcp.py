"""TCP services through a router, beside a direct loopback connection
(docs/tcp.md#measuring).

``python -m bench.tcp [--seconds S] [--streams K] [--qdrouterd PATH] [--out DIR]``

Each scenario runs against a service on loopback three ways: directly (the
physical limit of this machine), through one Hop router (a ``tcpListener``
and a ``tcpConnector`` of one address) and, with ``--qdrouterd``, through
that qdrouterd (its 1.18 TCP adaptor has the same two sections); with
``--line``, also through a line of three Hop routers (and of three of that
qdrouterd, with both), the listener on the first and the connector on the
last, so that each connection crosses the network as a pair of streamed
messages (docs/tcp.md#across-the-network):

- ``bulk``: one connection sending as fast as it can for ``--seconds`` to a
  sink that counts and discards: Gbit/s, and the router's CPU seconds a GB;
- ``parallel``: ``--streams`` such connections at once: their sum;
- ``connect``: connect, one byte there and back, close, again and again:
  connections a second;
- ``rr``: one connection, one byte there and back, ``--count`` times: the
  round trip's median and 99th percentile in microseconds.

The clients and services are processes of their own (``python -m bench.tcp
peer ROLE ...``), with large buffers and ``recv_into``, so that what is
measured is the path, not Python's copies.  Writes ``tcp.json``.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Final

from bench.processes import HOP, Flavour, RouterProcess, free_port, qdrouterd, router_conf

__all__ = ["main"]

CHUNK: Final = 1 << 20


# -- the peers (each run in a process of its own) ---------------------------------------


def _serve(port: int, handle: Any) -> None:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(512)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def _sink(conn: socket.socket) -> None:
    """Count what arrives until the end of the stream; answer the count."""
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    total = 0
    with conn:
        while True:
            n = conn.recv_into(view)
            if not n:
                break
            total += n
        conn.sendall(total.to_bytes(8, "big"))


def _echo(conn: socket.socket) -> None:
    buffer = bytearray(65536)
    view = memoryview(buffer)
    with conn:
        while True:
            n = conn.recv_into(view)
            if not n:
                return
            conn.sendall(view[:n])


def _connect(target: str) -> socket.socket:
    host, port = target.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _bulk(target: str, seconds: float, streams: int) -> dict[str, Any]:
    data = memoryview(b"\x5a" * CHUNK)
    counted: list[int] = []

    def one() -> None:
        with _connect(target) as sock:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            answer = b""
            while len(answer) < 8:
                chunk = sock.recv(8 - len(answer))
                if not chunk:
                    raise RuntimeError("the sink ended without its count")
                answer += chunk
            counted.append(int.from_bytes(answer, "big"))

    started = time.perf_counter()
    threads = [threading.Thread(target=one) for _ in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if len(counted) != streams:
        raise RuntimeError(f"{streams - len(counted)} streams failed")
    total = sum(counted)
    return {"bytes": total, "seconds": elapsed, "gbit_s": total * 8 / elapsed / 1e9}


def _rr(target: str, count: int) -> dict[str, Any]:
    times = []
    with _connect(target) as sock:
        for _ in range(count):
            started = time.perf_counter()
            sock.sendall(b"x")
            if sock.recv(1) != b"x":
                raise RuntimeError("the echo went wrong")
            times.append((time.perf_counter() - started) * 1e6)
    times.sort()
    return {"count": count, "p50_us": statistics.median(times),
            "p99_us": times[int(len(times) * 0.99) - 1]}


def _cps(target: str, seconds: float) -> dict[str, Any]:
    done = 0
    started = time.perf_counter()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with _connect(target) as sock:
            sock.sendall(b"x")
            if sock.recv(1) != b"x":
                raise RuntimeError("the echo went wrong")
        done += 1
    elapsed = time.perf_counter() - started
    return {"connections": done, "per_s": done / elapsed}


def _peer(argv: list[str]) -> int:
    role, *rest = argv
    if role in ("sink", "echo"):
        _serve(int(rest[0]), _sink if role == "sink" else _echo)
        return 0
    target, amount = rest[0], float(rest[1])
    if role == "bulk":
        result = _bulk(target, amount, int(rest[2]))
    elif role == "rr":
        result = _rr(target, int(amount))
    else:
        result = _cps(target, amount)
    print(json.dumps(result), flush=True)
    return 0


# -- the runs ----------------------------------------------------------------------


def _spawn(*args: str, stderr: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "bench.tcp", "peer", *args],
                            stdout=subprocess.PIPE, stderr=stderr, text=True)


def _server(role: str) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    proc = _spawn(role, str(port))
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise RuntimeError(f"the {role} service did not start")
    return proc, port


class PeerFailed(RuntimeError):
    """A client peer saw its connections fail (what it said is the message)."""


def _client(*args: str, timeout: float) -> dict[str, Any]:
    proc = _spawn(*args, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        said = err.strip().splitlines()[-1] if err and err.strip() else ""
        raise PeerFailed(f"peer {args[0]} exited {proc.returncode}: {said}")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def _router(flavour: Flavour, service_port: int) -> tuple[RouterProcess, int]:
    port = free_port()
    extra = (f"tcpListener {{\n    host: 127.0.0.1\n    port: {port}\n    address: bench\n}}\n"
             f"tcpConnector {{\n    host: 127.0.0.1\n    port: {service_port}\n"
             "    address: bench\n}\n")
    router = RouterProcess(router_conf(flavour=flavour, extra=extra), name="tcp",
                           flavour=flavour)
    # The TCP listener opens with the rest; wait until it takes connections.
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                router.stop()
                raise
            time.sleep(0.05)
    return router, port


def _line_routers(service_port: int, echo_port: int,
                  flavour: Flavour = HOP) -> tuple[list[RouterProcess], int]:
    """Three routers of ``flavour`` in a line, A - B - C: a tcpListener on
    A, a tcpConnector to the service on C; returned once a probe connection
    (to the echo service, its own address) has crossed the line."""
    port, probe = free_port(), free_port()
    inter = [free_port(), free_port()]
    routers: list[RouterProcess] = []

    def section(kind: str, host_port: int, address: str) -> str:
        # Named: the probe's connector and the echo scenarios' share a port.
        return (f"{kind} {{\n    name: {address}\n    host: 127.0.0.1\n    port: {host_port}\n"
                f"    address: {address}\n}}\n")

    def interior(router_id: str, extra: str) -> str:
        return f"router {{\n    mode: interior\n    id: {router_id}\n}}\n{extra}" \
            "log {\n    module: DEFAULT\n    enable: notice+\n}\n"

    def inter_router(kind: str, host_port: int) -> str:
        anonymous = ("    saslMechanisms: ANONYMOUS\n    authenticatePeer: no\n"
                     if kind == "listener" else "")
        return (f"{kind} {{\n    host: 127.0.0.1\n    port: {host_port}\n"
                f"    role: inter-router\n{anonymous}}}\n")

    confs = [
        ("C", inter_router("listener", inter[1]) + section("tcpConnector", service_port, "bench")
         + section("tcpConnector", echo_port, "probe")),
        ("B", inter_router("listener", inter[0]) + inter_router("connector", inter[1])),
        ("A", inter_router("connector", inter[0]) + section("tcpListener", port, "bench")
         + section("tcpListener", probe, "probe")),
    ]
    try:
        for router_id, text in confs:
            routers.append(RouterProcess(interior(router_id, text), name=f"tcp-{router_id}",
                                         flavour=flavour))
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", probe), timeout=2) as sock:
                    sock.sendall(b"?")
                    if sock.recv(1) == b"?":
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the line of three did not carry a probe connection")
            time.sleep(0.2)
    except BaseException:
        for router in routers:
            router.stop()
        raise
    return routers, port


def run(args: argparse.Namespace) -> dict[str, Any]:
    ways: list[tuple[str, Flavour | None]] = [("direct", None), ("hop", HOP)]
    if args.line:
        ways.append(("hop-line", HOP))
    if args.qdrouterd:
        ways.append(("qdrouterd", qdrouterd(args.qdrouterd)))
        if args.line:
            ways.append(("qdr-line", qdrouterd(args.qdrouterd)))
    sink, sink_port = _server("sink")
    echo, echo_port = _server("echo")
    results: dict[str, Any] = {}
    try:
        for name, flavour in ways:
            entry: dict[str, Any] = {}
            for scenario, service_port in (("bulk", sink_port), ("parallel", sink_port),
                                           ("connect", echo_port), ("rr", echo_port)):
                router = None
                routers: list[RouterProcess] = []
                target_port = service_port
                if name.endswith("-line"):
                    assert flavour is not None
                    routers, target_port = _line_routers(service_port, echo_port, flavour)
                elif flavour is not None:
                    router, target_port = _router(flavour, service_port)
                    routers = [router]
                target = f"127.0.0.1:{target_port}"
                try:
                    cpu = sum(r.cpu() for r in routers)
                    got = _scenario(scenario, target, args, flavour)
                    if routers and "failed" not in got:
                        # Every router's CPU together (a line: all three).
                        got["router_cpu_s"] = sum(r.cpu() for r in routers) - cpu
                        if "bytes" in got:
                            got["router_cpu_s_per_gb"] = got["router_cpu_s"] / (
                                got["bytes"] / 1e9)
                finally:
                    for each in routers:
                        each.stop()
                entry[scenario] = got
                print(f"{name:10} {scenario:9} {_line(scenario, got)}", flush=True)
            results[name] = entry
    finally:
        for proc in (sink, echo):
            proc.kill()
            proc.wait()
    return results


def _scenario(scenario: str, target: str, args: argparse.Namespace,
              flavour: Flavour | None) -> dict[str, Any]:
    """Run one scenario's client against ``target``.  A router other than
    Hop whose connections fail has that as its result; Hop's failing ends
    the run."""
    limit = args.seconds * 4 + 60
    try:
        if scenario == "bulk":
            return _client("bulk", target, str(args.seconds), "1", timeout=limit)
        if scenario == "parallel":
            return _client("bulk", target, str(args.seconds), str(args.streams),
                           timeout=limit)
        if scenario == "connect":
            return _client("cps", target, str(args.seconds), timeout=limit)
        return _client("rr", target, str(args.count), timeout=limit)
    except PeerFailed as failure:
        if flavour is None or flavour is HOP:
            raise
        return {"failed": str(failure)}


def _line(scenario: str, got: dict[str, Any]) -> str:
    if "failed" in got:
        return f"FAILED ({got['failed']})"
    cpu = f", router CPU {got['router_cpu_s_per_gb']:.2f} s/GB" \
        if "router_cpu_s_per_gb" in got else ""
    if scenario in ("bulk", "parallel"):
        return f"{got['gbit_s']:.2f} Gbit/s ({got['bytes'] / 1e9:.2f} GB){cpu}"
    if scenario == "connect":
        return f"{got['per_s']:.0f} connections/s"
    return f"round trip p50 {got['p50_us']:.0f} us, p99 {got['p99_us']:.0f} us"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "peer":
        return _peer(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m bench.tcp", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="how long each bulk, parallel and connect run lasts")
    parser.add_argument("--streams", type=int, default=8, help="connections of parallel")
    parser.add_argument("--count", type=int, default=20000, help="round trips of rr")
    parser.add_argument("--line", action="store_true",
                        help="also through a line of three Hop routers (and of three "
                             "qdrouterd, with --qdrouterd)")
    parser.add_argument("--qdrouterd", default="", metavar="PATH",
                        help="also through this qdrouterd (1.18 has the TCP adaptor)")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    results = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tcp.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out / 'tcp.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
