"""Certificates for the real-software graphs' TLS services, made with pyca/cryptography
as an operator's private CA would issue them: a CA, and a server certificate for
127.0.0.1 and localhost with the dates a case needs (an expired one among them)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

__all__ = ["Authority", "Issued", "authority"]


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM text."""

    cert: str
    key: str


@dataclass(frozen=True)
class Authority:
    """A CA: its certificate and key, as PEM text."""

    cert: str
    key: str

    def issue(self, common_name: str, not_after: datetime) -> Issued:
        """A server certificate for ``common_name`` (and 127.0.0.1, localhost), valid
        from 90 days before ``not_after`` until it."""
        ca_cert = x509.load_pem_x509_certificate(self.cert.encode())
        ca_key = serialization.load_pem_private_key(self.key.encode(), password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        key = ec.generate_private_key(ec.SECP256R1())
        names = x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        )
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_after - timedelta(days=90))
            .not_valid_after(not_after)
            .add_extension(names, critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        return Issued(_cert_pem(cert), _key_pem(key))


def authority(name: str) -> Authority:
    """A new CA named ``name``, valid for a year from now."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    return Authority(_cert_pem(cert), _key_pem(key))


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
