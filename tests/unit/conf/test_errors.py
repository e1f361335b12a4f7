"""Each kind of bad configuration gives one diagnostic at the exact line and column."""

from __future__ import annotations

import textwrap

import pytest

from conf import ConfError, Diagnostic, parse


def diagnostics(text: str, filename: str = "hopd.conf") -> list[str]:
    with pytest.raises(ConfError) as info:
        parse(textwrap.dedent(text), filename)
    return [str(d) for d in info.value.diagnostics]


def test_unknown_section_suggests_the_nearest_name() -> None:
    assert diagnostics("""\
        listner {
            port: 5672
        }
        """) == ["hopd.conf:1:1: unknown section 'listner' (did you mean 'listener'?)"]


def test_unknown_section_without_a_close_name_has_no_suggestion() -> None:
    assert diagnostics("frobnicator {\n}\n") == ["hopd.conf:1:1: unknown section 'frobnicator'"]


def test_section_spelled_with_its_management_type_is_unknown() -> None:
    assert diagnostics("router.config.address {\n    prefix: a\n}\n") == [
        "hopd.conf:1:1: unknown section 'router.config.address'"
    ]


def test_unknown_attribute_suggests_the_nearest_name() -> None:
    assert diagnostics("""\
        router {
            mode: standalone
        }
        listener {
            prot: 5672
        }
        """) == [
        "hopd.conf:5:5: unknown attribute 'prot' in section 'listener' (did you mean 'port'?)"
    ]


def test_bad_integer_points_at_the_value() -> None:
    assert diagnostics("listener {\n    maxFrameSize: 1k\n}\n") == [
        "hopd.conf:2:19: invalid value for 'maxFrameSize' in section 'listener': "
        "expected an integer, got '1k'"
    ]


def test_bad_boolean_lists_the_accepted_words() -> None:
    assert diagnostics("listener {\n    authenticatePeer: maybe\n}\n") == [
        "hopd.conf:2:23: invalid value for 'authenticatePeer' in section 'listener': "
        "expected a boolean (yes/true/on or no/false/off), got 'maybe'"
    ]


def test_bad_enum_lists_the_choices() -> None:
    assert diagnostics("router {\n    mode: bogus\n}\n") == [
        "hopd.conf:2:11: invalid value for 'mode' in section 'router': expected one of "
        "'standalone', 'interior', 'edge' (or an index 0..2), got 'bogus'"
    ]


def test_enum_index_out_of_range_is_refused() -> None:
    assert diagnostics("router {\n    mode: 3\n}\n") == [
        "hopd.conf:2:11: invalid value for 'mode' in section 'router': expected one of "
        "'standalone', 'interior', 'edge' (or an index 0..2), got '3'"
    ]


def test_value_out_of_range_gives_the_range() -> None:
    assert diagnostics("listener {\n    maxFrameSize: 4294967296\n}\n") == [
        "hopd.conf:2:19: invalid value for 'maxFrameSize' in section 'listener': "
        "expected an integer between 0 and 4294967295, got 4294967296"
    ]


def test_a_frame_size_below_the_amqp_minimum_is_raised_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    # qdrouterd runs such a file (its system_tests_protocol_settings give 2).
    conf = parse("listener {\n    maxFrameSize: 2\n}\n", "hopd.conf")
    assert conf.listeners[0].max_frame_size == 512
    assert caplog.messages == [
        "hopd.conf:2:19: maxFrameSize 2 is taken as 512, the smallest max-frame-size AMQP "
        "allows (AMQP 1.0 section 2.7.1)"]


def test_port_out_of_range_is_refused() -> None:
    assert diagnostics("listener {\n    port: 65536\n}\n") == [
        "hopd.conf:2:11: invalid value for 'port' in section 'listener': "
        "expected a port number 0..65535, 'amqp' or 'amqps', got '65536'"
    ]


def test_connector_port_zero_is_refused() -> None:
    assert diagnostics("connector {\n    port: 0\n}\n") == [
        "hopd.conf:2:11: invalid value for 'port' in section 'connector': "
        "expected a port number 1..65535, 'amqp' or 'amqps', got '0'"
    ]


