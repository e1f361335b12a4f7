"""TLS for listeners and connectors: ``sslProfile`` sections as proton SSL domains.

Owns reading an ``sslProfile`` (certificate, key and its password, trusted
CAs, ciphers, protocol versions) into the server and client domains the
engine wraps transports with, and checking it all whenever a profile is
read (at start-up, on SIGHUP, on a management CREATE or UPDATE): a missing
or unreadable file, a key that does not load (a wrong password) or a bad
cipher list is an error naming the profile and the file, never a silent
fallback to plain text (qdrouterd only logs those and carries on).
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
from proton import SSL, SSLDomain, SSLException

import conf
from router.adapter.pn import lib

__all__ = ["SecretError", "TlsError", "TlsProfile", "load_profiles", "secret_value"]

#: sslProfile ``protocols`` names as Python's ``ssl`` versions.
_TLS_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                 "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class TlsError(Exception):
    """An ``sslProfile`` that cannot be used; the message names it and the file.
    ``attribute``: the profile's attribute at fault, when one file is."""

    def __init__(self, message: str, attribute: str | None = None) -> None:
        super().__init__(message)
        self.attribute = attribute


class SecretError(Exception):
    """A password given in a form that cannot be read."""


def secret_value(value: str) -> str:
    """A password in qdrouterd's forms: ``env:VAR``, ``file:PATH`` (its first
    line), ``pass:TEXT``, ``literal:TEXT`` or the text itself.

    Raises:
        SecretError: the variable is not set or the file cannot be read.
    """
    if value.startswith("env:"):
        variable = value[4:].strip()
        if variable not in os.environ:
            raise SecretError(f"environment variable {variable} is not set")
        return os.environ[variable]
    if value.startswith("file:"):
        path = value[5:].strip()
        try:
            with open(path, encoding="utf-8") as file:
                return file.readline().rstrip("\r\n")
        except OSError as exc:
            raise SecretError(f"cannot read the file {path}: {exc.strerror}") from None
    if value.startswith("pass:"):
        return value[5:]
    if value.startswith("literal:"):
        return value[8:]
    return value


def _password(profile: conf.SslProfileSection) -> str | None:
    """The key's password, else the first line of ``passwordFile``."""
    value = profile.password
    if value is None:
        if profile.password_file is None:
            return None
        value = f"file:{profile.password_file}"
    try:
        return secret_value(value)
    except SecretError as exc:
        raise TlsError(f"sslProfile {profile.name!r}: password: {exc}") from None


def _readable(profile: conf.SslProfileSection, attribute: str, path: str | None) -> None:
    if path is None:
        return
    try:
        with open(path, "rb") as file:
            file.read(1)
    except OSError as exc:
        raise TlsError(f"sslProfile {profile.name!r}: cannot read {attribute} {path}: "
                       f"{exc.strerror}", attribute) from None


#: uidFormat letters: certificate subject fields, and fingerprints with
#: their length in hex digits (qdrouterd's letters).
_UID_FIELDS = {"c": SSL.CERT_COUNTRY_NAME, "s": SSL.CERT_STATE_OR_PROVINCE,
               "l": SSL.CERT_CITY_OR_LOCALITY, "o": SSL.CERT_ORGANIZATION_NAME,
               "u": SSL.CERT_ORGANIZATION_UNIT, "n": SSL.CERT_COMMON_NAME}
_UID_DIGESTS = {"1": (SSL.SHA1, 40), "2": (SSL.SHA256, 64), "5": (SSL.SHA512, 128)}


def certificate_uid(ssl: Any, uid_format: str) -> str | None:
    """The user id ``uid_format`` makes of a peer's certificate: the fields
    it names, in its order, joined by ``;``; absent fields are left out.
    None when the peer sent no certificate (or it has none of them), or
    when the format has a letter it does not know (the conf loader warned)."""
    parts = []
    for letter in uid_format:
        field = _UID_FIELDS.get(letter)
        if field is not None:
            value = ssl.get_cert_subject_subfield(field)
        elif letter in _UID_DIGESTS:
            digest, length = _UID_DIGESTS[letter]
            value = ssl.get_cert_fingerprint(length + 1, digest)
        else:
            return None
        if value:
            parts.append(value)
    return ";".join(parts) or None


