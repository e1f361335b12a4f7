"""Medians across rounds, the printed table, results.json, results.png
(throughput and latency) and results-scale.png (the scale scenarios)."""

from __future__ import annotations

import json
import os
import platform
import statistics
from pathlib import Path
from typing import Any

Record = dict[str, Any]

# The routing protocol's control messages, in the order the figures show them.
CONTROL_KINDS = ("HELLO", "RA", "LSU", "LSR", "MAU", "MAR")


def calibration() -> dict[str, float]:
    """How fast this machine runs Python right now: a pure-Python loop and a raw
    proton C call (docs/performance.md#the-python-data-plane: 53 ns for the
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
        med: Record = {k: _median([float(r[k]) for r in records
                                   if isinstance(r.get(k), (int, float))]) for k in keys}
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
        if "connections" in s:
            other.append(f"{s['connections']:,.0f} connections")
        if "router_us_per_connection" in s:
            other.append(f"router {s['router_us_per_connection']:.0f} us CPU per connection")
        if "addresses" in s:
            other.append(f"{s['addresses']:,.0f} addresses")
        if "rss_mb" in s:
            other.append(f"RSS {s['rss_mb']:.0f} MB")
        if "kb_per_connection" in s:
            other.append(f"{s['kb_per_connection']:.1f} kB/conn")
        if "kb_per_stalled_connection" in s:
            other.append(f"{s['kb_per_stalled_connection']:.1f} kB/conn holding "
                         f"{s['held_deliveries'] / s['connections']:.0f} deliveries "
                         f"(placed in {s.get('placed_s', float('nan')):.1f} s), others at "
                         f"{s['others_rate']:,.0f} msg/s")
        if "heal_s_max" in s:
            other.append(f"traffic again {s['inter_router_cut_heal_s']:.1f} s after an "
                         f"inter-router link's heal ({s['inter_router_blackhole_heal_s']:.1f} s "
                         f"silent), {s['edge_cut_heal_s']:.1f} s after an uplink's "
                         f"({s['edge_blackhole_heal_s']:.1f} s silent); {s['lost']:.0f} lost")
        if "kb_per_slow_connection" in s:
            http = (f" ({s['kb_per_slow_http_connection']:.1f} kB on HTTP)"
                    if "kb_per_slow_http_connection" in s else "")
            other.append(f"{s['kb_per_slow_connection']:.1f} kB per AMQP connection held "
                         f"mid-handshake{http}, {s['open_after_limit']:.0f} open "
                         f"{s['limit_s'] + 15:.0f} s on")
        if "crossed_share" in s:
            other.append(f"{100 * s['crossed_share']:.0f} % of messages crossed workers")
        if "kb_per_address" in s:
            other.append(f"{s['kb_per_address']:.2f} kB/address")
        if "startup_s" in s:
            other.append(f"start-up {s['startup_s']:.2f} s")
        if "ready_s" in s:
            other.append(f"ready {s['ready_s']:.2f} s")
        if "convergence_s" in s:
            other.append(f"{s['routers']:.0f} routers converge in {s['convergence_s']:.1f} s")
        if "convergence_sim_s" in s:
            kinds = ", ".join(f"{k} {s['msgs_' + k]:,.0f}" for k in CONTROL_KINDS)
            other.append(f"{s['routers']:.0f} routers, {s['links']:.0f} links converge in "
                         f"{s['convergence_sim_s']:.1f} simulated s ({s['wall_s']:.1f} s wall, "
                         f"{s['cpu_s']:.1f} s CPU); {s['control_messages']:,.0f} control "
                         f"messages: {kinds}")
        if "interior_kb_per_edge" in s:
            other.append(f"{s['edges']:.0f} edges: {s['interior_kb_per_edge']:.0f} kB each at "
                         f"the interior, a new edge's address reachable from every edge in "
                         f"{s['every_edge_reached_s']:.2f} s")
        if "core_kb_per_edge" in s:
            other.append(f"{s['edges']:,.0f} simulated edges: the interior's core holds "
                         f"{s['core_kb_per_edge']:.1f} kB each; a new edge's consumer reaches "
                         f"every edge's producer with {s['reach_messages']:,.0f} tracking "
                         f"messages in {s['reach_cpu_ms']:.1f} ms of CPU; "
                         f"{s['updates_per_s']:,.0f} address updates/s")
        if "interior_us_per_msg" in s:
            other.append(f"interior {s['interior_us_per_msg']:.2f} us/msg")
        if "rss_growth_mb" in s:
            other.append(f"{s['size_mib']:.0f} MiB messages at {s['mib_per_s']:.0f} MiB/s, "
                         f"RSS +{s['rss_growth_mb']:.1f} MB at most")
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
          settings: dict[str, Any]) -> list[Path]:
    """Write the results; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    doc = {"machine": machine(), "settings": settings, "median": summary, "runs": runs}
    written = [out / "results.json"]
    written[0].write_text(json.dumps(doc, indent=2, default=str) + "\n")
    if plot(out / "results.png", summary):
        written.append(out / "results.png")
    else:
        (out / "results.png").unlink(missing_ok=True)  # not an earlier run's figure
    if plot_scale(out / "results-scale.png", summary):
        written.append(out / "results-scale.png")
    return written


