"""Certificates made by the test setup: a CA, a server and a client signed by
it, and a stranger CA that signed nothing of ours."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import attrs
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@attrs.frozen
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_ca: Path
    #: The server key again, encrypted with ``KEY_PASSWORD``.
    server_key_encrypted: Path


KEY_PASSWORD = "s3cret-key"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Hop tests")])


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey,
                 issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None, *,
                 ca: bool = False, server: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer if issuer is not None else (_name(subject), key)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject)).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False).add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
        builder = builder.add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey, password: str | None = None) -> Path:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password
        else serialization.NoEncryption())
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8, encryption))
    return path


def _write_cert(path: Path, cert: x509.Certificate) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def make_pki(directory: Path) -> Pki:
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("Hop test CA", ca_key, None, ca=True)
    stranger_key = ec.generate_private_key(ec.SECP256R1())
    stranger = _certificate("Stranger CA", stranger_key, None, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _certificate("localhost", server_key, (ca.subject, ca_key), server=True)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _certificate("app-client", client_key, (ca.subject, ca_key))
    return Pki(
        ca=_write_cert(directory / "ca.pem", ca),
        server_cert=_write_cert(directory / "server.pem", server),
        server_key=_write_key(directory / "server-key.pem", server_key),
        client_cert=_write_cert(directory / "client.pem", client),
        client_key=_write_key(directory / "client-key.pem", client_key),
        stranger_ca=_write_cert(directory / "stranger-ca.pem", stranger),
        server_key_encrypted=_write_key(directory / "server-key-enc.pem", server_key,
                                        KEY_PASSWORD),
    )
