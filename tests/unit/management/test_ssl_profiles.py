"""The ``sslProfile`` entities over a store of loaded profiles: CREATE loads,
UPDATE changes the attributes and loads again (certificate rotation), DELETE
refuses a profile in use; a profile that does not load changes nothing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

import conf
from router.management import PREFIX, SCHEMA, Agent, ManagementError, Request, SslProfiles
from router.management.agent import Response

SSL_PROFILE = PREFIX + "sslProfile"


class Profiles:
    """Loaded profiles in memory; a certFile under /missing does not load."""

    def __init__(self, *sections: conf.SslProfileSection) -> None:
        self.loaded = {section.name or "": section for section in sections}
        self.loads: list[conf.SslProfileSection] = []
        self.used_by: dict[str, list[str]] = {}

    def sections(self) -> Iterable[conf.SslProfileSection]:
        return list(self.loaded.values())

    def load(self, section: conf.SslProfileSection) -> None:
        self.loads.append(section)
        if (section.cert_file or "").startswith("/missing"):
            raise ManagementError(400, f"sslProfile {section.name!r}: cannot read certFile "
                                       f"{section.cert_file}: No such file or directory")
        self.loaded[section.name or ""] = section

    def users(self, name: str) -> list[str]:
        return self.used_by.get(name, [])

    def remove(self, name: str) -> None:
        del self.loaded[name]


TLS = conf.SslProfileSection(name="tls", cert_file="/etc/hop/cert.pem",
                             private_key_file="/etc/hop/key.pem", ca_cert_file="/etc/hop/ca.pem",
                             password="pass:secret")


def agent(profiles: Profiles) -> Agent:
    return Agent({"sslProfile": SslProfiles(profiles)})


def call(a: Agent, body: Any = None, **properties: Any) -> Response:
    return a.handle(Request(properties=properties, body=body, reply_to="reply"))


def update(a: Agent, body: Any, **properties: Any) -> Response:
    return call(a, body, operation="UPDATE", type=SSL_PROFILE, **properties)


def test_create_loads_the_profile_and_never_shows_its_password() -> None:
    profiles = Profiles()
    created = call(agent(profiles), {"certFile": "/c.pem", "password": "pass:x"},
                   operation="CREATE", type=SSL_PROFILE, name="made")
    assert created.status == 201
    assert isinstance(created.body, dict)
    assert (created.body["identity"], created.body["certFile"], created.body["password"]) == \
        ("sslProfile/made", "/c.pem", None)
    assert profiles.loaded["made"].password == "pass:x"


def test_a_created_profile_that_does_not_load_is_not_kept() -> None:
    profiles = Profiles()
    refused = call(agent(profiles), {"certFile": "/missing/c.pem"}, operation="CREATE",
                   type=SSL_PROFILE, name="made")
    assert (refused.status, refused.description) == (
        400, "sslProfile 'made': cannot read certFile /missing/c.pem: No such file or directory")
    assert profiles.loaded == {}


def test_update_changes_the_given_attributes_and_loads_the_profile_again() -> None:
    profiles = Profiles(TLS)
    updated = update(agent(profiles), {"certFile": "/new/cert.pem",
                                       "privateKeyFile": "/new/key.pem"}, name="tls")
    assert updated.status == 200
    assert profiles.loaded["tls"] == conf.SslProfileSection(
        name="tls", cert_file="/new/cert.pem", private_key_file="/new/key.pem",
        ca_cert_file="/etc/hop/ca.pem", password="pass:secret")
    assert isinstance(updated.body, dict) and updated.body["password"] is None


def test_update_with_no_attributes_reads_the_same_files_again() -> None:
    profiles = Profiles(TLS)
    assert update(agent(profiles), {}, identity="sslProfile/tls").status == 200
    assert profiles.loads == [TLS]


def test_an_update_that_does_not_load_leaves_the_profile_as_it_was() -> None:
    profiles = Profiles(TLS)
    a = agent(profiles)
    refused = update(a, {"certFile": "/missing/cert.pem"}, name="tls")
    assert refused.status == 400 and "/missing/cert.pem" in refused.description
    assert profiles.loaded == {"tls": TLS}
    read = call(a, operation="READ", type=SSL_PROFILE, name="tls")
    assert isinstance(read.body, dict) and read.body["certFile"] == "/etc/hop/cert.pem"


def test_update_values_are_checked_as_the_conf_file_checks_them() -> None:
    profiles = Profiles(TLS)
    refused = update(agent(profiles), {"protocols": "TLSv9"}, name="tls")
    assert refused.status == 400
    assert refused.description.startswith(
        "invalid value for 'protocols' in section 'sslProfile': expected TLS versions")
    assert profiles.loads == []


def test_a_null_password_keeps_it_and_other_nulls_reset_to_the_default() -> None:
    """A row read and sent back shows no password: sending it back keeps it."""
    profiles = Profiles(TLS)
    a = agent(profiles)
    read = call(a, operation="READ", type=SSL_PROFILE, name="tls")
    assert update(a, read.body, name="tls").status == 200
    assert profiles.loaded["tls"] == TLS
    assert update(a, {"caCertFile": None, "password": None}, name="tls").status == 200
    assert profiles.loaded["tls"].ca_cert_file is None
    assert profiles.loaded["tls"].password == "pass:secret"


def test_update_takes_the_deprecated_names_the_conf_takes() -> None:
    profiles = Profiles(TLS)
    a = agent(profiles)
    assert update(a, {"keyFile": "/new/key.pem", "certDb": "/new/ca.pem"}, name="tls"
                  ).status == 200
    assert (profiles.loaded["tls"].private_key_file, profiles.loaded["tls"].ca_cert_file) == \
        ("/new/key.pem", "/new/ca.pem")
    both = update(a, {"keyFile": "/a.pem", "privateKeyFile": "/b.pem"}, name="tls")
    assert (both.status, both.description) == (
        400, "Both 'keyFile' and 'privateKeyFile' given ('keyFile' is the deprecated name of "
             "'privateKeyFile'; keep one)")


def test_a_profile_in_use_is_not_deleted() -> None:
    profiles = Profiles(TLS)
    profiles.used_by["tls"] = ["listener 'secure'", "connector 'core'"]
    a = agent(profiles)
    refused = call(a, operation="DELETE", type=SSL_PROFILE, name="tls")
    assert (refused.status, refused.description) == (
        400, "sslProfile 'tls' is used by listener 'secure', connector 'core'; delete them "
             "first")
    assert "tls" in profiles.loaded
    profiles.used_by.clear()
    assert call(a, operation="DELETE", type=SSL_PROFILE, name="tls").status == 204
    assert profiles.loaded == {}


def test_every_ssl_profile_attribute_may_be_updated() -> None:
    entity_type = SCHEMA.types["sslProfile"]
    assert SCHEMA.operations(entity_type) == ["CREATE", "UPDATE", "DELETE", "READ"]
    assert all(a.update for a in entity_type.attributes)


def test_a_profile_the_store_does_not_have_is_not_found() -> None:
    source = SslProfiles(Profiles())
    with pytest.raises(ManagementError, match="No entity with identity=sslProfile/gone"):
        source.update({"identity": "sslProfile/gone"}, {})
