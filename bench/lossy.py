"""Two routers joined over a link that loses packets, or is slow, or both
(docs/reliability.md#lossy-and-slow-links).

The far router runs in a network namespace of its own; its clients'
listener is on the namespace's loopback.  The two routers are joined one
of two ways:

- a veth pair, for a link that only drops packets or is only narrow:
  ``loss``, a share of the packets that cross it each way dropped at random
  (nftables' ``numgen random`` in the namespace; TCP sends them again, as
  over a lossy WAN), and ``rate``, its bandwidth in Mbit/s each way
  (``tc`` token bucket);
- the wire (bench.wire), for a link that delays packets: a pair of TUN
  devices with a process between them that does to each packet what
  Linux's ``netem`` would (this kernel has no ``netem`` qdisc): ``loss``,
  ``delay`` each way, ``jitter`` (each packet's delay drawn within
  +/- that, so packets overtake each other), ``reorder`` (a share sent at
  once, ahead of those held) and ``rate``, behind a queue of 1,000 packets.

    python -m bench.lossy [--count N] [--qdrouterd PATH] [--out DIR]

runs an at-least-once flow (the load generator's hop-send on the near
router to hop-recv on the far one, 100 B unsettled) over each link and
prints throughput, latency and every delivery's outcome for each router,
and for the wire what it did to the packets.  Needs root, ``ip`` and
``nft`` (Debian's iproute2 and nftables) and ``/dev/net/tun``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import attrs

from bench.build import build
from bench.processes import HOP, Flavour, RouterProcess, finish, qdrouterd, start
from bench.wire import open_tun

#: Inter-router port of the far router, inside its namespace.
FAR_PORT = 25672


@dataclass(frozen=True)
class Impairment:
    """What a link does to what crosses it."""

    name: str
    loss: float = 0.0  # share of packets dropped each way, 0 to 1
    rate_mbit: float | None = None
    delay_ms: float = 0.0  # each way
    jitter_ms: float = 0.0  # each packet's delay within +/- this
    reorder: float = 0.0  # share of packets sent at once, ahead of those delayed

    @property
    def per_packet(self) -> bool:
        """Whether the link must hold packets (the wire), not only drop them (the veth)."""
        return bool(self.delay_ms or self.jitter_ms or self.reorder)


def unavailable() -> str | None:
    """Why a namespace with a lossy veth cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, nftables)"
    for tool in ("ip", "nft", "tc"):
        if shutil.which(tool) is None:
            return f"no {tool} (apt-get install iproute2 nftables)"
    try:
        os.close(open_tun(f"hwprobe{os.getpid()}"[:15]))
    except OSError as exc:
        return f"cannot make a TUN device (/dev/net/tun): {exc}"
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
        """Loss and rate on the veth, replacing what was there (the wire does the rest)."""
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
class Wire:
    """bench.wire between this namespace and ``ns``, doing ``how`` to each
    packet: ``near`` is this side's address on it, ``far`` the namespace's;
    ``counts`` what it did, once it has stopped."""

    near: str
    far: str
    counts: dict[str, Any]

    @classmethod
    @contextlib.contextmanager
    def made(cls, ns: Namespace, how: Impairment) -> Iterator[Wire]:
        net = f"10.232.{os.getpid() % 250}"
        wire = cls(near=f"{net}.1", far=f"{net}.2", counts={})
        argv = [sys.executable, "-m", "bench.wire", "--netns", ns.name, "--near", wire.near,
                "--far", wire.far, "--loss", str(how.loss), "--delay-ms", str(how.delay_ms),
                "--jitter-ms", str(how.jitter_ms), "--reorder", str(how.reorder)]
        if how.rate_mbit:
            argv += ["--rate-mbit", str(how.rate_mbit)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        try:
            if proc.stdout.readline().strip() != "ready":
                proc.wait(10)
                why = proc.stderr.read().strip() if proc.stderr else ""
                raise RuntimeError(f"bench.wire did not start: {why}")
            yield wire
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=10)
            if out.strip():
                wire.counts.update(json.loads(out.strip().splitlines()[-1]))


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
    ns.impair(Impairment("clean") if how.per_packet else how)
    bins = build()
    with Wire.made(ns, how) if how.per_packet else contextlib.nullcontext() as wire:
        near_host, far_host = (wire.near, wire.far) if wire is not None else (ns.near, ns.far)
        if edge:  # the far router dials the near one
            listen_host, dial = near_host, (near_host, FAR_PORT)
        else:
            listen_host, dial = far_host, (far_host, FAR_PORT)
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
            "latency_us": received["latency_us"],
            "wire": wire.counts if wire is not None else None}


LINKS = (Impairment("clean"), Impairment("loss 1%", loss=0.01),
         Impairment("loss 5%", loss=0.05), Impairment("delay 100 ms", delay_ms=100.0),
         Impairment("loss 1%, 100 ms, 100 Mbit/s", loss=0.01, delay_ms=100.0, rate_mbit=100.0),
         Impairment("20 ms +/- 10 ms jitter", delay_ms=20.0, jitter_ms=10.0),
         Impairment("20 ms, 25% reordered", delay_ms=20.0, reorder=0.25),
         Impairment("loss 5%, 50 +/- 20 ms, 10% reordered", loss=0.05, delay_ms=50.0,
                    jitter_ms=20.0, reorder=0.10))


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
                print(f"{how.name:<38} {flavour.name:<10} {row['rate']:>9.0f} msg/s  "
                      f"p50 {lat['p50'] / 1000:8.1f} ms  p99 {lat['p99'] / 1000:8.1f} ms  "
                      f"accepted {row['accepted']}/{row['sent']}, lost {lost}", flush=True)
                if row["wire"]:
                    print(" " * 39 + "wire, each way: " + "; ".join(
                        ", ".join(f"{k} {v}" for k, v in row["wire"][way].items())
                        for way in ("out", "back")), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "lossy.json").write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if r["accepted"] != r["sent"] or r["received"] != r["sent"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
