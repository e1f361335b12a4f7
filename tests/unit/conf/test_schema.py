"""The schema: every entity type, defaults, deprecated names, value types, helpers."""

from __future__ import annotations

import pytest

from addressing import AddressSpec, BindingSpec, Direction, Distribution, ExchangeSpec
from autolink import AutoLinkSpec
from conf import (
    DEFAULT_CONF_TEXT,
    ENTITY_TYPES,
    AddressFamily,
    AuthServicePluginSection,
    ConfError,
    ConnectorSection,
    ConsoleSection,
    DiscoverySection,
    EntityType,
    ListenerSection,
    LogModule,
    LogSection,
    MatchMethod,
    PolicySection,
    Role,
    RouterConf,
    RouterMode,
    RouterSection,
    SslProfileSection,
    StripAnnotations,
    TcpConnectorSection,
    TcpListenerSection,
    VhostSection,
    parse,
    parse_boolean,
    port_number,
)
from conf.fields import schema_fields
from conf.names import snake_case
from linkroute import LinkRouteSpec

MINIMAL_SECTIONS = {
    "router": "router {\n}\n",
    "listener": "listener {\n}\n",
    "connector": "connector {\n}\n",
    "sslProfile": "sslProfile {\n}\n",
    "authServicePlugin": "authServicePlugin {\n    host: auth\n}\n",
    "address": "address {\n    prefix: a\n}\n",
    "linkRoute": "linkRoute {\n    prefix: a\n    direction: in\n}\n",
    "autoLink": "autoLink {\n    address: a\n    direction: out\n}\n",
    "exchange": "exchange {\n    address: ex\n}\n",
    "binding": "binding {\n    exchangeName: ex\n    nextHopAddress: q\n}\n",
    "log": "log {\n    module: DEFAULT\n}\n",
    "policy": "policy {\n}\n",
    "vhost": "vhost {\n    hostname: example.com\n}\n",
    "console": "console {\n    proxy: /bin/p\n    home: /srv\n}\n",
    "discovery": "discovery {\n    group: g\n}\n",
    "tcpListener": "tcpListener {\n    port: 9090\n    address: t\n}\n",
    "tcpConnector": "tcpConnector {\n    host: h\n    port: 80\n    address: t\n}\n",
}


def test_every_entity_type_has_a_minimal_example() -> None:
    assert set(MINIMAL_SECTIONS) == {entity.conf_name for entity in ENTITY_TYPES}


def one(text: str) -> RouterConf:
    return parse(text, "hopd.conf")


def test_every_entity_type_parses_with_defaults() -> None:
    text = "".join(MINIMAL_SECTIONS.values()).replace("exchange {\n", "exchange {\n    name: ex\n")
    conf = one(text)
    assert conf == RouterConf(
        router=RouterSection(),
        listeners=(ListenerSection(),),
        connectors=(ConnectorSection(),),
        ssl_profiles=(SslProfileSection(),),
        auth_service_plugins=(AuthServicePluginSection(host="auth"),),
        addresses=(AddressSpec(prefix="a"),),
        link_routes=(LinkRouteSpec(prefix="a", direction=Direction.IN),),
        auto_links=(AutoLinkSpec(address="a", direction=Direction.OUT),),
        exchanges=(ExchangeSpec(name="ex", address="ex"),),
        bindings=(BindingSpec(exchange_name="ex", next_hop_address="q"),),
        logs=(LogSection(module=LogModule.DEFAULT),),
        policy=PolicySection(),
        vhosts=(VhostSection(hostname="example.com"),),
        consoles=(ConsoleSection(proxy="/bin/p", home="/srv"),),
        discovery=DiscoverySection(group="g"),
        tcp_listeners=(TcpListenerSection(port="9090", address="t"),),
        tcp_connectors=(TcpConnectorSection(host="h", port="80", address="t"),),
    )