def _uid_names(section: conf.SslProfileSection) -> Mapping[str, str]:
    """``uidNameMappingFile``: a JSON map of user ids to the names used instead."""
    path = section.uid_name_mapping_file
    if path is None:
        return {}
    _readable(section, "uidNameMappingFile", path)
    try:
        with open(path, encoding="utf-8") as file:
            names = json.load(file)
    except (OSError, ValueError) as exc:
        raise TlsError(f"sslProfile {section.name!r}: uidNameMappingFile {path}: {exc}") from None
    if not isinstance(names, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in names.items()):
        raise TlsError(f"sslProfile {section.name!r}: uidNameMappingFile {path}: expected a "
                       "JSON map of user ids to names (strings)")
    return names


@attrs.frozen
class TlsProfile:
    """One ``sslProfile``, checked: its files are readable and its key loads."""

    section: conf.SslProfileSection
    #: The names given to certificate user ids (``uidNameMappingFile``).
    uid_names: Mapping[str, str] = attrs.field(factory=dict)

    def user_of(self, ssl: Any) -> str | None:
        """The user a client certificate stands for with ``uidFormat`` (and
        the name mapping), else None: the SASL layer's user stands."""
        uid_format = self.section.uid_format
        if not uid_format:
            return None
        uid = certificate_uid(ssl, uid_format)
        return None if uid is None else self.uid_names.get(uid, uid)

    @property
    def name(self) -> str:
        return self.section.name or ""

    def server_domain(self, *, verify_client: bool, require_tls: bool) -> Any:
        """The domain of a listener: ``verify_client`` asks every client for a
        certificate signed by the profile's CAs (SASL EXTERNAL);
        ``require_tls`` refuses clients that do not start TLS (else they may
        connect in plain text on the same port, as with qdrouterd).

        Raises:
            TlsError: client verification without ``caCertFile``.
        """
        if verify_client and self.section.ca_cert_file is None:
            raise TlsError(f"sslProfile {self.name!r}: verifying client certificates "
                           "(authenticatePeer with EXTERNAL) needs caCertFile")
        domain = _domain(self.section, SSLDomain.MODE_SERVER)
        if verify_client:
            domain.set_peer_authentication(SSLDomain.VERIFY_PEER, self.section.ca_cert_file)
        else:
            domain.set_peer_authentication(SSLDomain.ANONYMOUS_PEER)
        if not require_tls:
            domain.allow_unsecured_client()
        return domain

    def http_context(self, *, verify_client: bool) -> ssl.SSLContext:
        """The TLS of an HTTP listener (HTTPS, and WebSockets over TLS),
        made with Python's ``ssl`` from the same profile: its certificate
        and key, its CAs, ciphers and protocol versions; ``verify_client``
        (``authenticatePeer``) asks every client for a certificate signed
        by the profile's CAs.

        Raises:
            TlsError: the files do not load, client verification without
                ``caCertFile``, ciphers or protocols OpenSSL refuses.
        """
        profile = self.section
        if verify_client and profile.ca_cert_file is None:
            raise TlsError(f"sslProfile {self.name!r}: verifying client certificates "
                           "(authenticatePeer) needs caCertFile")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            if profile.cert_file is not None:
                context.load_cert_chain(profile.cert_file,
                                        profile.private_key_file or profile.cert_file,
                                        _password(self.section) or "")
            if profile.ca_cert_file is not None:
                context.load_verify_locations(profile.ca_cert_file)
        except (OSError, ssl.SSLError):
            raise TlsError(
                f"sslProfile {self.name!r}: certFile {profile.cert_file} and privateKeyFile "
                f"{profile.private_key_file or profile.cert_file} do not load (not PEM, not a "
                "matching pair, or a wrong password)") from None
        context.verify_mode = ssl.CERT_REQUIRED if verify_client else ssl.CERT_NONE
        self._versions_and_ciphers(context)
        return context

    def client_context(self, *, verify_hostname: bool) -> ssl.SSLContext:
        """The TLS of a connection the router makes with Python's ``ssl``
        (a ``tcpConnector``'s to its service): the server's certificate is
        checked against ``caCertFile`` (its name against the host with
        ``verify_hostname``), not checked without one; the profile's own
        certificate, where it has one, is offered; its ciphers and protocol
        versions apply.

        Raises:
            TlsError: the files do not load, ciphers or protocols OpenSSL refuses.
        """
        profile = self.section
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        try:
            if profile.ca_cert_file is not None:
                context.load_verify_locations(profile.ca_cert_file)
                context.check_hostname = verify_hostname
            else:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if profile.cert_file is not None:
                context.load_cert_chain(profile.cert_file,
                                        profile.private_key_file or profile.cert_file,
                                        _password(self.section) or "")
        except (OSError, ssl.SSLError):
            raise TlsError(
                f"sslProfile {self.name!r}: its caCertFile, certFile or privateKeyFile do "
                "not load (not PEM, not a matching pair, or a wrong password)") from None
        self._versions_and_ciphers(context)
        return context

    def _versions_and_ciphers(self, context: ssl.SSLContext) -> None:
        profile = self.section
        if profile.ciphers:
            try:
                context.set_ciphers(profile.ciphers)
            except ssl.SSLError:
                raise TlsError(f"sslProfile {self.name!r}: OpenSSL knows none of ciphers "
                               f"{profile.ciphers!r}") from None
        if profile.protocols:
            versions = sorted(_TLS_VERSIONS[name] for name in profile.protocols.split()
                              if name in _TLS_VERSIONS)
            if versions:
                context.minimum_version, context.maximum_version = versions[0], versions[-1]

    def client_domain(self, *, verify_hostname: bool) -> Any:
        """The domain of a connector: the server's certificate is checked
        against ``caCertFile`` (and its name against the host with
        ``verify_hostname``); without ``caCertFile`` it is not checked."""
        domain = _domain(self.section, SSLDomain.MODE_CLIENT)
        if self.section.ca_cert_file is None:
            domain.set_peer_authentication(SSLDomain.ANONYMOUS_PEER)
        elif verify_hostname:
            domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
        else:
            domain.set_peer_authentication(SSLDomain.VERIFY_PEER)
        return domain


