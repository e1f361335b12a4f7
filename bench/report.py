"""Medians across rounds, the printed table, results.json and results.png."""

from __future__ import annotations

import json
import os
import platform
import statistics
from pathlib import Path
from typing import Any

Record = dict[str, Any]


def calibration() -> dict[str, float]:
    """How fast this machine runs Python right now: a pure-Python loop and a raw
    proton C call (reference/python-data-plane.md measured 53 ns for the
    latter on a quiet machine of this kind).  Shared machines vary by 2-4x;
    these numbers say which regime a run was in."""
    import timeit

    from cproton_ffi import lib

    collector = lib.pn_collector()
    peek = lib.pn_collector_peek
    loop = min(timeit.repeat("sum(range(1000))", number=2000, repeat=5)) / 2000
    call = min(timeit.repeat(lambda: peek(collector), number=200_000, repeat=5)) / 200_000
    lib.pn_collector_free(collector)
    return {"python_loop_1000_us": loop * 1e6, "proton_c_call_ns": call * 1e9}


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0]
    return {"cpus": os.cpu_count(), "cpu_model": model, "python": platform.python_version(),
            "kernel": platform.release(), "load_average_1min": load, **calibration()}


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarise(runs: dict[str, list[Record]]) -> dict[str, Record]:
    """The median of every numeric measurement of each scenario."""
    summary: dict[str, Record] = {}
    for name, records in runs.items():
        keys = {k for r in records for k, v in r.items() if isinstance(v, (int, float))}
        med: Record = {k: _median([float(r[k]) for r in records if k in r]) for k in keys}
        lat = [r["latency_us"] for r in records if isinstance(r.get("latency_us"), dict)]
        if lat:
            med["latency_us"] = {p: _median([float(x[p]) for x in lat]) for p in lat[0]}
        med["rounds"] = len(records)
        summary[name] = med
    return summary


def table(summary: dict[str, Record], descriptions: dict[str, str]) -> str:
    direct = summary.get("direct-100", {}).get("rate")
    rows = [("scenario", "msg/s", "% direct", "router CPU s/100k", "us/msg",
             "p50 us", "p99 us", "p99.9 us", "other")]
    for name, s in summary.items():
        rate = s.get("rate")
        lat = s.get("latency_us", {})
        other = []
        if "rss_mb" in s:
            other.append(f"RSS {s['rss_mb']:.0f} MB")
        if "kb_per_connection" in s:
            other.append(f"{s['kb_per_connection']:.0f} KB/conn")
        if "startup_s" in s:
            other.append(f"start-up {s['startup_s']:.2f} s")
        if "convergence_s" in s:
            other.append(f"{s['routers']:.0f} routers converge in {s['convergence_s']:.1f} s")
        if s.get("dropped"):
            other.append(f"{s['dropped']:.0f} dropped")
        rows.append((
            name,
            f"{rate:,.0f}" if rate else "",
            f"{100 * rate / direct:.0f}%" if rate and direct else "",
            f"{s['router_cpu_s_per_100k']:.2f}" if "router_cpu_s_per_100k" in s else "",
            f"{s['router_us_per_msg']:.2f}" if "router_us_per_msg" in s else "",
            f"{lat['p50']:.0f}" if lat else "",
            f"{lat['p99']:.0f}" if lat else "",
            f"{lat['p999']:.0f}" if lat else "",
            ", ".join(other),
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.extend(f"{name}: {descriptions[name]}" for name in summary if name in descriptions)
    lines.extend(comparisons(summary))
    return "\n".join(lines)


def write(out: Path, runs: dict[str, list[Record]], summary: dict[str, Record],
          settings: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {"machine": machine(), "settings": settings, "median": summary, "runs": runs}
    (out / "results.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    plot(out / "results.png", summary)


def plot(path: Path, summary: dict[str, Record]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = [(n, s["rate"]) for n, s in summary.items()
             if "rate" in s and "latency" not in n]
    lats = [(n, s["latency_us"]) for n, s in summary.items()
            if n.startswith("latency") and "latency_us" in s]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    ax = axes[0]
    if rates:
        ax.barh([n for n, _ in rates][::-1], [r for _, r in rates][::-1], color="#3b7dd8")
    ax.set_xlabel("messages per second (median)")
    ax.set_title("Throughput")
    ax = axes[1]
    if lats:
        width = 0.25
        for i, p in enumerate(("p50", "p99", "p999")):
            ax.bar([x + i * width for x in range(len(lats))], [lat[p] for _, lat in lats],
                   width, label=p)
        ax.set_xticks([x + width for x in range(len(lats))], [n for n, _ in lats], rotation=15)
        ax.legend()
    ax.set_ylabel("microseconds")
    ax.set_title("Latency at a fixed rate")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def comparisons(summary: dict[str, Record]) -> list[str]:
    """Hop's rate and p99 as a share of another router's, where both ran
    (``<flavour>:<name>`` beside ``<name>``)."""
    lines = []
    for name, other in summary.items():
        flavour, sep, base = name.partition(":")
        mine = summary.get(base)
        if not sep or mine is None:
            continue
        parts = []
        if mine.get("rate") and other.get("rate") and "latency" not in base:
            parts.append(f"rate {100 * mine['rate'] / other['rate']:.0f}% of {flavour}'s")
        p99, their_p99 = mine.get("latency_us", {}).get("p99"), \
            other.get("latency_us", {}).get("p99")
        if p99 and their_p99:
            parts.append(f"p99 {p99 / their_p99:.1f}x {flavour}'s")
        if parts:
            lines.append(f"{base}: Hop's " + ", ".join(parts))
    if lines:
        lines.insert(0, "")
    return lines
