"""Faults measured, on Hop and on qdrouterd alike (docs/reliability.md).

``cut-links``: two routers, A and B (an interior, or an edge on its uplink),
joined through a relay that cuts the connection from outside while both
processes live on: its sockets shut down (``cut``), or silent as behind a dead
switch until the idle timeout (``blackhole``).  An at-least-once flow crosses
the link the whole time (producer on B, consumer on A, every message not
accepted sent again).  Reported for each kind of link and cut: seconds from
the heal until messages are accepted again; messages lost must be 0 and every
delivery must end with an outcome, or the run fails.

``slow-clients``: connections that stop in the middle of the handshake (silent,
after the AMQP header, half a SASL init; silent or half a request on an HTTP
listener), all held at once, on a router whose listeners set
``initialHandshakeTimeoutSeconds``.  Reported: resident memory per held
connection, seconds until the router closed the last of each kind (none:
still open well after the limit).
"""

from __future__ import annotations

import selectors
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.processes import HOP, Flavour, RouterProcess, listener, raise_fd_limit

Record = dict[str, Any]

IDLE_S = 4
#: The flow across the cut link: messages and their rate.
FLOW_COUNT, FLOW_RATE = 1500, 150.0
HANDSHAKE_LIMIT_S = 5


def _pair(flavour: Flavour, role: str) -> tuple[RouterProcess, RouterProcess, Any]:
    """A, and B connected to A's ``role`` listener through a cuttable relay;
    both ends of that link time out after IDLE_S of silence."""
    from tests.system.proxy import CuttableProxy

    idle = f"    idleTimeoutSeconds: {IDLE_S}\n"
    log = "log {\n    module: DEFAULT\n    enable: info+\n}\n"
    a = RouterProcess("router {\n    mode: interior\n    id: A\n}\n" + listener(flavour)
                      + listener(flavour, role, idle_timeout=IDLE_S) + log, name="cut-A",
                      flavour=flavour)
    proxy = CuttableProxy(a.ports[1])
    mode = "interior" if role == "inter-router" else "edge"
    try:
        b = RouterProcess(f"router {{\n    mode: {mode}\n    id: B\n}}\n" + listener(flavour)
                          + f"connector {{\n    host: 127.0.0.1\n    port: {proxy.port}\n"
                            f"    role: {role}\n{idle}}}\n" + log,
                          name="cut-B", flavour=flavour)
    except BaseException:
        proxy.close()
        a.stop()
        raise
    return a, b, proxy


def _one_cut(flavour: Flavour, role: str, how: str) -> Record:
    from tests.system.flows import AtLeastOnce

    a, b, proxy = _pair(flavour, role)
    try:
        flow = AtLeastOnce(b.url, a.url, "cut.q", count=FLOW_COUNT, rate=FLOW_RATE)
        flow.start()
        _until(lambda: len(flow.accepted) >= 150, 60, "traffic across the link", flow)
        (proxy.cut if how == "cut" else proxy.blackhole)()
        # Long enough for both routers to notice (silence: the idle timeout).
        time.sleep(1.0 if how == "cut" else IDLE_S * 2)
        healed = time.monotonic()
        before = len(flow.accepted)
        proxy.heal()
        _until(lambda: len(flow.accepted) > before, 120, "traffic after the heal", flow)
        heal_s = time.monotonic() - healed
        flow.wait(180)
    finally:
        proxy.close()
        b.stop()
        a.stop()
    lost = len(flow.accepted - flow.received)
    if lost or flow.in_flight or flow.outcomes.get("rejected", 0):
        raise RuntimeError(f"{role} link {how}: {flow.describe()}, "
                           f"{len(flow.in_flight)} without an outcome")
    return {"heal_s": heal_s, "duplicates": flow.duplicates,
            "not_accepted": sum(v for k, v in flow.outcomes.items() if k != "accepted")}


def _until(check: Callable[[], bool], timeout: float, what: str, flow: Any) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f} s ({flow.describe()})")
        time.sleep(0.01)


def cut_links(flavour: Flavour = HOP) -> Callable[[dict[str, Path], Any], Record]:
    """Each kind of link cut each way under an at-least-once flow, then healed."""
    def run(bins: dict[str, Path], scale: Any) -> Record:
        record: Record = {"messages": 0, "lost": 0}
        for role in ("inter-router", "edge"):
            for how in ("cut", "blackhole"):
                one = _one_cut(flavour, role, how)
                key = f"{role.replace('-', '_')}_{how}"
                record[f"{key}_heal_s"] = one["heal_s"]
                record[f"{key}_duplicates"] = one["duplicates"]
                record[f"{key}_not_accepted"] = one["not_accepted"]
                record["messages"] += FLOW_COUNT
        record["heal_s_max"] = max(v for k, v in record.items() if k.endswith("_heal_s"))
        return record
    return run


