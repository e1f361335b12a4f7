"""Loading files: syntax chosen by name, unreadable and empty files."""

from __future__ import annotations

from pathlib import Path

import pytest

from addressing import Distribution
from conf import ConfError, RouterMode, load


def test_load_reads_conf_syntax(tmp_path: Path) -> None:
    path = tmp_path / "hopd.conf"
    path.write_text("router {\n    mode: interior\n}\n")
    assert load(path).router.mode is RouterMode.INTERIOR


def test_load_detects_json_by_name(tmp_path: Path) -> None:
    path = tmp_path / "hopd.json"
    path.write_text('[["router", {"defaultDistribution": "closest"}]]')
    assert load(str(path)).router.default_distribution is Distribution.CLOSEST


def test_missing_file_is_a_conf_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.conf"
    with pytest.raises(ConfError) as info:
        load(path)
    assert str(info.value) == f"{path}: configuration file not found"


def test_directory_is_a_conf_error(tmp_path: Path) -> None:
    with pytest.raises(ConfError, match="cannot read configuration file"):
        load(tmp_path)


def test_empty_file_is_the_default_standalone_router(tmp_path: Path) -> None:
    path = tmp_path / "empty.conf"
    path.write_text("")
    conf = load(path)
    assert conf.router.mode.value == "standalone"
    assert conf.listeners == ()


def test_invalid_utf8_is_positioned(tmp_path: Path) -> None:
    path = tmp_path / "bad.conf"
    path.write_bytes(b"router {\n    id: R\xff\n}\n")
    with pytest.raises(ConfError) as info:
        load(path)
    assert str(info.value) == f"{path}:2:10: invalid UTF-8 byte sequence"


def test_errors_name_the_file_as_given(tmp_path: Path) -> None:
    path = tmp_path / "x.conf"
    path.write_text("listener {\n    prot: 1\n}\n")
    with pytest.raises(ConfError) as info:
        load(path)
    assert info.value.diagnostics[0].filename == str(path)
