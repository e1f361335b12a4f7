"""Two routers joined over a link that loses packets, or is slow, or both
(docs/reliability.md#lossy-and-slow-links).

The far router runs in a network namespace of its own, joined to this one
by a veth pair; its inter-router listener is on the veth, its clients'
listener on the namespace's loopback.  What the link does:

- ``loss``: a share of the packets that cross the veth, each way, dropped
  at random (nftables' ``numgen random`` in the namespace; TCP sends them
  again, as over a lossy WAN);
- ``rate``: the veth's bandwidth in Mbit/s each way (``tc`` token bucket);
- ``delay``: milliseconds added each way by a relay this process runs on
  the near side, which holds each chunk of bytes for that long before
  passing it on.

This kernel has no ``netem`` qdisc (``tc qdisc add ... netem`` is refused),
so loss is nftables' and delay the relay's: a delay of the byte stream, not
of each packet, so neither jitter nor reordering is modelled.

    python -m bench.lossy [--count N] [--qdrouterd PATH] [--out DIR]

runs an at-least-once flow (the load generator's hop-send on the near
router to hop-recv on the far one, 100 B unsettled) over each link and
prints throughput, latency and every delivery's outcome for each router.
Needs root, ``ip`` and ``nft`` (Debian's iproute2 and nftables).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import attrs

from bench.build import build
from bench.processes import HOP, Flavour, RouterProcess, finish, qdrouterd, start

#: Inter-router port of the far router, inside its namespace.
FAR_PORT = 25672


@dataclass(frozen=True)
class Impairment:
    """What a link does to what crosses it."""

    name: str
    loss: float = 0.0  # share of packets dropped each way, 0 to 1
    rate_mbit: float | None = None
    delay_ms: float = 0.0


def unavailable() -> str | None:
    """Why a namespace with a lossy veth cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, nftables)"
    for tool in ("ip", "nft", "tc"):
        if shutil.which(tool) is None:
            return f"no {tool} (apt-get install iproute2 nftables)"
    name = f"hopprobe{os.getpid()}"[:15]
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    try:
        table = subprocess.run(["ip", "netns", "exec", name, "nft", "add", "table", "inet", "t"],
                               capture_output=True, text=True)
        if table.returncode != 0:
            return f"nftables is not usable: {table.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def _run(*argv: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")


@dataclass
class Namespace:
    """A network namespace joined to this one by a veth pair: ``near`` is this
    side's address, ``far`` the namespace's."""

    name: str
    near: str
    far: str
    _near_dev: str = ""
    _far_dev: str = ""

    @classmethod
    @contextlib.contextmanager
    def made(cls, tag: str = "") -> Iterator[Namespace]:
        pid = os.getpid()
        ns = cls(name=f"hopl{tag}{pid}"[:15], near=f"10.231.{pid % 250}.1",
                 far=f"10.231.{pid % 250}.2", _near_dev=f"hl{tag}{pid}a"[:15],
                 _far_dev=f"hl{tag}{pid}b"[:15])
        _run("ip", "netns", "add", ns.name)
        try:
            _run("ip", "link", "add", ns._near_dev, "type", "veth", "peer", "name", ns._far_dev)
            _run("ip", "link", "set", ns._far_dev, "netns", ns.name)
            _run("ip", "addr", "add", f"{ns.near}/30", "dev", ns._near_dev)
            _run("ip", "link", "set", ns._near_dev, "up")
            ns.inside("ip", "addr", "add", f"{ns.far}/30", "dev", ns._far_dev)
            ns.inside("ip", "link", "set", ns._far_dev, "up")
            ns.inside("ip", "link", "set", "lo", "up")
            yield ns
        finally:
            subprocess.run(["ip", "link", "del", ns._near_dev], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns.name], capture_output=True)

    def inside(self, *argv: str) -> None:
        _run("ip", "netns", "exec", self.name, *argv)

    def command(self, argv: list[str] | tuple[str, ...]) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def impair(self, how: Impairment) -> None:
        """Loss and rate on the veth, replacing what was there (delay is the relay's)."""
        subprocess.run(self.command(["nft", "delete", "table", "inet", "hoplossy"]),
                       capture_output=True)
        for dev, where in ((self._near_dev, ()), (self._far_dev, tuple(self.command([])))):
            subprocess.run([*where, "tc", "qdisc", "del", "dev", dev, "root"],
                           capture_output=True)
            if how.rate_mbit:
                _run(*where, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                     f"{how.rate_mbit}mbit", "burst", "64kb", "latency", "400ms")
        if how.loss:
            per_10000 = round(how.loss * 10_000)
            rules = (f"table inet hoplossy {{\n"
                     f"  chain in {{ type filter hook input priority 0; "
                     f"iifname \"{self._far_dev}\" numgen random mod 10000 < {per_10000} drop; }}\n"
                     f"  chain out {{ type filter hook output priority 0; "
                     f"oifname \"{self._far_dev}\" numgen random mod 10000 < {per_10000} drop; }}\n"
                     f"}}\n")
            done = subprocess.run(self.command(["nft", "-f", "-"]), input=rules,
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"nft: {done.stderr.strip()}")


