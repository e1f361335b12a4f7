"""man/hopd.conf.5 is generated from the schema and must not be stale."""

from __future__ import annotations

from pathlib import Path

from autolink import FIRST_RETRY_S, RETRY_S
from conf import ENTITY_TYPES, RETRY_DROPPED_S, RETRY_FAILED_S, parse
from conf.entities import NESTED_TYPES
from conf.fields import schema_fields
from conf.manpage import REGENERATE_COMMAND, render_manpage

MANPAGE = Path(__file__).resolve().parents[3] / "man" / "hopd.conf.5"


def test_manpage_is_up_to_date() -> None:
    assert MANPAGE.exists(), f"man/hopd.conf.5 is missing; generate it with: {REGENERATE_COMMAND}"
    assert MANPAGE.read_text(encoding="utf-8") == render_manpage(), (
        f"man/hopd.conf.5 is stale; regenerate it with: {REGENERATE_COMMAND}"
    )


def test_manpage_documents_every_section_and_attribute() -> None:
    page = render_manpage()
    for entity in ENTITY_TYPES:
        assert f"\n.SS {entity.conf_name}\n" in page
        for field in schema_fields(entity.cls):
            assert f"\\fB{field.schema.conf_name}\\fR (" in page
            for alias in field.schema.aliases:
                assert f"\\fB{alias}\\fR" in page


def test_manpage_lists_every_group_setting_after_its_section() -> None:
    page = render_manpage()
    for nested in NESTED_TYPES:
        before, heading, rest = page.partition(f'\n.SS "{nested.parent} {nested.attribute}"\n')
        assert heading and before.rfind(f"\n.SS {nested.parent}\n") == before.rfind("\n.SS ")
        table = rest.split("\n.SS ", 1)[0]
        for field in schema_fields(nested.cls):
            assert f"\\fB{field.schema.conf_name}\\fR (" in table


def test_manpage_states_the_retry_delays_the_router_applies() -> None:
    page = " ".join(render_manpage().split())
    assert (f"attached again after {FIRST_RETRY_S:g} seconds, then every {RETRY_S:g}"
            in page), "auto-links"
    assert (f"retried after {RETRY_FAILED_S:g} seconds, a connection that was up is "
            f"re-established {RETRY_DROPPED_S:g} seconds after it drops" in page), "connectors"
    assert (f"comes {RETRY_FAILED_S:g} s after a failed one and {RETRY_DROPPED_S:g} s after "
            "a drop" in page)


def test_manpage_has_the_standard_sections() -> None:
    page = render_manpage()
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "EXAMPLES", "SEE ALSO"):
        assert f"\n.SH {heading}\n" in page
    assert ".BR hopd (8)" in page


def test_manpage_example_is_a_valid_configuration() -> None:
    page = render_manpage()
    example = page.split("\n.SH EXAMPLES\n", 1)[1].split("\n.nf\n", 1)[1].split("\n.fi\n")[0]
    conf = parse(example, "example.conf")
    assert conf.router.id == "Hop"
    assert [spec.pattern for spec in conf.addresses] == [None, "news.#"]
