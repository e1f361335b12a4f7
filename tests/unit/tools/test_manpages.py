"""man/hopstat.8 and man/hopmanage.8 describe every option and operation the commands have."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

import router
from router.tools.hopmanage import hopmanage
from router.tools.hopstat import hopstat

MAN = Path(__file__).resolve().parents[3] / "man"


def roff(flag: str) -> str:
    return flag.replace("-", "\\-")


def flags(command: click.Command) -> list[str]:
    return [flag for param in command.params if isinstance(param, click.Option)
            for flag in (*param.opts, *param.secondary_opts)]


@pytest.mark.parametrize("flag", flags(hopstat))
def test_hopstat_page_describes_each_option(flag: str) -> None:
    page = (MAN / "hopstat.8").read_text(encoding="utf-8")
    assert f".B {roff(flag)}" in page or f".BR {roff(flag)} " in page or (
        f", \" {roff(flag)}" in page), flag


def test_hopmanage_page_describes_each_operation_and_option() -> None:
    page = (MAN / "hopmanage.8").read_text(encoding="utf-8")
    assert isinstance(hopmanage, click.Group)
    for name, command in hopmanage.commands.items():
        assert f"\n.B {roff(name)}" in page, name
        for flag in flags(command):
            assert roff(flag) in page, f"{name} {flag}"
    for flag in flags(hopmanage):
        assert roff(flag) in page, flag


@pytest.mark.parametrize("page", ["hopstat.8", "hopmanage.8"])
def test_pages_carry_the_version(page: str) -> None:
    assert f'"Hop {router.__version__}"' in (MAN / page).read_text(encoding="utf-8")