# -- slow clients --------------------------------------------------------------------

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
# A SASL header, then the first bytes of a sasl-init frame (AMQP 1.0 part 5.3.3.2).
SASL_INIT_PART = SASL_HEADER + b"\x00\x00\x00\x40\x02\x01\x00\x00\x00\x53\x41"
HTTP_PART = b"GET / HTTP/1.1\r\nHost: x\r\n"

#: What each kind of slow client sends before it stops, and on which listener.
SLOW_KINDS: dict[str, tuple[int, bytes]] = {
    "amqp_silent": (0, b""),
    "amqp_header": (0, AMQP_HEADER),
    "sasl_init_part": (0, SASL_INIT_PART),
    "http_silent": (1, b""),
    "http_part": (1, HTTP_PART),
}


def slow_clients(flavour: Flavour = HOP,
                 http: bool = True) -> Callable[[dict[str, Path], Any], Record]:
    """``Scale.idle_connections`` / 10 of each kind of slow client at once
    (without ``http``, the AMQP kinds only: a qdrouterd built without
    libwebsockets has no HTTP listener)."""
    kinds = {k: v for k, v in SLOW_KINDS.items() if http or v[0] == 0}

    def run(bins: dict[str, Path], scale: Any) -> Record:
        each = max(5, scale.idle_connections // 10)
        raise_fd_limit(each * len(kinds) + 1000)
        limit = f"    initialHandshakeTimeoutSeconds: {HANDSHAKE_LIMIT_S}\n"
        conf = ("router {\n    mode: standalone\n    id: Slow\n}\n"
                + listener(flavour, extra=limit)
                + (listener(flavour, extra=limit + "    http: yes\n") if http else "")
                + "log {\n    module: DEFAULT\n    enable: notice+\n}\n")
        with RouterProcess(conf, name="slow", flavour=flavour) as router:
            time.sleep(0.5)
            rss = [router.rss()]
            held: dict[socket.socket, tuple[str, float]] = {}
            try:
                for port_index in sorted({v[0] for v in kinds.values()}):
                    for kind, (where, first) in kinds.items():
                        if where == port_index:
                            for _ in range(each):
                                held[_slow(router.ports[port_index], first)] = \
                                    (kind, time.monotonic())
                    time.sleep(1.0)  # the router has taken every connection in
                    rss.append(router.rss())
                closed = _closed_within(held, HANDSHAKE_LIMIT_S + 15.0)
            finally:
                for sock in held:
                    sock.close()
        at = [each * sum(1 for where, _ in kinds.values() if where == port_index)
              for port_index in (0, 1)]
        record: Record = {"connections": len(held), "limit_s": HANDSHAKE_LIMIT_S,
                          "kb_per_slow_connection": (rss[1] - rss[0]) / 1024 / at[0]}
        if http:
            record["kb_per_slow_http_connection"] = (rss[2] - rss[1]) / 1024 / at[1]
        for kind in kinds:
            times = [t for sock, t in closed.items() if held[sock][0] == kind]
            record[f"{kind}_closed"] = len(times)
            record[f"{kind}_last_closed_s"] = max(times) if len(times) == each else None
        record["open_after_limit"] = len(held) - len(closed)
        return record
    return run


def _slow(port: int, first: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    if first:
        sock.sendall(first)
    sock.setblocking(False)
    return sock


def _closed_within(held: dict[socket.socket, tuple[str, float]],
                   timeout: float) -> dict[socket.socket, float]:
    """How long after it was opened the router closed each socket, for those
    it closed within ``timeout`` of the last opened; whatever it sent first
    is read and dropped (an HTTP 408, an AMQP header)."""
    closed: dict[socket.socket, float] = {}
    with selectors.DefaultSelector() as selector:
        for sock in held:
            selector.register(sock, selectors.EVENT_READ, sock)
        deadline = max(opened for _, opened in held.values()) + timeout
        while len(closed) < len(held) and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.2):
                sock = key.data
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    data = b""
                if not data:
                    closed[sock] = time.monotonic() - held[sock][1]
                    selector.unregister(sock)
    return closed
