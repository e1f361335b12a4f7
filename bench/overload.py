"""A producer faster than its consumer for minutes, and the router's memory
meanwhile (docs/reliability.md#overload).

Two phases, each on a router of its own with its default ``linkCapacity``
(250):

- ``unsettled``: the load generator's hop-send offers unsettled 100 B
  messages at ``--producer-rate`` to one address whose only consumer (a
  proton client in this process) takes ``--rate`` a second, granting credit
  as it goes.  The router gives the producer credit only as its deliveries
  are settled, so the producer runs at the consumer's pace and the router
  holds no more than a window.
- ``presettled``: the same with pre-settled messages: the router settles
  each as it arrives, so the producer runs at its own rate, and the
  consumer's queue is shed once it holds ``linkCapacity`` copies
  (docs/routing.md#sending-to-consumers).

The router's resident memory is sampled every second; after the first
fifth (the warm-up) a straight line is fitted to it (``bench.fit``).

    python -m bench.overload [--minutes M] [--rate R] [--producer-rate P]
                             [--qdrouterd PATH] [--out DIR]

``--minutes`` is each phase's length; ``--qdrouterd`` runs both phases on
that qdrouterd too.  Writes ``overload.json`` and ``overload.png`` to
``--out`` and exits 1 when a message was lost unsettled or a router's
memory grew more than ``GROWTH_LIMIT_MB`` after the warm-up.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from proton.handlers import MessagingHandler
from proton.reactor import Container

from bench.build import build
from bench.fit import slope
from bench.idle import wait_ready
from bench.processes import HOP, Flavour, RouterProcess, finish, qdrouterd, router_conf, start

ADDRESS = "overload"
#: What a router's memory may grow after the warm-up, either phase.
GROWTH_LIMIT_MB = 5.0


class SlowConsumer(MessagingHandler):  # type: ignore[misc]
    """Receives from ``address`` granting ``rate`` credits a second (a
    hundredth every 10 ms), accepting each unsettled message; ``drain``
    lifts the limit, ``stop`` closes."""

    def __init__(self, url: str, address: str, rate: int) -> None:
        super().__init__(prefetch=0)
        self.url, self.address, self.rate = url, address, rate
        self.received = 0
        self.unlimited = False
        self.attached = threading.Event()
        self.stopping = threading.Event()

    def on_start(self, event: Any) -> None:
        self.container = event.container
        self.receiver = event.container.create_receiver(event.container.connect(self.url),
                                                        self.address)
        event.container.schedule(0.01, self)

    def on_link_opened(self, event: Any) -> None:
        self.attached.set()

    def on_timer_task(self, event: Any) -> None:
        if self.stopping.is_set():
            self.receiver.connection.close()
            return
        want = 5000 if self.unlimited else max(1, self.rate // 100)
        if self.receiver.credit < want:
            self.receiver.flow(want - self.receiver.credit)
        self.container.schedule(0.01, self)

    def on_message(self, event: Any) -> None:
        self.received += 1


def phase(flavour: Flavour, bins: dict[str, Path], presettled: bool, seconds: float,
          rate: int, producer_rate: int) -> dict[str, Any]:
    """One phase on a fresh router: its memory samples and counts."""
    count = int((producer_rate if presettled else rate) * seconds)
    with RouterProcess(router_conf(flavour=flavour), flavour=flavour) as router:
        wait_ready(router.ports[0])
        consumer = SlowConsumer(router.url, ADDRESS, rate)
        thread = threading.Thread(target=Container(consumer).run, daemon=True)
        thread.start()
        if not consumer.attached.wait(30):
            raise RuntimeError("the consumer did not attach")
        time.sleep(0.5)
        base = router.rss()
        args = [str(bins["hop-send"]), router.url, ADDRESS, "--count", str(count),
                "--size", "100", "--rate", str(producer_rate),
                "--timeout", str(int(seconds * 4 + 60))]
        if presettled:
            args.append("--presettled")
        started = time.monotonic()
        producer = start(args)
        samples: list[tuple[float, float]] = []
        while producer.poll() is None:
            samples.append((time.monotonic() - started, router.rss() / 2**20))
            time.sleep(1.0)
        sent = finish(producer, 60)
        producing_s = time.monotonic() - started
        got_while_producing = consumer.received
        consumer.unlimited = True
        # What is still queued comes through, then nothing more.
        last, still = -1, time.monotonic()
        while time.monotonic() - still < 2.0:
            if consumer.received != last:
                last, still = consumer.received, time.monotonic()
            time.sleep(0.2)
        end_mb = router.rss() / 2**20
        consumer.stopping.set()
        thread.join(10)
        if router.proc.poll() is not None:
            raise RuntimeError(f"{flavour.name} exited under overload")
    warm = [p for p in samples if p[0] >= producing_s / 5]
    fit = slope(warm)
    return {"router": flavour.name, "phase": "presettled" if presettled else "unsettled",
            "seconds": round(producing_s, 1), "sent": count,
            "accepted": None if presettled else sent.get("accepted"),
            "received": consumer.received, "received_while_producing": got_while_producing,
            "shed": count - consumer.received if presettled else 0,
            "producer_rate": round(count / producing_s),
            "baseline_mb": round(base / 2**20, 2),
            "warm_mb": round(warm[0][1], 2) if warm else None,
            "max_mb": round(max(mb for _, mb in samples), 2),
            "end_mb": round(end_mb, 2),
            "growth_after_warmup_mb": round(max(mb for _, mb in warm) - warm[0][1], 2)
            if warm else None,
            "slope": fit.as_dict(), "samples": samples}


def _problems(row: dict[str, Any]) -> list[str]:
    found = []
    name = f"{row['router']} {row['phase']}"
    if row["phase"] == "unsettled" and not (row["accepted"] == row["received"] == row["sent"]):
        found.append(f"{name}: sent {row['sent']}, accepted {row['accepted']}, "
                     f"received {row['received']}")
    growth = row["growth_after_warmup_mb"]
    if growth is not None and growth > GROWTH_LIMIT_MB:
        found.append(f"{name}: memory grew {growth} MB after the warm-up")
    return found


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, which in zip(axes, ("unsettled", "presettled"), strict=True):
        for row in rows:
            if row["phase"] == which:
                ax.plot([t for t, _ in row["samples"]], [mb for _, mb in row["samples"]],
                        label=row["router"])
        ax.set_title(f"{which}: producer faster than its consumer")
        ax.set_xlabel("seconds")
        ax.legend()
    axes[0].set_ylabel("router resident memory, MB")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.overload", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="each phase's length")
    parser.add_argument("--rate", type=int, default=2000,
                        help="messages a second the consumer takes")
    parser.add_argument("--producer-rate", type=int, default=20000,
                        help="messages a second the producer offers")
    parser.add_argument("--qdrouterd", default="", metavar="PATH",
                        help="both phases on this qdrouterd too")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    args = parser.parse_args(argv)
    bins = build()
    flavours = [HOP] + ([qdrouterd(args.qdrouterd)] if args.qdrouterd else [])
    rows = []
    for presettled in (False, True):
        for flavour in flavours:
            row = phase(flavour, bins, presettled, args.minutes * 60, args.rate,
                        args.producer_rate)
            rows.append(row)
            print(f"{row['phase']:<10} {row['router']:<10} {row['producer_rate']:>7} msg/s "
                  f"offered-and-taken, received {row['received']}/{row['sent']} "
                  f"(shed {row['shed']}); memory {row['baseline_mb']} -> max "
                  f"{row['max_mb']} MB, after warm-up +{row['growth_after_warmup_mb']} MB, "
                  f"{row['slope']['mb_per_hour']:+.2f} +/- "
                  f"{row['slope']['stderr_mb_per_hour']:.2f} MB/h", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "overload.json").write_text(json.dumps(rows, indent=1))
    _plot(rows, args.out / "overload.png")
    problems = [p for row in rows for p in _problems(row)]
    for p in problems:
        print(f"bench.overload: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