def test_missing_mandatory_attribute_points_at_the_section_header() -> None:
    assert diagnostics("""\
        router {
        }

          linkRoute {
            prefix: queue
        }
        """) == ["hopd.conf:4:3: missing mandatory attribute 'direction' in section 'linkRoute'"]


def test_prefix_and_pattern_together_blame_the_later_one() -> None:
    assert diagnostics("""\
        address {
            prefix: a
            pattern: b.*
        }
        """) == [
        "hopd.conf:3:5: invalid 'address' section: "
        "cannot specify both a 'prefix' and a 'pattern' attribute"
    ]


def test_address_without_prefix_or_pattern_blames_the_header() -> None:
    assert diagnostics("address {\n    distribution: closest\n}\n") == [
        "hopd.conf:1:1: invalid 'address' section: "
        "either a 'prefix' or a 'pattern' attribute must be provided"
    ]


def test_bad_phase_is_an_error_not_a_warning() -> None:
    assert diagnostics("address {\n    prefix: a\n    ingressPhase: 10\n}\n") == [
        "hopd.conf:3:19: invalid value for 'ingressPhase' in section 'address': "
        "expected an integer between 0 and 9, got 10"
    ]


def test_bad_priority_is_an_error() -> None:
    assert diagnostics("address {\n    prefix: a\n    priority: -1\n}\n") == [
        "hopd.conf:3:15: invalid value for 'priority' in section 'address': "
        "expected an integer between 0 and 9, got -1"
    ]


def test_connection_and_container_id_together_are_refused() -> None:
    assert diagnostics("""\
        linkRoute {
            prefix: q
            direction: in
            containerId: broker
            connection: to-broker
        }
        """) == [
        "hopd.conf:5:5: invalid 'linkRoute' section: "
        "Both connection and containerId cannot be specified: give 'connection' or "
        "'containerId', not both"
    ]


def test_auto_link_connection_and_container_id_together_are_refused() -> None:
    assert diagnostics("""\
        autoLink {
            connection: to-broker
            address: q
            direction: out
            containerId: broker
        }
        """) == [
        "hopd.conf:5:5: invalid 'autoLink' section: "
        "Both connection and containerId cannot be specified: give 'connection' or "
        "'containerId', not both"
    ]


def test_missing_direction_of_an_auto_link_is_reported() -> None:
    assert diagnostics("autoLink {\n    address: q\n}\n") == [
        "hopd.conf:1:1: missing mandatory attribute 'direction' in section 'autoLink'"
    ]


def test_fallback_with_waypoint_is_refused_at_the_header() -> None:
    assert diagnostics("address {\n  prefix: a\n  waypoint: yes\n  enableFallback: yes\n}\n") == [
        "hopd.conf:1:1: invalid 'address' section: "
        "fallback cannot be specified with waypoint or non-zero ingress and egress phases"
    ]


def test_second_router_section_is_a_duplicate_singleton() -> None:
    assert diagnostics("router {\n    id: A\n}\nrouter {\n    id: B\n}\n") == [
        "hopd.conf:4:1: duplicate 'router' section: only one is allowed (the first is at 1:1)"
    ]


def test_second_policy_section_is_a_duplicate_singleton() -> None:
    assert diagnostics("policy {\n}\npolicy {\n}\n") == [
        "hopd.conf:3:1: duplicate 'policy' section: only one is allowed (the first is at 1:1)"
    ]


def test_duplicate_name_within_a_type_is_refused() -> None:
    assert diagnostics("""\
        listener {
            name: public
        }
        connector {
            name: public
        }
        listener {
            name: public
            port: 5673
        }
        """) == ["hopd.conf:8:5: duplicate name 'public' in section 'listener' (first used at 2:5)"]


def test_duplicate_log_module_is_refused() -> None:
    assert diagnostics("log {\n module: SERVER\n}\nlog {\n module: SERVER\n}\n") == [
        "hopd.conf:5:2: duplicate module 'SERVER' in section 'log' (first used at 2:2)"
    ]


def test_unterminated_section_points_at_its_header() -> None:
    assert diagnostics("router {\n    id: A\n}\nlistener {\n    port: 5672\n") == [
        "hopd.conf:4:1: section 'listener' is not closed (missing '}')"
    ]


