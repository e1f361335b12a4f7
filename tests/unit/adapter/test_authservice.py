"""What delegated authentication reads of an authentication service's OPEN,
and which of its mechanisms a client is offered
(docs/security.md#delegated-authentication)."""

from __future__ import annotations

from proton import UNDESCRIBED, Array, Data, symbol

from router.adapter.connections.authservice import authz_of, offered
from router.core.policy import AddressAuthz


def test_the_user_and_the_permissions_come_from_the_services_open_properties() -> None:
    properties = {
        symbol("authenticated-identity"): {"sub": "guest"},
        symbol("address-authz"): {
            "foo": Array(UNDESCRIBED, Data.STRING, "send", "recv"),
            "news.*": Array(UNDESCRIBED, Data.STRING, "recv"),
            "drop": Array(UNDESCRIBED, Data.STRING, "delete"),
            7: Array(UNDESCRIBED, Data.STRING, "send"),
        },
    }
    user, authz = authz_of(properties)
    assert user == "guest"
    assert authz == AddressAuthz(sources=("foo", "news.*"), targets=("foo",))


def test_an_identity_given_as_text_and_no_permissions_restrict_nothing() -> None:
    assert authz_of({symbol("authenticated-identity"): "admin"}) == ("admin", None)
    assert authz_of(None) == (None, None)
    user, authz = authz_of({symbol("address-authz"): {}})
    assert (user, authz) == (None, AddressAuthz())


def test_passwords_in_clear_are_offered_only_over_tls_or_where_allowed() -> None:
    service = "SCRAM-SHA-256 PLAIN LOGIN ANONYMOUS"
    assert offered(service, encrypted=False, insecure_allowed=False) == "SCRAM-SHA-256 ANONYMOUS"
    assert offered(service, encrypted=True, insecure_allowed=False) == service
    assert offered(service, encrypted=False, insecure_allowed=True) == service
    assert offered("PLAIN", encrypted=False, insecure_allowed=False) == ""
