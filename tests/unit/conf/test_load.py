"""Loading files: syntax chosen by name, unreadable and empty files."""

from __future__ import annotations

from pathlib import Path

import pytest

import conf
from addressing import Distribution
from conf import ConfError, RouterMode, load
from router.core.amqp import Long, Symbol


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


def test_typed_amqp_values_from_management_read_as_plain_ones() -> None:
    section = conf.build_section("vhost", {"hostname": Symbol("shop"), "maxConnections": Long(3),
                                      "groups": {"g": {"maxSenders": Long(2)}}})
    assert isinstance(section, conf.VhostSection)
    assert (section.hostname, section.max_connections) == ("shop", 3)
    assert section.groups == {"g": {"maxSenders": 2}}


def test_policy_dir_reads_vhosts_and_refuses_other_sections(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text('[["vhost", {"hostname": "a", "aliases": "b, c"}]]')
    (tmp_path / "notes.txt").write_text("not read")
    [vhost] = conf.load_policy_dir(tmp_path)
    assert (vhost.hostname, vhost.aliases) == ("a", "b, c")
    (tmp_path / "z.json").write_text('[\n  ["listener", {"port": 1}]\n]\n')
    with pytest.raises(conf.ConfError) as error:
        conf.load_policy_dir(tmp_path)
    assert str(error.value).startswith(f"{tmp_path / 'z.json'}:2:")
    assert "only vhost sections" in str(error.value)
    with pytest.raises(conf.ConfError, match="cannot read policyDir"):
        conf.load_policy_dir(tmp_path / "missing")
