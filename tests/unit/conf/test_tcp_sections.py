"""The tcpListener and tcpConnector sections: read as qdrouterd 1.18 wrote
them, and each mistake reported at its line and column (docs/tcp.md)."""

from __future__ import annotations

import textwrap

import pytest

from conf import ConfError, TcpConnectorSection, TcpListenerSection, parse, render


def _diagnostics(text: str) -> list[str]:
    with pytest.raises(ConfError) as info:
        parse(textwrap.dedent(text), "hopd.conf")
    return [str(d) for d in info.value.diagnostics]


QDROUTERD_118 = """\
    tcpListener {
        host: 0.0.0.0
        port: 9090
        address: es
        siteId: site-a
    }
    tcpConnector {
        name: es-1
        host: es.example.com
        port: 9200
        address: es
    }
    """


def test_qdrouterd_118_sections_are_read_and_render_back() -> None:
    conf = parse(textwrap.dedent(QDROUTERD_118), "hopd.conf")
    assert conf.tcp_listeners == (TcpListenerSection(address="es", port="9090",
                                                     site_id="site-a"),)
    assert conf.tcp_connectors == (TcpConnectorSection(name="es-1", address="es",
                                                       host="es.example.com", port="9200"),)
    assert parse(render(conf), "again.conf") == conf


def test_a_listener_defaults_to_every_interface_and_may_take_a_free_port() -> None:
    conf = parse("tcpListener {\n    port: 0\n    address: a\n}\n", "hopd.conf")
    assert (conf.tcp_listeners[0].host, conf.tcp_listeners[0].port) == ("0.0.0.0", "0")


def test_a_connector_needs_a_host_and_a_real_port() -> None:
    assert _diagnostics("""\
        tcpConnector {
            port: 0
            address: a
        }
        """) == [
        "hopd.conf:1:1: missing mandatory attribute 'host' in section 'tcpConnector'",
        "hopd.conf:2:11: invalid value for 'port' in section 'tcpConnector': "
        "expected a port number 1..65535, got '0'",
    ]


def test_service_names_and_empty_addresses_are_refused() -> None:
    errors = _diagnostics("""\
        tcpListener {
            port: http
            address: a
        }
        tcpConnector {
            host: h
            port: 80
            address: ""
        }
        """)
    assert errors[0] == ("hopd.conf:2:11: invalid value for 'port' in section 'tcpListener': "
                         "expected a port number 0..65535, got 'http'")
    assert errors[1].startswith("hopd.conf:8:") and "must not be empty" in errors[1]
    assert len(errors) == 2
