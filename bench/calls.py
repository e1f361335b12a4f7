"""Proton C calls and collector events per message on the router's hot path.

Runs ``bench.engine_cost``'s set-up (one in-process ``Engine``, a sender and
a receiver client over socket pairs, 100-byte unsettled messages) with every
proton C function the router's modules bound replaced by a counting
wrapper: module globals whose value is a ``cproton_ffi.lib`` function, and
each module's ``lib`` itself (through a proxy whose attributes are wrapped
the same way).  Only calls made inside ``Engine.run_once`` count, so the
clients' proton calls and the set-up outside the loop are left out.  The
calls the router makes through proton's Python API (``proton.*`` and
``cproton``) inside ``run_once`` are counted apart.  Each collector event
that ``Events.dispatch`` takes is counted by type, deliveries by the
router's side of their link.  The wake-ups that open the connections and
attach the links are counted too (a few hundred calls in all, which a
large N makes negligible per message).

The counting needs the pure-Python modules: calls are attributed to the
Python frame that makes them (and events to ``Events.dispatch``'s), and
mypyc-compiled functions have no frames.  ``main`` loads every project
module from its ``.py`` source even where a compiled extension sits beside
it (and the accelerator's Python functions instead of its C ones), and
``count`` refuses a compiled build.

The compiled build makes the proton calls of each accelerator function
(``router.adapter.forwarding.accel``) in one call from Python: the report also gives
the calls from Python into C that build makes per message ("crossings"),
each accelerator function counting once instead of the calls inside it.

    python -m bench.calls [N] [--window W] [--top K] [--json]
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
import types
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cproton_ffi import ffi, lib

#: The project's packages, whose modules ``prefer_sources`` loads from source.
PACKAGES = frozenset({"router", "addressing", "linkroute", "autolink", "conf"})
#: The modules that must be pure Python for the counts to be complete.
HOT_MODULES = ("router.adapter.engine", "router.adapter.events",
               "router.adapter.connections.transports", "router.adapter.forwarding.forwarder",
               "router.adapter.forwarding.outcomes", "router.adapter.forwarding.dispositions",
               "router.adapter.forwarding.sending", "router.adapter.forwarding.network")
ROUTER = "router"
PROTON_API = "proton API"
#: Where the dispatcher's events are taken off the collector.
_DISPATCH = "_next_event"
#: The accelerator's Python functions: one crossing each in the compiled build.
_ACCELERATED = ("_next_event", "_recv_whole", "_send_copy", "_update_settle", "_relay_whole",
                "_pass_outcome")
_EVENT_TYPE = "pn_event_type"


# -- loading the pure modules ------------------------------------------------------


class _SourcesFirst(importlib.abc.MetaPathFinder):
    """Finds a project module's ``.py`` file in place of a compiled extension."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] not in PACKAGES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        origin = spec.origin if spec is not None else None
        if origin is None or not origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            return spec
        source = Path(origin).with_name(fullname.rpartition(".")[2] + ".py")
        if not source.is_file():
            return spec
        return importlib.util.spec_from_file_location(fullname, source)