@dataclass
class DelayRelay:
    """Accepts on this side's loopback and passes each connection's bytes to
    ``target`` and back, each chunk held ``delay_s`` before it goes on."""

    target: tuple[str, int]
    delay_s: float
    host: str = "127.0.0.1"
    port: int = 0
    _server: socket.socket | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> DelayRelay:
        server = socket.socket()
        server.bind((self.host, 0))
        server.listen(16)
        server.settimeout(0.2)
        self._server = server
        self.port = server.getsockname()[1]
        self._spawn(self._accept)
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        if self._server is not None:
            self._server.close()

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                near, _ = self._server.accept()
            except TimeoutError:
                continue
            try:
                far = socket.create_connection(self.target, timeout=10)
            except OSError:  # the far side is not listening yet: the dialler tries again
                near.close()
                continue
            for a, b in ((near, far), (far, near)):
                a.settimeout(0.2)
                self._spawn(self._pass, a, b)

    def _pass(self, source: socket.socket, sink: socket.socket) -> None:
        """Read from ``source``; each chunk leaves for ``sink`` ``delay_s`` after it came."""
        held: list[tuple[float, bytes]] = []
        lock = threading.Condition()
        done = threading.Event()

        def writer() -> None:
            while True:
                with lock:
                    while not held and not done.is_set():
                        lock.wait(0.2)
                    if not held:
                        if done.is_set():
                            with contextlib.suppress(OSError):
                                sink.shutdown(socket.SHUT_WR)
                            return
                        continue
                    due, data = held[0]
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                with lock:
                    held.pop(0)
                try:
                    sink.sendall(data)
                except OSError:
                    return

        self._spawn(writer)
        while not self._stop.is_set():
            try:
                data = source.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            with lock:
                held.append((time.monotonic() + self.delay_s, data))
                lock.notify()
        with lock:
            done.set()
            lock.notify()


_CLIENTS = ("listener {{\n    host: 127.0.0.1\n    port: {port}\n"
            "    saslMechanisms: ANONYMOUS\n    authenticatePeer: no\n}}\n")


def _confs(flavour: Flavour, edge: bool, dial: tuple[str, int],
           listen_host: str) -> tuple[str, str]:
    """The near and far routers' conf files.  Inter-router: the near router
    dials ``dial``, the far one listens on ``listen_host``:``FAR_PORT``;
    edge: the far router is an edge router that dials ``dial``, the near
    one listens for it on ``listen_host``:``FAR_PORT``."""
    role = "edge" if edge else "inter-router"
    near = "router {\n    mode: interior\n    id: Near\n}\n" \
        + _CLIENTS.format(port=flavour.port())
    far = f"router {{\n    mode: {'edge' if edge else 'interior'}\n    id: Far\n}}\n" \
        + _CLIENTS.format(port=flavour.port())
    dialling = (f"connector {{\n    host: {dial[0]}\n    port: {dial[1]}\n"
                f"    role: {role}\n}}\n")
    listening = (f"listener {{\n    host: {listen_host}\n    port: {FAR_PORT}\n"
                 f"    role: {role}\n}}\n")
    return (near + listening, far + dialling) if edge else (near + dialling, far + listening)


