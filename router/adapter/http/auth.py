"""Who is asking, on an HTTP listener: the console's and its endpoint's
authentication (docs/operations.md#the-web-console).

Owns telling the user of an HTTP request on a listener with
``authenticatePeer: yes``: the subject of the client certificate its TLS
checked, or the user and password of HTTP Basic authentication
(RFC 7617) checked by the listener's own SASL configuration: proton's
PLAIN server, the one AMQP clients log in to, run over memory with a
client proton side, so the answer is exactly the one an AMQP login with
those credentials gets (Cyrus's sasldb, auxprop or saslauthd; nothing
kept by Hop).  Successful checks are remembered for a short while so that
a console polling every few seconds is not a SASL exchange per request.
It decides nothing about what the user may do (policy does).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import time
from collections.abc import Callable

import attrs
from proton import SASL, Connection, Transport

from router.adapter.connections.settings import ListenerSettings

__all__ = ["Credentials", "HttpAuth", "basic_credentials", "certificate_subject"]

log = logging.getLogger(__name__)

#: How long a checked user and password stay good without a new check.
REMEMBER_S = 60.0
#: Entries kept at most (the oldest go first).
_REMEMBERED = 256


@attrs.frozen
class Credentials:
    user: str
    password: str


def basic_credentials(header: bytes | None) -> Credentials | None:
    """The user and password of an ``Authorization: Basic`` header, or None."""
    if header is None:
        return None
    scheme, _, encoded = header.strip().partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    if not colon or not user:
        return None
    return Credentials(user, password)


def certificate_subject(certificate: dict[str, object] | None) -> str | None:
    """A peer certificate's subject as RFC 4514 writes it (its names in
    reverse order: ``O=...,CN=...`` for a certificate that lists CN first),
    as AMQP connections authenticated by certificate show it; or None."""
    if not certificate:
        return None
    subject = certificate.get("subject")
    if not isinstance(subject, tuple):
        return None
    parts = []
    short = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
             "countryName": "C", "stateOrProvinceName": "ST", "localityName": "L",
             "domainComponent": "DC"}
    for rdn in reversed(subject):
        for key, value in rdn:
            parts.append(f"{short.get(key, key)}={value}")
    return ",".join(parts) or None


def plain_login(settings: ListenerSettings, credentials: Credentials,
                rounds: int = 16) -> bool:
    """Whether the listener's SASL accepts ``credentials`` by PLAIN: a
    proton server and client transport exchange the SASL frames in memory."""
    server = Transport(Transport.SERVER)
    server_sasl = server.sasl()
    server_sasl.allowed_mechs("PLAIN")
    if SASL.extended():
        server_sasl.allow_insecure_mechs = True  # memory, not a wire
        if settings.sasl_config_dir is not None:
            server_sasl.config_path(settings.sasl_config_dir)
        server_sasl.config_name(settings.sasl_config_name)
    server.bind(Connection())
    client = Transport()
    client_sasl = client.sasl()
    client_sasl.allowed_mechs("PLAIN")
    client_sasl.allow_insecure_mechs = True
    connection = Connection()
    connection.user = credentials.user
    connection.password = credentials.password
    client.bind(connection)
    for _ in range(rounds):
        moved = _move(client, server) + _move(server, client)
        if server_sasl.outcome is not None:
            break
        if not moved:
            break
    ok = bool(server_sasl.outcome == SASL.OK)
    for transport in (client, server):
        transport.unbind()
    return ok


def _move(source: Transport, sink: Transport) -> int:
    pending = source.pending()
    if pending <= 0:
        return 0
    data = source.peek(pending)
    source.pop(pending)
    if data:
        sink.push(data)
    return len(data or b"")


@attrs.define
class HttpAuth:
    """Checks Basic credentials against listeners' SASL, remembering
    successes for ``REMEMBER_S``.

    Args:
        check: the check itself (``plain_login``; tests give another).
        clock: monotonic seconds.
    """

    check: Callable[[ListenerSettings, Credentials], bool] = plain_login
    clock: Callable[[], float] = time.monotonic
    _good: dict[tuple[object, str, bytes], float] = attrs.field(factory=dict)

    def login(self, settings: ListenerSettings, credentials: Credentials) -> bool:
        """Whether ``credentials`` log in on the listener ``settings``."""
        digest = hashlib.sha256(credentials.password.encode()).digest()
        key = (settings.sasl_config_name, credentials.user, digest)
        now = self.clock()
        until = self._good.get(key)
        if until is not None and now < until:
            return True
        ok = self.check(settings, credentials)
        if ok:
            if len(self._good) >= _REMEMBERED:
                self._good.pop(next(iter(self._good)))
            self._good[key] = now + REMEMBER_S
        else:
            self._good.pop(key, None)
            log.info("HTTP login of %r refused on %s:%d", credentials.user, settings.host,
                     settings.port)
        return ok

    @staticmethod
    def basic_allowed(settings: ListenerSettings, encrypted: bool) -> bool:
        """Whether the listener takes a password at all: PLAIN among its
        mechanisms, and TLS under it unless ``allowInsecureMechanisms``."""
        return "PLAIN" in settings.sasl_mechanisms.split() and (
            encrypted or settings.allow_insecure_mechanisms)
