"""Cells and tables for ``hopstat``: qdstat's cell formats (counts with
commas, K/M/G, uptimes), routing-key decoding, and the table layout, plain
or CSV.  Pure text; nothing here talks to a router.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import attrs

Row = Mapping[str, Any]
Formatter = Callable[[Any], str]


#: Shown for an attribute the router's response does not have.
ABSENT: Final = "-"

# -- cell formats --------------------------------------------------------------


def text(value: Any) -> str:
    """Text as it is; a number without proton's type name (``int32(5)`` → ``5``)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        return str(float(value))
    return str(value)


def plain(value: Any) -> str:
    """An integer without separators (qdstat's PlainNum); other values as text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(int(value))
    return str(value)


def commas(value: Any) -> str:
    """An integer with thousands separators: ``12,345``."""
    return f"{int(value):,}"


def time_long(seconds: Any) -> str:
    """A duration as ``DDD:HH:MM:SS``."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days:03d}:{hours:02d}:{minutes:02d}:{secs:02d}"


def time_short(seconds: Any) -> str:
    """A duration under a day as ``HH:MM:SS``."""
    return time.strftime("%H:%M:%S", time.gmtime(int(seconds)))


def kmg(value: Any, base: int = 1000) -> str:
    """A size with a unit suffix: ``40.2 MiB`` (base 1024) or ``3.10 m`` (base 1000)."""
    suffixes = ("KiB", "MiB", "GiB", "TiB", "PiB") if base == 1024 else ("k", "m", "g", "t", "p")
    number = float(value)
    if number < base:
        return str(int(number))
    index = 0
    number /= base
    while number >= base and index < len(suffixes) - 1:
        number /= base
        index += 1
    digits = 2 if number < 10 else 1 if number < 100 else 0
    return f"{number:.{digits}f} {suffixes[index]}"


def cell(row: Row, name: str, fmt: Formatter = text) -> str:
    """The cell for attribute ``name``: ``-`` when absent, empty when null,
    ``?`` when the value does not suit the format (as qdstat)."""
    if name not in row:
        return ABSENT
    value = row[name]
    if value is None:
        return ""
    try:
        return fmt(value)
    except (TypeError, ValueError, OverflowError):
        return "?"


# -- addresses -----------------------------------------------------------------

_ADDRESS_CLASSES: Final = {"M": "mobile", "R": "router", "A": "area", "L": "local",
                           "T": "topo", "C": "link-in", "E": "link-in", "D": "link-out",
                           "F": "link-out", "H": "edge"}


def address_parts(key: object) -> tuple[str, str, str]:
    """A routing key as qdstat's class, address and phase columns:
    ``M0queue`` → (mobile, queue, 0), ``Ltemp.x`` → (local, temp.x, "")."""
    if not isinstance(key, str) or not key:
        return "", "", ""
    cls = _ADDRESS_CLASSES.get(key[0], f"unknown: {key[0]}")
    if key[0] == "M":
        return cls, key[2:], key[1:2]
    return cls, key[1:], ""


# -- tables --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Table:
    """A titled table of text cells."""

    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def table(title: str, headers: Sequence[str], rows: Iterable[Sequence[str]]) -> Table:
    return Table(title=title, headers=tuple(headers), rows=tuple(tuple(r) for r in rows))


def render_plain(t: Table, indent: str = "  ", spacing: int = 2) -> list[str]:
    """The title, then the headers, a rule of ``=`` and the rows, in
    left-aligned columns ``spacing`` apart (no header when there are no rows)."""
    lines = [t.title]
    if not t.rows:
        return lines
    rows = [(*row, *[""] * (len(t.headers) - len(row))) for row in t.rows]
    widths = [max([len(h), *(len(r[i]) for r in rows)]) + spacing
              for i, h in enumerate(t.headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.ljust(w) for c, w in zip(cells[:-1], widths, strict=False)]
        return indent + "".join(padded) + cells[-1]

    lines.append(line(t.headers))
    lines.append(indent + "=" * sum(widths))
    lines.extend(line(r) for r in rows)
    return lines


def csv_field(value: str) -> str:
    """A CSV field: empty stays empty, anything else is quoted, quotes doubled."""
    return "" if not value else '"' + value.replace('"', '""') + '"'


def render_csv(t: Table) -> list[str]:
    """The title, then the headers and the rows as comma-separated quoted fields."""
    lines = [t.title]
    if t.rows:
        lines.append(",".join(csv_field(h) for h in t.headers))
        lines.extend(",".join(csv_field(c) for c in row) for row in t.rows)
    return lines


def sorted_by(headers: Sequence[str], column: str,
              rows: Iterable[Sequence[str]]) -> list[Sequence[str]]:
    index = list(headers).index(column)
    return sorted(rows, key=lambda r: r[index])