def flow(ns: Namespace, flavour: Flavour, how: Impairment, count: int, *, edge: bool = False,
         timeout: float = 600.0) -> dict[str, Any]:
    """``count`` unsettled messages from a client of the near router to one of
    the far router over the impaired link (``edge``: the far router is an
    edge router of the near one): the sender's outcomes and the receiver's
    figures."""
    ns.impair(how)
    bins = build()
    delay_s = how.delay_ms / 1000
    if edge:  # the far router dials the near one, through a relay on the veth's near side
        listen_host = "127.0.0.1" if delay_s else ns.near
        relay = DelayRelay((listen_host, FAR_PORT), delay_s, host=ns.near) if delay_s else None
    else:  # the near router dials the far one, through a relay on this side's loopback
        listen_host = ns.far
        relay = DelayRelay((ns.far, FAR_PORT), delay_s) if delay_s else None
    with relay if relay is not None else contextlib.nullcontext():
        dial = (relay.host, relay.port) if relay is not None \
            else (ns.near if edge else ns.far, FAR_PORT)
        near_conf, far_conf = _confs(flavour, edge, dial, listen_host)
        inside = attrs.evolve(flavour, command=tuple(ns.command(flavour.command)))
        near = RouterProcess(near_conf, name="near", flavour=flavour)
        try:
            far = RouterProcess(far_conf, name="far", flavour=inside)
            try:
                recv = start(ns.command([str(bins["hop-recv"]), far.url, "lossy",
                                         "--count", str(count), "--timeout", str(timeout)]))
                time.sleep(1.0)  # the consumer's address reaches the near router
                sent = finish(start([str(bins["hop-send"]), near.url, "lossy", "--count",
                                     str(count), "--timeout", str(timeout)]), timeout + 30)
                received = finish(recv, 60)
            finally:
                far.stop()
        finally:
            near.stop()
    return {"link": how.name, "router": flavour.name, "edge": edge, "sent": sent["sent"],
            "accepted": sent["accepted"], "released": sent["released"],
            "rejected": sent["rejected"], "modified": sent["modified"],
            "received": received["received"], "rate": sent["rate"],
            "latency_us": received["latency_us"]}


LINKS = (Impairment("clean"), Impairment("loss 1%", loss=0.01),
         Impairment("loss 5%", loss=0.05), Impairment("delay 100 ms", delay_ms=100.0),
         Impairment("loss 1%, 100 ms, 100 Mbit/s", loss=0.01, delay_ms=100.0, rate_mbit=100.0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lossy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--qdrouterd", default="", metavar="PATH",
                        help="the same flows on this qdrouterd too")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    why = unavailable()
    if why is not None:
        print(f"bench.lossy: {why}", file=sys.stderr)
        return 2
    flavours = [HOP] + ([qdrouterd(args.qdrouterd)] if args.qdrouterd else [])
    rows = []
    with Namespace.made() as ns:
        for how in LINKS:
            for flavour in flavours:
                row = flow(ns, flavour, how, args.count)
                rows.append(row)
                lat = row["latency_us"]
                lost = row["sent"] - row["received"]
                print(f"{how.name:<30} {flavour.name:<10} {row['rate']:>9.0f} msg/s  "
                      f"p50 {lat['p50'] / 1000:8.1f} ms  p99 {lat['p99'] / 1000:8.1f} ms  "
                      f"accepted {row['accepted']}/{row['sent']}, lost {lost}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "lossy.json").write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if r["accepted"] != r["sent"] or r["received"] != r["sent"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