def test_listener_defaults_follow_qdrouterd() -> None:
    listener = ListenerSection()
    assert (listener.host, listener.port, listener.role) == ("", "amqp", Role.NORMAL)
    assert listener.idle_timeout_seconds == 16
    assert listener.max_frame_size == 16384
    assert listener.max_sessions == 32768
    assert listener.link_capacity == 250
    assert listener.strip_annotations is StripAnnotations.BOTH
    assert listener.authenticate_peer is False
    assert listener.message_logging_components == "none"
    assert (listener.healthz, listener.metrics, listener.websockets, listener.http) == (
        True,
        True,
        True,
        False,
    )


def test_connector_defaults_follow_qdrouterd() -> None:
    connector = ConnectorSection()
    assert (connector.host, connector.port) == ("127.0.0.1", "amqp")
    assert connector.verify_hostname is True
    assert connector.allow_redirect is True
    assert connector.idle_timeout_seconds == 16


def test_router_defaults_follow_qdrouterd() -> None:
    router = RouterSection()
    assert router.id is None
    assert router.mode is RouterMode.STANDALONE
    assert (router.hello_interval_seconds, router.hello_max_age_seconds) == (1, 3)
    assert (router.ra_interval_seconds, router.ra_interval_flux_seconds) == (30, 4)
    assert router.remote_ls_max_age_seconds == 60
    assert router.default_distribution is Distribution.BALANCED
    assert router.sasl_config_name == "qdrouterd"
    assert router.timestamp_format == "%Y-%m-%d %H:%M:%S.%%06lu %z"


def test_policy_defaults_follow_qdrouterd() -> None:
    assert PolicySection() == PolicySection(
        max_connections=65535, max_message_size=0, policy_dir="", default_vhost="$default"
    )


def test_absent_singletons_are_created_with_defaults() -> None:
    conf = one("listener {\n}\n")
    assert conf.router == RouterSection()
    assert conf.policy == PolicySection()


def test_default_conf_text_is_a_standalone_router_on_localhost() -> None:
    conf = parse(DEFAULT_CONF_TEXT, "default.conf")
    assert conf.router == RouterSection(id="Hop", mode=RouterMode.STANDALONE)
    assert conf.listeners == (
        ListenerSection(
            host="127.0.0.1", port="5672", sasl_mechanisms="ANONYMOUS", authenticate_peer=False
        ),
    )


@pytest.mark.parametrize(
    ("section", "old", "value", "field", "expected"),
    [
        ("router", "helloInterval", "5", "hello_interval_seconds", 5),
        ("router", "helloMaxAge", "9", "hello_max_age_seconds", 9),
        ("router", "raInterval", "7", "ra_interval_seconds", 7),
        ("router", "raIntervalFlux", "2", "ra_interval_flux_seconds", 2),
        ("router", "remoteLsMaxAge", "70", "remote_ls_max_age_seconds", 70),
        ("router", "debugDump", "/tmp/d", "debug_dump_file", "/tmp/d"),
        ("router", "saslConfigPath", "/sasl", "sasl_config_dir", "/sasl"),
        ("listener", "protocolFamily", "IPv6", "socket_address_family", AddressFamily.IPV6),
        ("listener", "trustedCerts", "/ca", "trusted_certs_file", "/ca"),
        ("listener", "failoverList", "h:1", "failover_urls", "h:1"),
        ("listener", "httpRoot", "/www", "http_root_dir", "/www"),
        ("listener", "logMessage", "all", "message_logging_components", "all"),
        ("connector", "verifyHostName", "no", "verify_hostname", False),
        ("sslProfile", "certDb", "/ca", "ca_cert_file", "/ca"),
        ("sslProfile", "keyFile", "/k", "private_key_file", "/k"),
        ("sslProfile", "displayNameFile", "/m", "uid_name_mapping_file", "/m"),
        ("log", "timestamp", "yes", "include_timestamp", True),
        ("log", "source", "on", "include_source", True),
        ("log", "output", "stdout", "output_file", "stdout"),
        ("authServicePlugin", "saslInitHostname", "realm1", "realm", "realm1"),
    ],
)
def test_deprecated_names_are_accepted(
    section: str, old: str, value: str, field: str, expected: object
) -> None:
    extra = "    module: SERVER\n" if section == "log" else ""
    text = f"{section} {{\n{extra}    {old}: {value}\n}}\n"
    if section == "authServicePlugin":
        text = text.replace("saslInitHostname: realm1",
                            "saslInitHostname: realm1\n    port: 5671\n    host: auth")
    conf = one(text)
    instance = {
        "router": conf.router,
        "listener": conf.listeners[0] if conf.listeners else None,
        "connector": conf.connectors[0] if conf.connectors else None,
        "sslProfile": conf.ssl_profiles[0] if conf.ssl_profiles else None,
        "log": conf.logs[0] if conf.logs else None,
        "authServicePlugin": conf.auth_service_plugins[0] if conf.auth_service_plugins else None,
    }[section]
    assert getattr(instance, field) == expected


