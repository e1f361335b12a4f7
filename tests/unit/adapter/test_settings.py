"""Listener, connector and vhost settings: the SASL and TLS checks made
before a port opens, and the values the conf declares reaching the router."""

from __future__ import annotations

from typing import Any

import pytest
from proton import SASL

import conf
from conf.fields import SchemaField, schema_fields
from conf.types import BooleanType, EnumType, IntegerType, NameListType
from router.adapter.connections.settings import (
    ListenerSettings,
    SaslError,
    connector_settings,
    listener_settings,
    vhost_from_section,
)
from router.adapter.connections.tls import TlsError
from router.core import Role
from router.core.policy import GroupSettings


def listener(**attributes: Any) -> conf.ListenerSection:
    return conf.ListenerSection(host="127.0.0.1", port="5672", **attributes)


def test_plain_needs_a_proton_built_with_cyrus_sasl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SASL, "extended", staticmethod(lambda: False))
    with pytest.raises(SaslError, match="SASL PLAIN needs python-qpid-proton built with "
                                        "Cyrus SASL"):
        listener_settings(listener(sasl_mechanisms="ANONYMOUS PLAIN"))
    assert listener_settings(listener(sasl_mechanisms="ANONYMOUS EXTERNAL")).sasl_mechanisms \
        == "ANONYMOUS EXTERNAL", "proton serves these itself"


def test_an_http_root_dir_makes_a_listener_speak_http_as_in_qdrouterd() -> None:
    assert not listener_settings(listener()).http
    assert listener_settings(listener(http=True)).http
    assert listener_settings(listener(http_root_dir="/srv/console")).http


def test_tls_settings_refer_to_a_known_profile() -> None:
    with pytest.raises(TlsError, match="no sslProfile named 'missing'"):
        listener_settings(listener(ssl_profile="missing"))
    with pytest.raises(TlsError, match="requireSsl needs an sslProfile"):
        listener_settings(listener(require_ssl=True))


def test_a_connector_with_a_user_name_logs_in_with_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOP_TEST_PASSWORD", "s3cret")
    s = connector_settings(conf.ConnectorSection(
        host="core", port="5672", sasl_username="router", sasl_password="env:HOP_TEST_PASSWORD"))
    assert (s.sasl_username, s.sasl_password, s.sasl_mechanisms) == ("router", "s3cret", "PLAIN")
    with pytest.raises(SaslError, match="saslPassword: environment variable HOP_NO_SUCH_VAR"):
        connector_settings(conf.ConnectorSection(
            host="core", port="5672", sasl_username="r", sasl_password="env:HOP_NO_SUCH_VAR"))


#: Settings the adapter takes unchanged from a listener or connector section,
#: by conf name.
SAME_VALUES = {
    "name": "name", "role": "role", "cost": "cost", "idleTimeoutSeconds": "idle_timeout_s",
    "maxFrameSize": "max_frame_size", "maxSessions": "max_sessions",
    "maxSessionFrames": "max_session_frames", "policyVhost": "policy_vhost",
    "authenticatePeer": "authenticate_peer", "requireEncryption": "require_encryption",
    "allowInsecureMechanisms": "allow_insecure_mechanisms",
    "http": "http", "metrics": "metrics", "healthz": "healthz",
}


@pytest.mark.parametrize("cls", [conf.ListenerSection, conf.ConnectorSection])
def test_a_default_section_gives_the_schema_s_defaults(
        cls: type[conf.ListenerSection | conf.ConnectorSection]) -> None:
    section = cls()
    made = (listener_settings(section) if isinstance(section, conf.ListenerSection)
            else connector_settings(section))
    compared = 0
    for field in schema_fields(cls):
        name = SAME_VALUES.get(field.schema.conf_name)
        if name is not None:
            assert getattr(made, name) == field.default, field.schema.conf_name
            compared += 1
    assert compared >= 8, "the loop compared something"
    assert made.port == conf.port_number(section.port) == 5672
    assert made.link_capacity == conf.LINK_CAPACITY == section.link_capacity
    assert (made.strip_in, made.strip_out) == (True, True), "stripAnnotations: both"
    if isinstance(made, ListenerSettings):
        assert made.sasl_config_name == conf.RouterSection().sasl_config_name
    else:
        assert (made.retry_failed_s, made.retry_dropped_s) == (conf.RETRY_FAILED_S,
                                                               conf.RETRY_DROPPED_S)