def test_section_opened_inside_another_reports_the_missing_brace() -> None:
    assert diagnostics("listener {\n    port: 5672\nrouter {\n    id: A\n}\n") == [
        "hopd.conf:3:1: section 'router' starts inside section 'listener' opened at 1:1 "
        "(missing '}' before this line)"
    ]


def test_garbage_line_is_a_syntax_error() -> None:
    assert diagnostics("router {\n    this is garbage\n}\n") == [
        "hopd.conf:2:10: syntax error: expected ':' or '{', got 'is'"
    ]


def test_name_alone_on_a_line_is_a_syntax_error_at_its_end() -> None:
    assert diagnostics("router\n{\n}\n") == [
        "hopd.conf:1:7: syntax error: expected ':' or '{', got end of line",
        "hopd.conf:2:1: syntax error: expected a name or '}', got '{'",
        "hopd.conf:3:1: unmatched '}' outside any section",
    ]


def test_one_line_section_is_refused() -> None:
    assert diagnostics("router { mode: interior }\n") == [
        "hopd.conf:1:10: syntax error: expected end of line, got 'mode'"
    ]


def test_unmatched_closing_brace() -> None:
    assert diagnostics("router {\n}\n  }\n") == ["hopd.conf:3:3: unmatched '}' outside any section"]


def test_attribute_outside_a_section() -> None:
    assert diagnostics("mode: interior\nrouter {\n}\n") == [
        "hopd.conf:1:1: attribute 'mode' outside any section "
        "(expected a section header such as 'listener {')"
    ]


def test_old_and_new_attribute_names_together_are_refused() -> None:
    assert diagnostics("""\
        router {
            helloIntervalSeconds: 2
            helloInterval: 3
        }
        """) == [
        "hopd.conf:3:5: both 'helloInterval' and 'helloIntervalSeconds' given in section "
        "'router' ('helloInterval' is the deprecated name of 'helloIntervalSeconds'; keep one)"
    ]


def test_same_attribute_twice_is_refused() -> None:
    assert diagnostics("listener {\n    port: 1\n    port: 2\n}\n") == [
        "hopd.conf:3:5: attribute 'port' given twice in section 'listener' (first at 2:5)"
    ]


def test_reserved_open_properties_key_points_at_the_key() -> None:
    assert diagnostics("""\
        listener {
            openProperties: {
                "product": "mine"
            }
        }
        """) == [
        "hopd.conf:3:9: invalid value for 'openProperties' in section 'listener': "
        "reserved key 'product' is not allowed in openProperties"
    ]


@pytest.mark.parametrize("key", ["qd.foo", "x-opt-qd.bar", "scheme", "hostname", "port"])
def test_reserved_open_properties_keys(key: str) -> None:
    (message,) = diagnostics(f'connector {{\n    openProperties: {{"{key}": 1}}\n}}\n')
    assert message.endswith(f"reserved key {key!r} is not allowed in openProperties")


def test_open_properties_not_allowed_for_inter_router_role() -> None:
    assert diagnostics("""\
        router {
            mode: interior
        }
        listener {
            role: inter-router
            openProperties: {"a": 1}
        }
        """) == [
        "hopd.conf:6:5: section 'listener': openProperties not allowed for role 'inter-router'"
    ]


def test_standalone_router_with_inter_router_listener_is_refused() -> None:
    assert diagnostics("""\
        router {
            mode: standalone
        }
        listener {
            role: inter-router
        }
        """) == [
        "hopd.conf:5:5: role='standalone' not allowed to connect to or accept connections "
        "from other routers. (a listener with role 'inter-router' on a standalone router)"
    ]


def test_absent_router_section_means_standalone_for_role_checks() -> None:
    (message,) = diagnostics("connector {\n    role: edge\n}\n")
    assert message.endswith("(a connector with role 'edge' on a standalone router)")


def test_edge_router_with_inter_router_connector_is_refused() -> None:
    assert diagnostics("router {\n mode: edge\n}\nconnector {\n role: inter-router\n}\n") == [
        "hopd.conf:5:2: role='inter-router' only allowed with router mode='interior' "
        "(a connector on a router in mode 'edge')"
    ]