def prefer_sources() -> None:
    """Load the project's modules from source from now on (before they are
    imported), and the accelerator's Python functions."""
    if not any(isinstance(f, _SourcesFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourcesFirst())
    sys.modules.setdefault("router.adapter.forwarding._accel", None)  # type: ignore[arg-type]


def compiled_hot_modules() -> list[str]:
    """The hot-path modules that are loaded from a compiled extension."""
    out = []
    for name in HOT_MODULES:
        module = sys.modules.get(name)
        if module is None:
            module = importlib.import_module(name)
        if not str(module.__file__).endswith(".py"):
            out.append(name)
    return out


# -- counting ------------------------------------------------------------------------


def _is_c_function(value: object) -> bool:
    return isinstance(value, types.BuiltinFunctionType) and \
        getattr(value, "__self__", None) is lib


def _name(ptr: Any) -> str:
    return str(ffi.string(ptr).decode())


class Tally:
    """What was counted: calls by (layer, function, calling function), events
    by type, deliveries by kind; only while ``active``."""

    def __init__(self) -> None:
        self.active = False
        self.calls: Counter[tuple[str, str, str]] = Counter()
        self.events: Counter[str] = Counter()
        self.deliveries: Counter[str] = Counter()
        self.flows: Counter[str] = Counter()
        self.accelerated: Counter[str] = Counter()
        self.wakeups = 0

    def wrap(self, layer: str, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` counted under ``name``; ``pn_event_type`` from the dispatch
        loop also records the event it is asked about."""
        tally = self
        calls = self.calls

        def counted(*args: Any) -> Any:
            result = fn(*args)
            if tally.active:
                site = sys._getframe(1).f_code.co_qualname
                calls[layer, name, site] += 1
                if name == _EVENT_TYPE and site == _DISPATCH:
                    tally.event(args[0], result)
            return result

        counted.__name__ = counted.__qualname__ = name
        return counted

    def wrap_accelerated(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """An accelerator function, counted as one call from Python into C."""
        tally = self

        def counted(*args: Any) -> Any:
            if tally.active:
                tally.accelerated[name] += 1
            return fn(*args)

        counted.__name__ = counted.__qualname__ = name
        return counted

    def event(self, e: Any, t: int) -> None:
        """One event as ``Events.dispatch`` takes it, before it is handled."""
        self.events[_name(lib.pn_event_type_name(t))] += 1
        if t == lib.PN_DELIVERY:
            d = lib.pn_event_delivery(e)
            if lib.pn_link_is_receiver(lib.pn_delivery_link(d)):
                side = "router receiving (producer -> router)"
                if lib.pn_delivery_pending(d) or lib.pn_delivery_partial(d):
                    kind = "transfer"
                elif lib.pn_delivery_settled(d):
                    kind = "producer settled"
                else:
                    kind = "other update"
            else:
                side = "router sending (router -> consumer)"
                if lib.pn_delivery_settled(d):
                    kind = "consumer settled"
                elif lib.pn_delivery_remote_state(d):
                    kind = "outcome, unsettled"
                else:
                    kind = "other update"
            self.deliveries[f"{side}: {kind}"] += 1
        elif t == lib.PN_LINK_FLOW:
            sender = lib.pn_link_is_sender(lib.pn_event_link(e))
            self.flows["on router sending links" if sender else "on router receiving links"] += 1


class _LibProxy:
    """Stands for ``cproton_ffi.lib`` in one module: its functions counted."""

    def __init__(self, tally: Tally, layer: str) -> None:
        self._tally = tally
        self._layer = layer

    def __getattr__(self, name: str) -> Any:
        value = getattr(lib, name)
        if _is_c_function(value):
            value = self._tally.wrap(self._layer, name, value)
        setattr(self, name, value)  # found once; later lookups are plain attributes
        return value


def _instrumented_modules() -> list[tuple[str, types.ModuleType]]:
    out = []
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType):
            continue
        top = name.partition(".")[0]
        if top in PACKAGES:
            out.append((ROUTER, module))
        elif top in ("proton", "cproton"):
            out.append((PROTON_API, module))
    return out


@contextmanager
def instrumented(tally: Tally) -> Iterator[int]:
    """Every loaded router and proton module's C functions counted into ``tally``
    for the duration; yields how many module globals were replaced."""
    from router.adapter.forwarding import accel

    accelerated = {id(fn) for fn in accel.PYTHON.values()}
    replaced: list[tuple[types.ModuleType, str, object]] = []
    try:
        for layer, module in _instrumented_modules():
            proxy: _LibProxy | None = None
            for name, value in list(vars(module).items()):
                if value is lib:
                    proxy = proxy or _LibProxy(tally, layer)
                    new: object = proxy
                elif _is_c_function(value):
                    new = tally.wrap(layer, name, value)
                elif id(value) in accelerated and not name.startswith("_") \
                        and module is not accel:
                    new = tally.wrap_accelerated(name, value)
                else:
                    continue
                replaced.append((module, name, value))
                setattr(module, name, new)
        yield len(replaced)
    finally:
        for module, name, value in reversed(replaced):
            setattr(module, name, value)


@contextmanager
def counting_run_once(tally: Tally, allocations: Switch | None = None) -> Iterator[None]:
    """``Engine.run_once`` switches the tally (and ``allocations``) on for its
    duration."""
    from router.adapter.engine import Engine

    original = Engine.__dict__["run_once"]

    def run_once(self: Engine, timeout: float) -> None:
        tally.wakeups += 1
        tally.active = True
        if allocations is not None:
            allocations.on()
        try:
            original(self, timeout)
        finally:
            tally.active = False
            if allocations is not None:
                allocations.off()

    Engine.run_once = run_once  # type: ignore[method-assign]
    try:
        yield
    finally:
        Engine.run_once = original  # type: ignore[method-assign]


# -- the run --------------------------------------------------------------------------


class Switch(Protocol):
    """A counter switched on while the router runs (``bench.allocations``)."""

    def on(self) -> None: ...

    def off(self) -> None: ...


@dataclass
class Counts:
    """One run's counts (``messages`` moved)."""

    messages: int
    wakeups: int
    replaced: int
    calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    events: Counter[str] = field(default_factory=Counter)
    deliveries: Counter[str] = field(default_factory=Counter)
    flows: Counter[str] = field(default_factory=Counter)
    accelerated: Counter[str] = field(default_factory=Counter)

    def total(self, layer: str | None = None) -> int:
        return sum(n for (lay, _f, _s), n in self.calls.items() if layer in (None, lay))

    def by_function(self, layer: str) -> Counter[str]:
        out: Counter[str] = Counter()
        for (lay, fn, _site), n in self.calls.items():
            if lay == layer:
                out[fn] += n
        return out

    def sites(self, layer: str, function: str) -> Counter[str]:
        out: Counter[str] = Counter()
        for (lay, fn, site), n in self.calls.items():
            if lay == layer and fn == function:
                out[site] += n
        return out

    def popped(self) -> int:
        return self.calls[ROUTER, "pn_collector_pop", _DISPATCH]

    def crossings(self) -> int:
        """Calls from the router's Python into C in the compiled build: each
        accelerator function once, the calls it makes not at all."""
        inside = sum(n for (lay, _f, site), n in self.calls.items()
                     if lay == ROUTER and site in _ACCELERATED)
        return self.total(ROUTER) - inside + sum(self.accelerated.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "wakeups": self.wakeups,
            "replaced": self.replaced,
            "calls": {layer: dict(self.by_function(layer)) for layer in (ROUTER, PROTON_API)},
            "sites": [[lay, fn, site, n] for (lay, fn, site), n in sorted(self.calls.items())],
            "events": dict(self.events),
            "popped": self.popped(),
            "deliveries": dict(self.deliveries),
            "flows": dict(self.flows),
            "accelerated": dict(self.accelerated),
            "crossings": self.crossings(),
        }


def count(n: int, window: int = 1000, *, allocations: Switch | None = None,
          **scenario: Any) -> Counts:
    """Move ``n`` messages as ``bench.engine_cost`` does (``scenario``: its
    ``measure``'s keyword arguments), counting the router's proton calls and
    events, and with ``allocations`` switched on inside the router.  Raises
    RuntimeError on a compiled build."""
    compiled = compiled_hot_modules()
    if compiled:
        raise RuntimeError(f"compiled modules cannot be counted: {', '.join(compiled)}; "
                           "run with the pure build (python -m bench.calls loads it)")
    from bench.engine_cost import measure

    tally = Tally()
    with instrumented(tally) as replaced, counting_run_once(tally, allocations):
        _seconds, moved = measure(n, window=window, **scenario)
    return Counts(messages=moved, wakeups=tally.wakeups, replaced=replaced, calls=tally.calls,
                  events=tally.events, deliveries=tally.deliveries, flows=tally.flows,
                  accelerated=tally.accelerated)


def report(c: Counts, top: int = 30) -> str:
    m = c.messages
    lines = [
        f"{m} messages, {c.wakeups} wake-ups of Engine.run_once "
        f"({m / max(c.wakeups, 1):.1f} messages per wake-up); "
        f"{c.replaced} module globals counted",
        f"proton C calls per message: {c.total() / m:.2f} "
        f"(router modules {c.total(ROUTER) / m:.2f}, "
        f"through proton's Python API {c.total(PROTON_API) / m:.2f})",
        f"calls from Python into C per message in the compiled build: "
        f"{c.crossings() / m:.2f} (accelerator: "
        + ", ".join(f"{fn} {n / m:.2f}" for fn, n in sorted(c.accelerated.items())) + ")",
        "",
    ]
    for layer, title in ((ROUTER, "C function (router modules)"),
                         (PROTON_API, "C function (proton's Python API)")):
        functions = c.by_function(layer).most_common()
        if not functions:
            continue
        lines.append(f"{title:<34}{'per msg':>9}{'total':>9}   calling functions (per msg)")
        for fn, n in functions[:top]:
            sites = ", ".join(f"{site} {k / m:.3f}" if k * 1000 >= m else f"{site} ({k})"
                              for site, k in c.sites(layer, fn).most_common())
            lines.append(f"{fn:<34}{n / m:>9.3f}{n:>9}   {sites}")
        if len(functions) > top:
            rest = sum(n for _fn, n in functions[top:])
            lines.append(f"{f'({len(functions) - top} more)':<34}{rest / m:>9.3f}{rest:>9}")
        lines.append("")
    lines += [f"collector events per message: {c.events.total() / m:.3f} "
              f"(popped by the dispatcher: {c.popped() / m:.3f})",
              f"  {'event type':<58}{'per msg':>9}{'total':>9}"]
    lines += [f"  {name:<58}{n / m:>9.3f}{n:>9}" for name, n in c.events.most_common()]
    lines.append("PN_DELIVERY by link side and kind:")
    lines += [f"  {name:<58}{n / m:>9.3f}{n:>9}" for name, n in sorted(c.deliveries.items())]
    if c.flows:
        lines.append("PN_LINK_FLOW by link side:")
        lines += [f"  {name:<58}{n / m:>9.3f}{n:>9}" for name, n in sorted(c.flows.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.calls", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("count", type=int, nargs="?", default=20_000)
    parser.add_argument("--window", type=int, default=1000, help="the receiver's credit window")
    parser.add_argument("--top", type=int, default=30, help="C functions listed")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    prefer_sources()
    try:
        counts = count(args.count, args.window)
    except RuntimeError as exc:
        print(f"bench.calls: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(counts.as_dict(), indent=1, sort_keys=True))
    else:
        print(report(counts, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