def test_deprecated_routing_names_are_accepted() -> None:
    conf = one("""\
linkRoute {
    prefix: q
    dir: out
}
autoLink {
    addr: q
    dir: in
    externalAddr: ext
}
vhost {
    id: example.com
}
""")
    assert conf.link_routes[0].direction is Direction.OUT
    assert conf.auto_links[0] == AutoLinkSpec(
        address="q", direction=Direction.IN, external_address="ext"
    )
    assert conf.vhosts[0].hostname == "example.com"


def test_deprecated_name_logs_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    one("router {\n    helloInterval: 2\n}\n")
    assert "hopd.conf:2:5: attribute 'helloInterval' of section 'router' is deprecated" in (
        caplog.text
    )


@pytest.mark.parametrize("word", ["yes", "YES", "true", "True", "on", "On"])
def test_true_booleans(word: str) -> None:
    assert one(f"listener {{\n    authenticatePeer: {word}\n}}\n").listeners[0].authenticate_peer


@pytest.mark.parametrize("word", ["no", "NO", "false", "FALSE", "off", "Off"])
def test_false_booleans(word: str) -> None:
    assert not one(f"listener {{\n    http: {word}\n}}\n").listeners[0].http


@pytest.mark.parametrize("word", ["ture", "1", "0", "y", ""])
def test_other_words_are_not_booleans(word: str) -> None:
    with pytest.raises(ConfError, match=f"expected a boolean .*, got '{word}'"):
        one(f'listener {{\n    http: "{word}"\n}}\n')
    with pytest.raises(ValueError, match="yes/true/on or no/false/off"):
        parse_boolean(word)


def test_option_strings_also_take_digits_as_booleans() -> None:
    assert parse_boolean("1", digits=True) and not parse_boolean("0", digits=True)
    assert parse_boolean("On", digits=True) and not parse_boolean("FALSE", digits=True)
    with pytest.raises(ValueError, match=r"yes/true/on/1 or no/false/off/0\), got 'ture'"):
        parse_boolean("ture", digits=True)


@pytest.mark.parametrize(
    ("value", "mode"),
    [("0", RouterMode.STANDALONE), ("1", RouterMode.INTERIOR), ("2", RouterMode.EDGE)],
)
def test_enum_accepts_its_index(value: str, mode: RouterMode) -> None:
    assert one(f"router {{\n    mode: {value}\n}}\n").router.mode is mode


def test_integer_accepts_a_sign() -> None:
    assert one("listener {\n    maxFrameSize: +1024\n}\n").listeners[0].max_frame_size == 1024


@pytest.mark.parametrize(("port", "number"), [("amqp", 5672), ("amqps", 5671), ("0", 0)])
def test_listener_port_helpers(port: str, number: int) -> None:
    listener = one(f"listener {{\n    port: {port}\n}}\n").listeners[0]
    assert listener.port == port
    assert listener.port_number == number