def test_edge_router_with_edge_listener_is_refused() -> None:
    assert diagnostics("router {\n mode: edge\n}\nlistener {\n role: edge\n}\n") == [
        "hopd.conf:5:2: role='edge' only allowed with router mode='interior' (a listener "
        "with role 'edge' on an edge router: edges connect to interiors)"
    ]


def test_router_id_with_a_space_is_refused() -> None:
    assert diagnostics("router {\n    id: my router\n}\n") == [
        "hopd.conf:2:9: invalid value for 'id' in section 'router': "
        "character ' ' (U+0020) is not allowed in a router id"
    ]


def test_router_id_with_a_control_character_is_refused() -> None:
    (message,) = diagnostics('router {\n    id: "a\\u0007b"\n}\n')
    assert message.endswith("character '\\x07' (U+0007) is not allowed in a router id")


def test_router_id_longer_than_127_characters_is_refused() -> None:
    assert diagnostics("router {\n    id: " + "x" * 128 + "\n}\n") == [
        "hopd.conf:2:9: invalid value for 'id' in section 'router': "
        "a router id of 128 characters exceeds the maximum allowed length, 127"
    ]


def test_identity_cannot_be_set() -> None:
    assert diagnostics("listener {\n    identity: 7\n}\n") == [
        "hopd.conf:2:5: attribute 'identity' cannot be set in section 'listener'"
    ]


def test_console_section_is_accepted_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    conf = parse("console {\n    proxy: /bin/p\n    home: /srv\n}\n", "hopd.conf")
    assert conf.listeners == ()
    assert caplog.messages == [
        "hopd.conf:1:1: section 'console' is accepted and ignored: "
        "deprecated in qdrouterd; Hop's console is served by listeners with http: yes "
        "(their console attribute)"
    ]


def test_console_section_is_still_checked() -> None:
    assert diagnostics("console {\n    home: /srv\n}\n") == [
        "hopd.conf:1:1: missing mandatory attribute 'proxy' in section 'console'"
    ]


def test_ignored_attribute_is_accepted_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    conf = parse("router {\n    mode: interior\n    area: 7\n}\n", "hopd.conf")
    assert conf.router.area == "7"
    assert caplog.messages == [
        "hopd.conf:3:5: attribute 'area' of section 'router' is accepted and ignored: "
        "qdrouterd ignores it too and always uses area 0"
    ]


def test_undefined_ssl_profile_is_refused_with_a_suggestion() -> None:
    assert diagnostics("""\
        sslProfile {
            name: server-tls
        }
        listener {
            sslProfile: server-tsl
        }
        """) == [
        "hopd.conf:5:5: sslProfile 'server-tsl' names no sslProfile section "
        "(did you mean 'server-tls'?)"
    ]


def test_binding_to_an_unknown_exchange_is_refused() -> None:
    assert diagnostics("binding {\n exchangeName: ex\n nextHopAddress: q\n}\n") == [
        "hopd.conf:2:2: exchangeName 'ex' names no exchange section"
    ]


def test_log_level_prefix_is_refused_with_a_suggestion() -> None:
    assert diagnostics("log {\n    module: DEFAULT\n    enable: warn+\n}\n") == [
        "hopd.conf:3:13: invalid value for 'enable' in section 'log': 'warn+' is not a log "
        "level; expected 'none' or one of trace, debug, info, notice, warning, error, "
        "critical, optionally followed by '+' (did you mean 'warning'?)"
    ]


def test_log_none_cannot_be_combined() -> None:
    (message,) = diagnostics("log {\n    module: DEFAULT\n    enable: none,info\n}\n")
    assert message.endswith("'none' cannot be combined with other log levels")


def test_unknown_log_module_is_refused() -> None:
    (message,) = diagnostics("log {\n    module: ROUTER_NODE\n}\n")
    assert message.startswith("hopd.conf:2:13: invalid value for 'module' in section 'log'")