def _domain(profile: conf.SslProfileSection, mode: int) -> Any:
    name = profile.name
    domain = SSLDomain(mode)
    password = _password(profile)
    try:
        if profile.cert_file is not None:
            key = profile.private_key_file or profile.cert_file
            # Never None: OpenSSL would prompt on the terminal for the pass phrase.
            domain.set_credentials(profile.cert_file, key, password or "")
        if profile.ca_cert_file is not None:
            domain.set_trusted_ca_db(profile.ca_cert_file)
    except SSLException:
        raise TlsError(
            f"sslProfile {name!r}: certFile {profile.cert_file} and privateKeyFile "
            f"{profile.private_key_file or profile.cert_file} do not load (not PEM, not a "
            "matching pair, or a wrong password)") from None
    if profile.ciphers and lib.pn_ssl_domain_set_ciphers(
            domain._domain, profile.ciphers.encode()) != 0:
        raise TlsError(f"sslProfile {name!r}: OpenSSL knows none of ciphers "
                       f"{profile.ciphers!r}")
    if profile.protocols and lib.pn_ssl_domain_set_protocols(
            domain._domain, profile.protocols.encode()) != 0:
        raise TlsError(f"sslProfile {name!r}: OpenSSL refuses protocols "
                       f"{profile.protocols!r}")
    return domain


def load_profiles(sections: Iterable[conf.SslProfileSection],
                  failed: Callable[[conf.SslProfileSection, TlsError], None] | None = None,
                  ) -> dict[str, TlsProfile]:
    """Every ``sslProfile``, checked and ready, by name; with ``failed``, a
    profile that does not load is told to it and left out instead.

    Raises:
        TlsError: naming the profile and the file that is missing, unreadable
            or does not load (without ``failed``).
    """
    profiles: dict[str, TlsProfile] = {}
    for section in sections:
        try:
            profiles[section.name or ""] = _load_profile(section)
        except TlsError as error:
            if failed is None:
                raise
            failed(section, error)
    return profiles


def _load_profile(section: conf.SslProfileSection) -> TlsProfile:
    for attribute, path in (("certFile", section.cert_file),
                            ("privateKeyFile", section.private_key_file),
                            ("caCertFile", section.ca_cert_file)):
        _readable(section, attribute, path)
    if section.private_key_file is not None and section.cert_file is None:
        raise TlsError(f"sslProfile {section.name!r}: privateKeyFile without certFile")
    _domain(section, SSLDomain.MODE_SERVER)  # raises if the key does not load
    return TlsProfile(section, _uid_names(section))
