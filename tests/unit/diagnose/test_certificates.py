"""An expired TLS certificate (read_certificates, runbook/certificates.py): a client's
own output says a certificate was refused (a lead), and a certificate file the client or
the service it reaches is configured with is past its notAfter (the fact read). A note
names the file, when it ended and the unit serving it; nothing is restarted, since a
restart serves the same file."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from diagnose_svc.tools import ToolContext, read_certificates as tool
from diagnose_svc.tools._config_files import UnitConfig
from diagnose_svc.tools._systemctl import UnitProperties
from diagnose_svc.tools.read_certificates import Certificate, Certificates
from diagnose_svc.tools.read_config_edges import ConfigEdge
from diagnose_svc.verdict import NoteVerdict
from shared_schema import DiagnoseSettings
from tests.unit.diagnose.helpers import RecordedHost, health
from tests.unit.diagnose.recorded import APP_JOURNAL
from tests.unit.diagnose.test_runbook import cause_of, diagnose, settings
from tests.unit.diagnose.test_runbook_blame import service

NOW = datetime.now(UTC)


def pem(common_name: str, not_after: datetime) -> bytes:
    """A self-signed certificate for ``common_name`` ending at ``not_after``."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_after - timedelta(days=90))
        .not_valid_after(not_after)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


@pytest.fixture
def api_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """api.service: TLS_CERT (expired a day ago) and TLS_KEY in its EnvironmentFile=, a
    CA bundle (valid) in its config file, and a client certificate on its command line
    that is a directory by mistake."""
    (tmp_path / "tls.crt").write_bytes(pem("api.example", NOW - timedelta(days=1)))
    (tmp_path / "ca.pem").write_bytes(pem("Example CA", NOW + timedelta(days=300)))
    (tmp_path / "tls.key").write_text("-----BEGIN PRIVATE KEY-----\nsecret\n")
    (tmp_path / "client.crt").mkdir()
    env = tmp_path / "api.env"
    env.write_text(f"PORT=8443\nTLS_CERT={tmp_path}/tls.crt\nTLS_KEY={tmp_path}/tls.key\n")
    conf = tmp_path / "api.conf"
    conf.write_text(f"ca_file = {tmp_path}/ca.pem\n")
    props = {
        "Id": "api.service",
        "Environment": "",
        "ExecStart": f"{{ path=/usr/bin/api ; argv[]=/usr/bin/api --client-cert "
        f"{tmp_path}/client.crt ; ignore_errors=no }}",
    }
    monkeypatch.setattr(tool, "show", lambda units, properties: [UnitProperties("api", props)])
    monkeypatch.setattr(
        tool,
        "read_configs",
        lambda units: [UnitConfig("api.service", files=[str(env), str(conf)])],
    )
    return tmp_path


def test_the_certificates_a_unit_names_are_read_with_their_end_and_keys_are_never_opened(
    api_files: Path,
) -> None:
    """Each certificate file named in its environment file, config file and command line:
    subject and notAfter, the expired one marked; the key file is not in the answer."""
    out = tool.read_certificates(
        tool.CertificatesArgs(unit="api.service"), ToolContext(DiagnoseSettings())
    )
    by_path = {c.path: c for c in out.certificates}
    assert set(by_path) == {
        f"{api_files}/client.crt",
        f"{api_files}/tls.crt",
        f"{api_files}/ca.pem",
    }
    expired = by_path[f"{api_files}/tls.crt"]
    assert (expired.subject, expired.expired, expired.named_in) == (
        "CN=api.example",
        True,
        f"{api_files}/api.env",
    )
    assert not by_path[f"{api_files}/ca.pem"].expired
    assert by_path[f"{api_files}/ca.pem"].named_in == f"{api_files}/api.conf"
    assert not by_path[f"{api_files}/client.crt"].readable
    assert "EXPIRED" in out.summary() and "tls.key" not in out.model_dump_json()
    assert [c.path for c in out.expired] == [f"{api_files}/tls.crt"]


