"""``python -m bench``: build the load generator, run the scenarios in
interleaved rounds, print medians, write results.json, results.png and (when
scale scenarios ran) results-scale.png."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import attrs

from bench import report
from bench.build import build
from bench.processes import qdrouterd, raise_fd_limit
from bench.scenarios import SCENARIOS, SMOKE, Record, Scale, compared


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per scenario (median)")
    parser.add_argument("--only", default="",
                        help="comma-separated scenario names (the only way to run the "
                             "opt-in ones, such as qdrouterd:many-addresses)")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny runs of every scenario (CI): checks they work, not speed")
    parser.add_argument("--count", type=int, default=0, help="messages per throughput run")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--qdrouterd", default="", metavar="PATH",
                        help="also run the main scenarios on this qdrouterd, in the same "
                             "rounds (scenarios named qdrouterd:<name>)")
    args = parser.parse_args(argv)

    scale = SMOKE if args.smoke else Scale()
    if args.count:
        scale = attrs.evolve(scale, count=args.count, big_count=max(100, args.count // 10),
                             broker_count=max(100, args.count // 4))
    # Each idle connection is a socket in this process and one in the router,
    # which inherits the limit.
    raise_fd_limit(max(65536, 2 * scale.idle_connections + 1024))
    rounds = 1 if args.smoke else args.rounds
    known = SCENARIOS + (compared(qdrouterd(args.qdrouterd)) if args.qdrouterd else [])
    only = args.only.split(",") if args.only else []
    wanted = [s for s in known if s.name in only or (not only and not s.opt_in)]
    if not wanted:
        parser.error(f"no such scenario; known: {', '.join(s.name for s in known)}")
    binaries = build()
    runs: dict[str, list[Record]] = {s.name: [] for s in wanted}
    failures = 0
    for round_no in range(rounds):
        # Rotate the order each round so slow drifts of a shared machine
        # spread over every scenario instead of hitting the last ones.
        order = wanted[round_no % len(wanted):] + wanted[:round_no % len(wanted)]
        for scenario in order:
            if scenario.once and round_no:
                continue  # deterministic: one round says it all
            started = time.monotonic()
            try:
                record = scenario.run(binaries, scale)
            except Exception as exc:  # report and go on with the other scenarios
                failures += 1
                print(f"round {round_no + 1}: {scenario.name} FAILED: {exc}", file=sys.stderr)
                continue
            runs[scenario.name].append(record)
            print(f"round {round_no + 1}: {scenario.name} done in "
                  f"{time.monotonic() - started:.1f} s", file=sys.stderr)
    summary = report.summarise({k: v for k, v in runs.items() if v})
    print(report.table(summary, {s.name: s.description for s in wanted}))
    m = report.machine()
    print(f"\nmachine: {m['cpus']} CPUs {m['cpu_model']}, Python {m['python']}, load "
          f"{m['load_average_1min']:.1f}; calibration: sum(range(1000)) "
          f"{m['python_loop_1000_us']:.1f} us, one proton C call {m['proton_c_call_ns']:.0f} ns")
    written = report.write(args.out, runs, summary,
                           {"rounds": rounds, "scale": attrs.asdict(scale), "smoke": args.smoke})
    print(f"\nwrote {', '.join(str(path) for path in written)}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