def _split(name: str) -> tuple[str, str]:
    """``"qdrouterd:router-100"`` -> ``("qdrouterd", "router-100")``; Hop's are ``"hop"``."""
    flavour, _, base = name.rpartition(":")
    return (flavour or "hop"), base


def _grouped(summary: dict[str, Record],
             pick: Any) -> tuple[list[str], dict[str, dict[str, float]]]:
    """Scenarios in run order, and for each program its value of ``pick(record)``
    (None: not plotted)."""
    bases: list[str] = []
    values: dict[str, dict[str, float]] = {}
    for name, s in summary.items():
        value = pick(name, s)
        if value is None:
            continue
        flavour, base = _split(name)
        if base not in bases:
            bases.append(base)
        values.setdefault(flavour, {})[base] = value
    return bases, values


def plot(path: Path, summary: dict[str, Record]) -> list[str]:
    """Throughput and p99 latency, each scenario's programs side by side; a
    panel only for what ran.  Returns the panels drawn (none: no file)."""
    rate_bases, rates = _grouped(summary, lambda n, s: s.get("rate") if "rate" in s and
                                 "latency" not in n and "mib_per_s" not in s else None)
    lat_bases, p99s = _grouped(summary, lambda n, s: s["latency_us"]["p99"]
                               if _split(n)[1].startswith("latency") and "latency_us" in s
                               else None)
    panels = [title for title, bases in (("Throughput", rate_bases),
                                         ("Latency at a fixed rate", lat_bases)) if bases]
    if not panels:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    flavours = sorted(set(rates) | set(p99s), key=lambda f: (f != "hop", f))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.8), squeeze=False)
    height = 0.8 / max(1, len(flavours))
    if rate_bases:
        ax = axes[0][0]
        for i, flavour in enumerate(flavours):
            ys = [y - i * height for y in range(len(rate_bases))][::-1]
            ax.barh([y for y, b in zip(ys, rate_bases, strict=True)
                     if b in rates.get(flavour, {})],
                    [rates[flavour][b] for b in rate_bases if b in rates.get(flavour, {})],
                    height, label=flavour)
        ax.set_yticks([y - 0.4 + height / 2 for y in range(len(rate_bases))][::-1], rate_bases)
        ax.set_xscale("log")
        ax.set_xlabel("messages per second (median, log scale)")
        ax.set_title(panels[0])
        ax.legend()
    if lat_bases:
        ax = axes[0][-1]
        for i, flavour in enumerate(flavours):
            xs = [x + i * height for x, b in enumerate(lat_bases) if b in p99s.get(flavour, {})]
            ax.bar(xs, [p99s[flavour][b] for b in lat_bases if b in p99s.get(flavour, {})],
                   height, label=flavour)
        ax.set_xticks([x + 0.4 - height / 2 for x in range(len(lat_bases))], lat_bases,
                      rotation=15)
        ax.set_ylabel("p99, microseconds")
        ax.set_title(panels[-1])
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return panels


# The scale figures, one panel each: (title, measurement, axis label, log axis).
_SCALE_PANELS = (
    ("Idle AMQP connections: memory each", "kb_per_connection", "kB per connection", False),
    ("Stalled consumers: memory per connection", "kb_per_stalled_connection",
     "kB per connection", False),
    ("Configured addresses: start-up", "ready_s", "seconds until an attach is answered",
     True),
    ("Resident memory", "rss_mb", "MB", True),
    ("Convergence of real routers", "convergence_s", "seconds from the last start", False),
    ("Simulated convergence", "convergence_sim_s", "simulated seconds", False),
    ("100 MiB messages: router memory growth", "rss_growth_mb", "MB above idle", True),
    ("Edge routers: interior memory each", "interior_kb_per_edge", "kB per edge", False),
    ("Edge routers: a new address reachable everywhere", "every_edge_reached_s", "seconds",
     False),
)