def test_all_errors_of_a_file_are_reported_together_in_file_order() -> None:
    assert diagnostics("""\
        router {
            mode: interior
            id: two words
        }
        listener {
            prot: 5672
            maxFrameSize: big
        }
        garbage here
        address {
            prefix: a
            pattern: b
        }
        """) == [
        "hopd.conf:3:9: invalid value for 'id' in section 'router': "
        "character ' ' (U+0020) is not allowed in a router id",
        "hopd.conf:6:5: unknown attribute 'prot' in section 'listener' (did you mean 'port'?)",
        "hopd.conf:7:19: invalid value for 'maxFrameSize' in section 'listener': "
        "expected an integer, got 'big'",
        "hopd.conf:9:9: syntax error: expected ':' or '{', got 'here'",
        "hopd.conf:12:5: invalid 'address' section: "
        "cannot specify both a 'prefix' and a 'pattern' attribute",
    ]


def test_conf_error_carries_structured_diagnostics() -> None:
    with pytest.raises(ConfError) as info:
        parse("listener {\n    prot: 1\n}\n", "x.conf")
    assert info.value.diagnostics == [
        Diagnostic(
            filename="x.conf",
            line=2,
            column=5,
            message="unknown attribute 'prot' in section 'listener' (did you mean 'port'?)",
        )
    ]
    assert str(info.value) == str(info.value.diagnostics[0])


def test_empty_text_is_a_standalone_router_without_listeners() -> None:
    conf = parse("# only a comment\n\n", "hopd.conf")
    assert conf.router.mode.value == "standalone"
    assert conf.listeners == () and conf.connectors == ()


def test_an_address_repeating_an_earlier_prefix_is_skipped_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    conf = parse("address {\n    prefix: m\n    distribution: multicast\n}\n"
                 "address {\n    pattern: m/#\n    distribution: closest\n}\n"
                 "address {\n    prefix: n\n}\n", "hopd.conf")
    assert [(a.prefix, a.pattern) for a in conf.addresses] == [("m", None), ("n", None)]
    assert conf.addresses[0].distribution.value == "multicast", "the first one stays"
    assert caplog.messages == [
        "hopd.conf:5:1: address section ignored, as qdrouterd ignores it: "
        "already exists: pattern 'm/#' (pattern 'm/#')"
    ]


def test_exchanges_and_bindings_are_checked_together_at_their_sections() -> None:
    """What the router would refuse of an exchange or a binding stops the
    file at the section or attribute that says it (docs/routing.md#exchanges)."""
    assert diagnostics("""\
        exchange {
            address: nameless
        }
        exchange {
            name: one
            address: X
            matchMethod: mqtt
        }
        exchange {
            name: two
            address: X
            phase: 1
        }
        binding {
            exchangeName: one
            bindingKey: a/#/b
            nextHopAddress: q
        }
        binding {
            exchangeName: one
            bindingKey: a/+
            nextHopAddress: X
        }
        """) == [
        "hopd.conf:1:1: invalid 'exchange' section: an exchange needs a name",
        "hopd.conf:11:5: invalid 'exchange' section: duplicate exchange address 'X': "
        "exchange 'one' has it (at phase 0)",
        "hopd.conf:16:5: invalid 'binding' section: binding key 'a/#/b': in an MQTT key, '#' "
        "may only be the last token",
        "hopd.conf:22:5: invalid 'binding' section: the binding of exchange 'one' would send "
        "its messages back to 'X' (phase 0) for ever",
    ]


def test_an_auth_service_plugin_needs_a_host_or_a_host_and_port() -> None:
    assert diagnostics("authServicePlugin {\n    name: a\n}\n") == [
        "hopd.conf:1:1: section 'authServicePlugin': an authServicePlugin needs the "
        "service's host (or the deprecated authService, host:port)"]
    assert diagnostics("authServicePlugin {\n    name: a\n    authService: nowhere\n}\n") == [
        "hopd.conf:3:5: section 'authServicePlugin': authService must be host:port, got "
        "'nowhere'"]


def test_the_deprecated_auth_service_gives_the_host_and_port() -> None:
    conf = parse("authServicePlugin {\n    name: a\n    authService: auth.example:5671\n}\n",
                 "hopd.conf")
    assert conf.auth_service_plugins[0].endpoint() == ("auth.example", 5671)
    conf = parse("authServicePlugin {\n    name: a\n    host: h\n    port: amqps\n}\n",
                 "hopd.conf")
    assert conf.auth_service_plugins[0].endpoint() == ("h", 5671)
