"""Who asks on an HTTP listener (docs/operations.md#the-web-console): Basic
credentials decoded, a client certificate's subject, logins checked by the
listener's SASL and remembered for a while, refusals never remembered."""

from __future__ import annotations

import base64

import conf
from router.adapter.connections.settings import ListenerSettings, listener_settings
from router.adapter.http.auth import (
    REMEMBER_S,
    Credentials,
    HttpAuth,
    basic_credentials,
    certificate_subject,
    plain_login,
)


def settings(**attributes: object) -> ListenerSettings:
    section = conf.build_section("listener", {"port": "0", "http": True, **attributes})
    assert isinstance(section, conf.ListenerSection)
    return listener_settings(section)


def test_basic_credentials_are_decoded_and_anything_else_is_none() -> None:
    token = base64.b64encode("alice@hop:pa:ss wörd".encode()).decode()
    assert basic_credentials(f"Basic {token}".encode()) == Credentials("alice@hop", "pa:ss wörd")
    assert basic_credentials(f"basic  {token} ".encode()) is not None, "scheme in any case"
    encoded = [b"Basic " + base64.b64encode(text) for text in (b"nocolon", b":nobody", b"\xff:x")]
    for header in (None, b"Bearer abc", b"Basic !!!", *encoded):
        assert basic_credentials(header) is None, header


def test_a_certificate_subject_is_written_most_specific_first() -> None:
    certificate: dict[str, object] = {"subject": (
        (("countryName", "DE"),), (("organizationName", "Hop"),), (("commonName", "app"),))}
    assert certificate_subject(certificate) == "CN=app,O=Hop,C=DE"
    assert certificate_subject(None) is None and certificate_subject({}) is None


def test_logins_are_checked_once_and_remembered_for_a_while_refusals_never() -> None:
    checks: list[str] = []
    now = [0.0]

    def check(_settings: ListenerSettings, credentials: Credentials) -> bool:
        checks.append(credentials.password)
        return credentials.password == "right"

    auth = HttpAuth(check=check, clock=lambda: now[0])
    listener = settings(saslMechanisms="PLAIN", authenticatePeer=True)
    assert auth.login(listener, Credentials("alice", "right"))
    assert auth.login(listener, Credentials("alice", "right"))
    assert not auth.login(listener, Credentials("alice", "wrong"))
    assert not auth.login(listener, Credentials("alice", "wrong"))
    assert checks == ["right", "wrong", "wrong"]
    now[0] = REMEMBER_S + 1
    assert auth.login(listener, Credentials("alice", "right"))
    assert checks[-1] == "right", "checked again once the time is up"


def test_a_password_needs_plain_and_tls_unless_the_listener_allows_it_in_clear() -> None:
    plain = settings(saslMechanisms="PLAIN ANONYMOUS", authenticatePeer=True)
    assert HttpAuth.basic_allowed(plain, encrypted=True)
    assert not HttpAuth.basic_allowed(plain, encrypted=False)
    clear = settings(saslMechanisms="PLAIN", authenticatePeer=True,
                     allowInsecureMechanisms=True)
    assert HttpAuth.basic_allowed(clear, encrypted=False)
    assert not HttpAuth.basic_allowed(settings(saslMechanisms="ANONYMOUS"), encrypted=True)


def test_without_a_user_database_no_password_logs_in() -> None:
    assert not plain_login(settings(saslMechanisms="PLAIN"), Credentials("alice", "anything"))
