"""hopstat's cell formats and table layout, plain and CSV, as qdstat prints them."""

from __future__ import annotations

import csv

import pytest

from router.tools.tables import (
    Table,
    address_parts,
    cell,
    commas,
    csv_field,
    kmg,
    plain,
    render_csv,
    render_plain,
    sorted_by,
    table,
    text,
    time_long,
    time_short,
)


def test_plain_table_has_title_headers_rule_and_left_aligned_columns() -> None:
    t = table("Connections", ["id", "host"], [["1", "127.0.0.1:5672"], ["22", "h"]])
    assert render_plain(t) == [
        "Connections",
        "  id  host",
        "  ====================",
        "  1   127.0.0.1:5672",
        "  22  h",
    ]


def test_rule_spans_every_column_and_its_spacing() -> None:
    lines = render_plain(table("T", ["a", "bbb"], [["xx", "y"]]))
    assert lines[2] == "  " + "=" * (len("xx") + 2 + len("bbb") + 2)


def test_a_table_without_rows_prints_only_its_title() -> None:
    assert render_plain(table("Router Links", ["type"], [])) == ["Router Links"]
    assert render_csv(table("Router Links", ["type"], [])) == ["Router Links"]


def test_short_rows_are_padded_with_empty_cells() -> None:
    lines = render_plain(table("T", ["a", "b", "c"], [["1"]]))
    assert lines[-1] == "  1  " + " " * 3 + ""


def test_csv_quotes_fields_doubles_quotes_and_leaves_empty_fields_bare() -> None:
    t = Table(title="T", headers=("id", "say"), rows=(("1", 'he said "hi"'), ("", "x,y")))
    lines = render_csv(t)
    assert lines == ["T", '"id","say"', '"1","he said ""hi"""', ',"x,y"']
    assert list(csv.reader(lines[1:])) == [["id", "say"], ["1", 'he said "hi"'], ["", "x,y"]]


def test_csv_field() -> None:
    assert csv_field("") == ""
    assert csv_field("a") == '"a"'


@pytest.mark.parametrize(("key", "parts"), [
    ("M0queue", ("mobile", "queue", "0")),
    ("M1queue", ("mobile", "queue", "1")),
    ("L$management", ("local", "$management", "")),
    ("RB", ("router", "B", "")),
    ("Cbroker.", ("link-in", "broker.", "")),
    ("Dbroker.", ("link-out", "broker.", "")),
    ("Tqdrouter", ("topo", "qdrouter", "")),
    ("Zx", ("unknown: Z", "x", "")),
    (None, ("", "", "")),
    ("", ("", "", "")),
])
def test_address_parts_split_a_key_as_qdstat(key: str | None,
                                             parts: tuple[str, str, str]) -> None:
    assert address_parts(key) == parts


def test_cell_shows_absent_as_dash_null_as_empty_and_bad_values_as_question_mark() -> None:
    row = {"count": 5, "none": None, "word": "x"}
    assert cell(row, "count", plain) == "5"
    assert cell(row, "missing") == "-"
    assert cell(row, "none") == ""
    assert cell(row, "word", commas) == "?"


@pytest.mark.parametrize(("value", "shown"), [
    (0, "0"), (999, "999"), (1000, "1,000"), (1234567, "1,234,567")])
def test_commas(value: int, shown: str) -> None:
    assert commas(value) == shown


def test_plain_numbers_have_no_separators_and_no_fraction() -> None:
    assert plain(1234567) == "1234567"
    assert plain(2.9) == "2"
    assert plain("text") == "text"
    assert plain(True) == "True"


@pytest.mark.parametrize(("seconds", "shown"), [
    (0, "000:00:00:00"), (59, "000:00:00:59"), (3661, "000:01:01:01"),
    (86400 * 12 + 7, "012:00:00:07")])
def test_time_long(seconds: int, shown: str) -> None:
    assert time_long(seconds) == shown


def test_time_short() -> None:
    assert time_short(3725) == "01:02:05"


@pytest.mark.parametrize(("value", "base", "shown"), [
    (512, 1024, "512"),
    (2048, 1024, "2.00 KiB"),
    (42127360, 1024, "40.2 MiB"),
    (500 * 1024 ** 3, 1024, "500 GiB"),
    (1500, 1000, "1.50 k"),
    (10 ** 20, 1000, "100000 p"),
])
def test_kmg(value: int, base: int, shown: str) -> None:
    assert kmg(value, base) == shown


def test_sorted_by_a_named_column() -> None:
    rows = [["mobile", "b"], ["local", "a"]]
    assert sorted_by(["class", "addr"], "addr", rows) == [["local", "a"], ["mobile", "b"]]


def test_numbers_show_without_protons_type_names() -> None:
    class Int32(int):
        def __str__(self) -> str:
            return f"int32({int(self)})"

    assert text(Int32(5)) == "5"
    assert plain(Int32(5)) == "5"
    assert text(True) == "True" and text("x") == "x"
