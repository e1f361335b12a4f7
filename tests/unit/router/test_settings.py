"""Listener and connector settings: the SASL and TLS checks made before a
port opens."""

from __future__ import annotations

from typing import Any

import pytest
from proton import SASL

import conf
from router.adapter.settings import SaslError, connector_settings, listener_settings
from router.adapter.tls import TlsError
from router.core import Role


def listener(**attributes: Any) -> conf.ListenerSection:
    return conf.ListenerSection(host="127.0.0.1", port="5672", **attributes)


def test_plain_needs_a_proton_built_with_cyrus_sasl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SASL, "extended", staticmethod(lambda: False))
    with pytest.raises(SaslError, match="SASL PLAIN needs python-qpid-proton built with "
                                        "Cyrus SASL"):
        listener_settings(listener(sasl_mechanisms="ANONYMOUS PLAIN"))
    assert listener_settings(listener(sasl_mechanisms="ANONYMOUS EXTERNAL")).sasl_mechanisms \
        == "ANONYMOUS EXTERNAL", "proton serves these itself"


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


def test_a_connection_role_read_from_the_conf_is_the_core_s_role() -> None:
    cfg = conf.parse("connector {\n    role: route-container\n}\n", "hopd.conf")
    [section] = cfg.connectors
    assert section.role is Role.ROUTE_CONTAINER, "one Role, declared in addressing"
    assert connector_settings(section).role is Role.ROUTE_CONTAINER
