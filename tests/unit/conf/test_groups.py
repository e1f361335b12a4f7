"""A vhost's user groups: each setting checked against its declaration, an
error at its line and column in a conf file or a policyDir file."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conf import (
    ConfError,
    ManagementAccess,
    UserGroupSection,
    VhostSection,
    ignored_group_settings,
    load_policy_dir,
    parse,
)

VHOST = """\
vhost {
    hostname: shop
    groups: {
        "staff": {
            "users": "alice, bob",
            %s
        }
    }
}
"""


def diagnostics(setting: str) -> list[str]:
    with pytest.raises(ConfError) as info:
        parse(VHOST % setting, "hopd.conf")
    return [str(d) for d in info.value.diagnostics]


def test_a_bad_value_is_reported_at_its_line_and_column() -> None:
    assert diagnostics('"maxSenders": "many"') == [
        "hopd.conf:6:27: invalid value for 'groups' in section 'vhost': setting 'maxSenders' "
        "in group 'staff': expected an integer, got 'many'"
    ]


def test_a_misspelt_boolean_is_an_error_not_false() -> None:
    assert diagnostics('"allowDynamicSource": "ture"') == [
        "hopd.conf:6:35: invalid value for 'groups' in section 'vhost': setting "
        "'allowDynamicSource' in group 'staff': expected a boolean (yes/true/on or "
        "no/false/off), got 'ture'"
    ]


def test_an_unknown_setting_is_ignored_with_a_warning_at_its_key_and_the_nearest_name(
        caplog: pytest.LogCaptureFixture) -> None:
    # qdrouterd ignores it with a warning too ("... option ... is ignored").
    conf = parse(VHOST % '"remoteHost": "*",\n            "maxSenders": 3', "hopd.conf")
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        "hopd.conf:6:13: user group 'staff' option 'remoteHost' is ignored "
        "(did you mean 'remoteHosts'?)"
    ]
    staff = conf.vhosts[0].user_groups()["staff"]
    assert (staff.remote_hosts, staff.max_senders) == (UserGroupSection().remote_hosts, 3)


@pytest.mark.parametrize(("setting", "says"), [
    ('"management": "admin"', "expected one of 'none', 'read', 'write'"),
    ('"maxConnectionsPerUser": -1', "expected an integer between 0 and 2147483647, got -1"),
    ('"sources": {"a": 1}', "expected a comma-separated string or a JSON list of names, "
                            "got a map"),
    ('"users": "carol"', "setting 'users' given twice in group 'staff'"),
    ('"sources": "a", "sourcePattern": "b"', "group 'staff' gives both 'sources' and "
                                              "'sourcePattern'; use only one"),
    ('"targets": "a", "targetPattern": "b"', "gives both 'targets' and 'targetPattern'"),
    ('"targets": "${user}.${user}"', "'${user}.${user}' gives ${user} more than once"),
    ('"sourcePattern": "a.${user}.b"', "setting 'sourcePattern' in group 'staff': "
                                       "'a.${user}.b' may give ${user} only as a prefix "
                                       "or a suffix"),
])
def test_other_bad_settings(setting: str, says: str) -> None:
    [message] = diagnostics(setting)
    assert says in message


def test_a_group_must_be_a_map() -> None:
    with pytest.raises(ConfError, match=r"hopd.conf:3:19: .*group 'g' must be a map of "
                                        r"settings, got a list"):
        parse('vhost {\n    hostname: h\n    groups: {"g": ["alice"]}\n}\n', "hopd.conf")


def test_a_bad_setting_in_a_policy_dir_file_is_reported_at_its_line_and_column(
        tmp_path: Path) -> None:
    (tmp_path / "shop.json").write_text(textwrap.dedent("""\
        [
            ["vhost", {
                "hostname": "shop",
                "groups": {"$default": {"maxReceivers": 1, "allowAnonymousSender": "maybe"}}
            }]
        ]
        """))
    with pytest.raises(ConfError) as info:
        load_policy_dir(tmp_path)
    assert [str(d) for d in info.value.diagnostics] == [
        f"{tmp_path / 'shop.json'}:4:76: invalid value for 'groups' in section 'vhost': "
        "setting 'allowAnonymousSender' in group '$default': expected a boolean "
        "(yes/true/on or no/false/off), got 'maybe'"
    ]


def test_groups_are_kept_as_written_and_typed_on_demand() -> None:
    written = {"users": ["alice", " bob "], "maxSenders": "3", "allowDynamicSource": "yes",
               "management": "write", "targets": "a, b*,", "sourcePattern": ""}
    conf = parse(f'vhost {{\n    hostname: h\n    groups: {{"g": {json.dumps(written)}}}\n}}\n',
                 "hopd.conf")
    [vhost] = conf.vhosts
    assert vhost.groups == {"g": written}, "management shows the groups as written"
    assert vhost.user_groups() == {"g": UserGroupSection(
        users=("alice", "bob"), max_senders=3, allow_dynamic_source=True,
        management=ManagementAccess.WRITE, targets=("a", "b*"), source_pattern=())}


def test_an_empty_group_has_the_declared_defaults() -> None:
    typed = VhostSection(hostname="h", groups={"$default": {}}).user_groups()["$default"]
    assert typed == UserGroupSection()
    assert (typed.max_senders, typed.allow_waypoint_links, typed.sources,
            typed.management) == (2147483647, True, None, None)


def test_a_section_made_without_the_loader_is_still_checked() -> None:
    with pytest.raises(ConfError, match="setting 'maxSenders' in group 'g': expected an "
                                        "integer"):
        VhostSection(hostname="h", groups={"g": {"maxSenders": "x"}}).user_groups()


def test_every_group_setting_is_applied_so_none_is_reported_ignored() -> None:
    # allowDynamicLinkRoutes was the last one: it now rules connection.linkRoute.
    assert ignored_group_settings({"allowDynamicLinkRoutes": False, "maxSenders": 1}) == []