def _label(name: str, s: Record) -> str:
    for key, unit in (("connections", "conns"), ("addresses", "addresses"),
                      ("routers", "routers"), ("edges", "edges")):
        if key in s:
            return f"{name} ({s[key]:,.0f} {unit})"
    return name


def _log_axis(ax: Any, values: list[float]) -> None:
    """A log x axis whose bars start well left of the smallest, so lengths compare."""
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    positive = [v for v in values if v > 0]
    if positive:
        ax.set_xlim(min(positive) / 4, max(positive) * 4)
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_scale(path: Path, summary: dict[str, Record]) -> bool:
    """Bar charts of the scale scenarios that ran, Hop's beside qdrouterd's
    where both ran; the simulated runs' control messages by kind.  Returns
    whether there was anything to plot."""
    panels = [(title, key, unit, log, [(n, s) for n, s in summary.items() if key in s])
              for title, key, unit, log in _SCALE_PANELS]
    panels = [p for p in panels if p[4]]
    sims = [(n, s) for n, s in summary.items() if "msgs_RA" in s]
    count = len(panels) + (1 if sims else 0)
    if not count:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(count, 3)
    rows = (count + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(6.5 * columns, 3.6 * rows), squeeze=False)
    cells = [ax for row in axes for ax in row]
    for ax, (title, key, unit, log, entries) in zip(cells, panels, strict=False):
        labels = [_label(n, s) for n, s in entries][::-1]
        values = [float(s[key]) for _, s in entries][::-1]
        colours = ["#d8833b" if ":" in n else "#3b7dd8" for n, _ in entries][::-1]
        ax.barh(labels, values, color=colours)
        for y, value in enumerate(values):
            ax.annotate(f" {value:,.3g}", (value, y), va="center", fontsize=8)
        if log:
            _log_axis(ax, values)
        ax.set_xlabel(unit)
        ax.set_title(title)
        ax.tick_params(axis="y", labelsize=8)
    if sims:
        ax = cells[len(panels)]
        height = 0.8 / len(sims)
        counts = []
        for i, (name, s) in enumerate(sims):
            values = [max(float(s["msgs_" + k]), 1.0) for k in CONTROL_KINDS]
            counts += values
            ax.barh([y + i * height for y in range(len(CONTROL_KINDS))], values, height,
                    label=_label(name, s))
        ax.set_yticks([y + height * (len(sims) - 1) / 2 for y in range(len(CONTROL_KINDS))],
                      CONTROL_KINDS)
        ax.invert_yaxis()
        _log_axis(ax, counts)
        ax.set_xlabel("control messages sent until converged")
        ax.set_title("Simulated convergence: control messages")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    for ax in cells[count:]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# Scale measurements compared side by side: (key, what, unit, format).
_SCALE_COMPARED = (
    ("kb_per_connection", "memory per idle connection", "kB", ".1f"),
    ("kb_per_stalled_connection", "memory per connection with a stalled consumer", "kB",
     ".1f"),
    ("kb_per_slow_connection", "memory per AMQP connection held mid-handshake", "kB",
     ".1f"),
    ("heal_s_max", "slowest return of traffic after a cut link's heal", "s", ".2f"),
    ("kb_per_address", "memory per configured address", "kB", ".2f"),
    ("startup_s", "start-up", "s", ".2f"),
    ("ready_s", "ready", "s", ".2f"),
    ("rss_mb", "RSS", "MB", ".0f"),
    ("convergence_s", "convergence", "s", ".1f"),
    ("rss_growth_mb", "memory growth with large messages", "MB", ".1f"),
    ("mib_per_s", "large-message throughput", "MiB/s", ".0f"),
    ("interior_kb_per_edge", "interior memory per edge", "kB", ".0f"),
    ("every_edge_reached_s", "a new edge's address reachable from every edge", "s", ".2f"),
)


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
        for key, what, unit, fmt in _SCALE_COMPARED:
            if mine.get(key) and other.get(key):
                parts.append(f"{what} {mine[key]:{fmt}} {unit} against {flavour}'s "
                             f"{other[key]:{fmt}} {unit} ({mine[key] / other[key]:.2f}x)")
        if parts:
            lines.append(f"{base}: Hop's " + ", ".join(parts))
    if lines:
        lines.insert(0, "")
    return lines