def test_a_listener_bounds_the_handshake_unless_told_not_to() -> None:
    assert listener_settings(listener()).initial_handshake_timeout_s == 60
    assert listener_settings(listener(initial_handshake_timeout_seconds=5)
                             ).initial_handshake_timeout_s == 5
    assert listener_settings(listener(initial_handshake_timeout_seconds=0)
                             ).initial_handshake_timeout_s == 0, "0: qdrouterd's none"


def test_a_link_capacity_of_zero_means_the_default() -> None:
    settings = listener_settings(listener(link_capacity=0))
    assert settings.link_capacity == conf.LINK_CAPACITY


@pytest.mark.parametrize(("written", "used"), [(0, 32768), (1, 1), (32768, 32768),
                                              (100000, 32768)])
def test_max_sessions_of_zero_or_too_many_means_as_many_as_allowed(written: int,
                                                                   used: int) -> None:
    """As the conf documents maxSessions; 0 used to give a channel-max of 0,
    one session only."""
    assert listener_settings(listener(max_sessions=written)).max_sessions == used
    assert connector_settings(conf.ConnectorSection(
        host="127.0.0.1", port="5672", max_sessions=written)).max_sessions == used


def test_a_connection_role_read_from_the_conf_is_the_core_s_role() -> None:
    cfg = conf.parse("connector {\n    role: route-container\n}\n", "hopd.conf")
    [section] = cfg.connectors
    assert section.role is Role.ROUTE_CONTAINER, "one Role, declared in addressing"
    assert connector_settings(section).role is Role.ROUTE_CONTAINER


def group_of(settings: dict[str, object]) -> GroupSettings:
    section = conf.build_section("vhost", {"hostname": "h", "groups": {"g": settings}})
    assert isinstance(section, conf.VhostSection)
    return vhost_from_section(section).groups["g"]


def _other_value(field: SchemaField) -> object:
    """A written value of ``field`` other than its default."""
    value_type = field.schema.type
    if isinstance(value_type, BooleanType):
        return not field.default
    if isinstance(value_type, EnumType):
        return next(m.value for m in value_type.members if m != field.default)
    if isinstance(value_type, NameListType):
        return "x"
    assert isinstance(value_type, IntegerType)
    return 1


def test_every_group_setting_hop_applies_reaches_the_policy() -> None:
    default = group_of({})
    for field in schema_fields(conf.UserGroupSection):
        if field.schema.ignored is None:
            name = field.schema.conf_name
            assert group_of({name: _other_value(field)}) != default, f"{name} is dropped"


def test_an_empty_group_has_the_conf_s_defaults() -> None:
    group = group_of({})
    declared = conf.UserGroupSection()
    assert (group.allow_dynamic_source, group.allow_anonymous_sender,
            group.allow_user_id_proxy, group.allow_waypoint_links,
            group.allow_fallback_links, group.allow_admin_status_update) == (
        declared.allow_dynamic_source, declared.allow_anonymous_sender,
        declared.allow_user_id_proxy, declared.allow_waypoint_links,
        declared.allow_fallback_links, declared.allow_admin_status_update)
    assert (group.max_senders, group.max_receivers) == (declared.max_senders,
                                                        declared.max_receivers)
    assert group.management is None and declared.management is None, "as qdrouterd"
    assert (group.users, group.remote_hosts, group.sources, group.targets) == (
        frozenset(), (), None, None)


def test_allow_dynamic_link_routes_is_applied_not_warned_about() -> None:
    warnings: list[str] = []
    section = conf.build_section("vhost", {"hostname": "h", "groups": {
        "g": {"allowDynamicLinkRoutes": False}}})
    assert isinstance(section, conf.VhostSection)
    vhost = vhost_from_section(section, lambda text, *args: warnings.append(text % args))
    assert warnings == []
    assert vhost.groups["g"].allow_dynamic_link_routes is False