def test_a_file_that_holds_no_certificate_and_a_device_say_so(tmp_path: Path) -> None:
    """A file with a certificate's name and no PEM certificate in it: readable, no end,
    never expired; a device named like one is not read at all."""
    text = tmp_path / "notes.pem"
    text.write_text("not a certificate\n")
    got = tool.certificate(str(text), "its Environment=", NOW)
    assert (got.readable, got.not_after, got.expired) == (True, None, False)
    assert "no PEM certificate in it" in got.words()
    device = tool.certificate(os.devnull, "its Environment=", NOW)
    assert (device.readable, device.error) == (False, "not a regular file")


# -- the runbook -------------------------------------------------------------------------------

REFUSED = (
    "health check failed: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
    "certificate has expired (_ssl.c:992)"
)


def _tls_host(api_expired: bool, says: str = REFUSED) -> RecordedHost:
    """front -> web -> api (HTTPS, configured in web's environment); web's target says
    503, and its own output says ``says``; api runs."""
    lines = [(f"2026-11-29T21:50:{i:02d}Z", "err", "web", says) for i in range(3)] if says else []
    host = (
        RecordedHost()
        .add(service("front.service"))
        .add(service("web.service"), [*APP_JOURNAL, *lines])
        .add(service("api.service"))
    )
    host.configured = [
        ConfigEdge(
            client="front.service",
            server="web.service",
            endpoint=":21001",
            source="/etc/nginx/sites-enabled/shop:9",
            how="listens there now",
        ),
        ConfigEdge(
            client="web.service",
            server="api.service",
            endpoint=":21443",
            source="/etc/default/web:BACKEND_URL",
            how="listens there now",
        ),
    ]
    host.connections = []
    body = "SSLCertVerificationError: certificate verify failed"
    host.health["front"] = health("front", "front.service", "unexpected_status", 502)
    host.health["web"] = health("web", "web.service", "unexpected_status", 503, body=body)
    ends = NOW - timedelta(hours=3) if api_expired else NOW + timedelta(days=60)
    host.certificates = {
        "api.service": Certificates(
            unit="api.service",
            certificates=[
                Certificate(
                    path="/etc/api/tls.crt",
                    named_in="/etc/default/api",
                    readable=True,
                    subject="CN=api.internal",
                    issuer="CN=Shop CA",
                    not_after=ends,
                    expired=api_expired,
                )
            ],
        )
    }
    return host


CONFIG = settings(
    front=("http://127.0.0.1:8080/healthz", "front.service"),
    web=("http://127.0.0.1:21001/healthz", "web.service"),
)


def test_an_expired_certificate_of_the_service_a_client_reaches_is_a_note_naming_it() -> None:
    """web says its backend's certificate has expired; api's /etc/api/tls.crt ended three
    hours ago: a note about api naming the file and its end; nothing restarted."""
    host = _tls_host(api_expired=True)
    verdict, _ = diagnose(host, "front.service", CONFIG)
    assert isinstance(verdict, NoteVerdict), verdict
    assert cause_of(verdict) == ("certificate_expired", "api.service")
    assert "its certificate /etc/api/tls.crt (CN=api.internal" in verdict.text
    assert "web.service, which reaches it over TLS, says" in verdict.text
    assert "Also failing: web.service" not in verdict.text
    assert f"expired {(NOW - timedelta(hours=3)):%Y-%m-%d %H:%M} UTC" in verdict.text
    assert ("read_certificates", {"unit": "api.service"}) in host.calls


def test_the_same_words_while_every_certificate_is_valid_blame_no_certificate() -> None:
    """The same words in web's output (anyone can write them), api's certificate valid
    for two months: no certificate note."""
    verdict, _ = diagnose(_tls_host(api_expired=False), "front.service", CONFIG)
    assert cause_of(verdict)[0] != "certificate_expired", verdict


def test_without_the_words_no_certificate_is_read() -> None:
    """An expired certificate nobody complains of is not this diagnosis's business: it
    is not even read."""
    host = _tls_host(api_expired=True, says="")
    diagnose(host, "front.service", CONFIG)
    assert not [c for c in host.calls if c[0] == "read_certificates"]
