"""A link to a network namespace that does to each packet what a long,
busy WAN path does: drops some, holds each for a delay that varies
(jitter), lets some overtake those held (reordering), and serialises them
at a bandwidth behind a queue of bounded length
(docs/reliability.md#lossy-and-slow-links).

It is the model of Linux's ``netem`` queueing discipline, carried out in
user space because this kernel has none: two TUN devices, one in this
namespace and one moved into the other, and this process between them,
reading each IP packet that one side routes to the other and writing it to
the other's device when its time comes.  TCP on both ends sees a real
packet path: its retransmissions, duplicate acknowledgements and fast
recovery are the kernel's own.

    python -m bench.wire --netns NAME --near 10.232.1.1 --far 10.232.1.2 \\
        [--loss SHARE] [--delay-ms MS] [--jitter-ms MS] [--reorder SHARE] \\
        [--rate-mbit MBIT] [--limit PACKETS]

prints ``ready`` once both devices are up and, when sent SIGTERM, one line
of JSON: what each direction carried, dropped and reordered.  Needs root.

What a packet meets, in order (each direction on its own):

1. loss: dropped with probability ``loss``;
2. the queue: dropped when ``limit`` packets are already held (netem's
   default limit is 1,000);
3. the line: at ``rate_mbit`` a packet leaves the line when the one before
   it has and its own bits have gone out;
4. delay: then held for ``delay`` plus a uniform draw within
   ``+/- jitter`` (netem's default distribution), so that a packet can
   overtake one sent before it when the jitter exceeds the gap between
   them; or, with probability ``reorder``, sent at once, ahead of the
   packets held (netem's ``reorder``).
"""

from __future__ import annotations

import argparse
import fcntl
import heapq
import json
import os
import random
import selectors
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
MTU = 1500


@dataclass(frozen=True)
class Shaping:
    """What one direction of the link does to each packet."""

    loss: float = 0.0  # share dropped, 0 to 1
    delay_s: float = 0.0
    jitter_s: float = 0.0  # the delay drawn uniformly within +/- this
    reorder: float = 0.0  # share sent at once, ahead of those held
    rate_bps: float | None = None  # the line's bandwidth, bits per second
    limit: int = 1000  # packets held at most


@dataclass
class Direction:
    """One direction of the link, without I/O: packets ``arrive`` and are
    taken when ``due``; the counts say what became of them."""

    shaping: Shaping
    rng: random.Random = field(default_factory=random.Random)
    carried: int = 0
    lost: int = 0  # the loss draw
    overflowed: int = 0  # the queue was full
    reordered: int = 0  # left after a packet that arrived later
    _held: list[tuple[float, int, bytes]] = field(default_factory=list)
    _seq: int = 0
    _line_free: float = 0.0
    _last_out: int = -1

    def arrive(self, packet: bytes, now: float) -> None:
        shaping = self.shaping
        if shaping.loss and self.rng.random() < shaping.loss:
            self.lost += 1
            return
        if len(self._held) >= shaping.limit:
            self.overflowed += 1
            return
        sent = now
        if shaping.rate_bps:
            sent = max(now, self._line_free) + len(packet) * 8 / shaping.rate_bps
            self._line_free = sent
        if shaping.reorder and self.rng.random() < shaping.reorder:
            due = sent
        else:
            jitter = self.rng.uniform(-shaping.jitter_s, shaping.jitter_s) \
                if shaping.jitter_s else 0.0
            due = sent + max(0.0, shaping.delay_s + jitter)
        heapq.heappush(self._held, (due, self._seq, packet))
        self._seq += 1

    def due(self, now: float) -> list[bytes]:
        """The packets whose time has come, in the order they leave."""
        out = []
        held = self._held
        while held and held[0][0] <= now:
            _, seq, packet = heapq.heappop(held)
            if seq < self._last_out:
                self.reordered += 1
            else:
                self._last_out = seq
            out.append(packet)
        self.carried += len(out)
        return out

    def next_due(self) -> float | None:
        return self._held[0][0] if self._held else None

    def counts(self) -> dict[str, int]:
        return {"carried": self.carried, "lost": self.lost, "overflowed": self.overflowed,
                "reordered": self.reordered, "held": len(self._held)}


def open_tun(name: str) -> int:
    """A TUN device (IP packets, no header) named ``name``, and its descriptor."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


def _ip(*argv: str) -> None:
    done = subprocess.run(["ip", *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(argv)}: {done.stderr.strip()}")


def carry(near_fd: int, far_fd: int, out: Direction, back: Direction,
          running: list[bool]) -> None:
    """Pass packets between the devices, ``out`` from near to far and ``back``
    the other way, while ``running[0]``."""
    selector = selectors.DefaultSelector()
    selector.register(near_fd, selectors.EVENT_READ, (out, far_fd))
    selector.register(far_fd, selectors.EVENT_READ, (back, near_fd))
    pairs = ((out, far_fd), (back, near_fd))
    while running[0]:
        now = time.monotonic()
        soonest = 0.5
        for direction, sink in pairs:
            for packet in direction.due(now):
                try:
                    os.write(sink, packet)
                except OSError:  # the device's own queue is full: dropped, as a NIC would
                    direction.overflowed += 1
            nxt = direction.next_due()
            if nxt is not None:
                soonest = min(soonest, nxt - now)
        for key, _ in selector.select(max(0.0, soonest)):
            direction, _sink = key.data
            while True:
                try:
                    packet = os.read(key.fd, MTU + 64)
                except (BlockingIOError, InterruptedError):
                    break
                direction.arrive(packet, time.monotonic())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wire", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--netns", required=True)
    parser.add_argument("--near", required=True, help="this side's address")
    parser.add_argument("--far", required=True, help="the namespace's address")
    parser.add_argument("--loss", type=float, default=0.0)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--reorder", type=float, default=0.0)
    parser.add_argument("--rate-mbit", type=float, default=None)
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    shaping = Shaping(loss=args.loss, delay_s=args.delay_ms / 1000,
                      jitter_s=args.jitter_ms / 1000, reorder=args.reorder,
                      rate_bps=args.rate_mbit * 1e6 if args.rate_mbit else None,
                      limit=args.limit)
    rng = random.Random(args.seed)
    out, back = Direction(shaping, random.Random(rng.random())), \
        Direction(shaping, random.Random(rng.random()))
    pid = os.getpid()
    near_dev, far_dev = f"hw{pid}a"[:15], f"hw{pid}b"[:15]
    near_fd, far_fd = open_tun(near_dev), open_tun(far_dev)
    running = [True]

    def stop(*_: object) -> None:
        running[0] = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        _ip("link", "set", far_dev, "netns", args.netns)
        _ip("addr", "add", args.near, "peer", args.far, "dev", near_dev)
        _ip("link", "set", near_dev, "mtu", str(MTU), "up")
        inside = ("-n", args.netns)
        _ip(*inside, "addr", "add", args.far, "peer", args.near, "dev", far_dev)
        _ip(*inside, "link", "set", far_dev, "mtu", str(MTU), "up")
    except RuntimeError as exc:
        print(f"bench.wire: {exc}", file=sys.stderr)
        return 1
    print("ready", flush=True)
    carry(near_fd, far_fd, out, back, running)
    os.close(near_fd)
    os.close(far_fd)
    print(json.dumps({"out": out.counts(), "back": back.counts()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