def test_connector_port_number() -> None:
    assert ConnectorSection(port="amqps").port_number == 5671
    assert port_number("25672") == 25672


def test_router_id_of_127_characters_is_accepted() -> None:
    assert one("router {\n    id: " + "é" * 127 + "\n}\n").router.id == "é" * 127


def test_log_enable_forms() -> None:
    conf = one("""\
log {
    module: ROUTER_CORE
    enable: trace,debug
}
log {
    module: SERVER
    enable: warning+
}
log {
    module: POLICY
    enable: none
}
log {
    module: AGENT
    enable: INFO; error critical
}
""")
    # Each form the conf accepts means what the router's parser makes of it.
    from router.logs import LEVELS, parse_enable

    names = {number: name for name, number in LEVELS.items()}
    levels = [{names[n] for n in parse_enable(log.enable or "")} for log in conf.logs]
    assert levels == [
        {"trace", "debug"},
        {"warning", "error", "critical"},
        set(),
        {"info", "error", "critical"},
    ]
    assert LogSection(module=LogModule.DEFAULT).enable is None


@pytest.mark.parametrize("module", [m.value for m in LogModule])
def test_every_log_module_is_accepted(module: str) -> None:
    assert one(f"log {{\n    module: {module}\n}}\n").logs[0].module.value == module


def test_role_modes_that_are_allowed() -> None:
    conf = one("""\
router {
    mode: interior
}
listener {
    role: inter-router
}
listener {
    role: edge
    port: 1
}
connector {
    role: route-container
}
""")
    assert [listener.role for listener in conf.listeners] == [Role.INTER_ROUTER, Role.EDGE]
    edge = one("router {\n    mode: edge\n}\nconnector {\n    role: edge\n}\n")
    assert edge.connectors[0].role is Role.EDGE


def test_references_between_sections_resolve() -> None:
    conf = one("""\
sslProfile {
    name: tls
    certFile: /c.pem
    privateKeyFile: /k.pem
    protocols: TLSv1.2 TLSv1.3
    uidFormat: cou
}
authServicePlugin {
    name: auth
    host: auth.example.com
    sslProfile: tls
}
listener {
    sslProfile: tls
    saslPlugin: auth
}
exchange {
    name: ex
    address: ex
    matchMethod: mqtt
}
binding {
    exchangeName: ex
    nextHopAddress: q
}
""")
    assert conf.listeners[0].sasl_plugin == "auth"
    assert conf.exchanges[0].match_method is MatchMethod.MQTT


def test_unknown_group_setting_is_a_warning_with_a_suggestion(
        caplog: pytest.LogCaptureFixture) -> None:
    one('vhost {\n    hostname: h\n    groups: {"g": {"maxSender": 1}}\n}\n')
    assert [r.getMessage() for r in caplog.records] == [
        "hopd.conf:3:20: user group 'g' option 'maxSender' is ignored "
        "(did you mean 'maxSenders'?)"
    ]


def test_open_properties_must_be_a_map() -> None:
    with pytest.raises(ConfError, match="expected a JSON map"):
        one("listener {\n    openProperties: 5\n}\n")


def test_address_sections_become_address_specs() -> None:
    conf = one("""\
address {
    name: waypoint-q
    prefix: q
    waypoint: yes
    priority: 4
}
""")
    assert conf.addresses == (
        AddressSpec(name="waypoint-q", prefix="q", waypoint=True, priority=4),
    )
    assert conf.addresses[0].phases == (0, 1)


@pytest.mark.parametrize("entity", ENTITY_TYPES, ids=lambda e: e.conf_name)
def test_python_field_names_are_the_snake_case_of_conf_names(entity: EntityType) -> None:
    for field in schema_fields(entity.cls):
        assert field.field.name == snake_case(field.schema.conf_name)
        assert field.schema.doc and not field.schema.doc.endswith(".")
