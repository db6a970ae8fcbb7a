"""Redaction: secrets out, markers in, and a count so the trace shows it happened."""

from __future__ import annotations

import pytest

from diagnose_svc.redact import Redactor, redact

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.def-123456", "Authorization: [REDACTED]"),
        ('curl -H "authorization: Basic dXNlcjpwYXNz" x', 'curl -H "authorization: [REDACTED]" x'),
        ("sent bearer eyJhbGciOi0123456789", "sent bearer [REDACTED]"),
        ("login password=hunter2 user=bob", "login password=[REDACTED] user=bob"),
        ("secret: topsecret", "secret: [REDACTED]"),
        ("GET /?api_key=abc123&page=2", "GET /?api_key=[REDACTED]&page=2"),
        ('{"token": "abc\\"def", "n": 1}', '{"token": "[REDACTED]", "n": 1}'),
        ("key sk-proj-abcdefghijklmnop1234", "key [REDACTED api key]"),
        ("aws AKIAABCDEFGHIJKLMNOP here", "aws [REDACTED api key] here"),
        ("db postgres://app:s3cret@db:5432/app", "db postgres://app:[REDACTED]@db:5432/app"),
        (f"key {PEM} done", "key [REDACTED private key] done"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEv (cut)", "[REDACTED private key]"),
        ("MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun", "[REDACTED base64]"),
    ],
)
def test_builtin_rules(text: str, expected: str) -> None:
    """Each built-in rule replaces the secret and keeps what tells where it was."""
    redacted, count = redact(text)
    assert redacted == expected
    assert count == 1


@pytest.mark.parametrize(
    "text",
    [
        "nginx.service: Main process exited, code=exited, status=1/FAILURE",
        "invocation 40742b540f294730b5511f76b511d587",
        "sha256 " + "0123456789abcdef" * 4,
        "Failed password for root from 10.0.0.1 port 22",
        "Permission denied (publickey,password).",
        "/usr/lib/systemd/system/nginx.service",
    ],
)
def test_ordinary_lines_are_left_alone(text: str) -> None:
    """Journal lines, ids and hashes without secrets are not touched."""
    assert redact(text) == (text, 0)


def test_counts_every_replacement() -> None:
    """The count is the number of secrets replaced, across rules."""
    text = "password=a password=b Authorization: Bearer cccccccc sk-abcdefghijklmnopqrst"
    redacted, count = redact(text)
    assert count == 4
    assert redacted == (
        "password=[REDACTED] password=[REDACTED] Authorization: [REDACTED] [REDACTED api key]"
    )


def test_configured_patterns_apply_after_the_builtins() -> None:
    """Operator patterns from redact_patterns replace the whole match."""
    redactor = Redactor([r"CUST-\d{6}", r"(?i)internal-host-\w+"])
    assert redactor.text("order CUST-123456 on Internal-Host-a1") == (
        "order [REDACTED] on [REDACTED]",
        2,
    )


def test_values_are_walked() -> None:
    """Every string inside a JSON-like value is redacted; keys and numbers are kept."""
    value = {"lines": [{"message": "password=x", "n": 3}], "url": "http://u:p@h/"}
    redacted, count = Redactor().value(value)
    assert redacted == {
        "lines": [{"message": "password=[REDACTED]", "n": 3}],
        "url": "http://u:[REDACTED]@h/",
    }
    assert count == 2
