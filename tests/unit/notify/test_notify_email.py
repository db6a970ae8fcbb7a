"""Email over SMTP against a real SMTP server the test starts (aiosmtpd on 127.0.0.1):
the message arrives with its subject, sender, recipients and text; with ``user`` set,
opsbot logs in with the password from the credential; a wrong password is refused at
once (not retried), and ``starttls`` never falls back to the clear."""

from __future__ import annotations

import email
import email.policy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from structlog.testing import capture_logs

from notify_svc.run import Summary, notify
from shared_schema.approver_socket import Notice
from shared_schema.config import OpsbotConfig
from tests.unit.notify.test_notify_support import (
    PLAN_ID,
    SHA256,
    Sleeps,
    approver,
    config,
    credentials,
    free_port,
    notice,
    token,
)

BASE = "https://ops.example.com/opsbot"
USER, PASSWORD = "opsbot@example.com", "correct horse battery"


class Inbox:
    """The SMTP server's handler: keeps every message it accepts."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.content))
        return "250 OK"


def authenticator(
    server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any
) -> AuthResult:
    ok = isinstance(auth_data, LoginPassword) and (
        auth_data.login == USER.encode() and auth_data.password == PASSWORD.encode()
    )
    return AuthResult(success=ok, handled=False)


@pytest.fixture
def smtp() -> Iterator[tuple[Inbox, int]]:
    """A real SMTP server on 127.0.0.1 that offers AUTH without TLS (a local relay)."""
    inbox = Inbox()
    port = free_port()
    controller = Controller(
        inbox,
        hostname="127.0.0.1",
        port=port,
        authenticator=authenticator,
        auth_require_tls=False,
    )
    controller.start()
    try:
        yield inbox, port
    finally:
        controller.stop()


def mail_config(port: int, **channel: Any) -> OpsbotConfig:
    return config(
        notify={
            "link_base": BASE,
            "attempts": 3,
            "channels": {
                "mail": {
                    "kind": "email",
                    "host": "127.0.0.1",
                    "port": port,
                    "security": "none",
                    "sender": "opsbot@web1.example.com",
                    "to": ["alice@example.com", "oncall@example.com"],
                    **channel,
                }
            },
        },
        approvers={"alice": {"notify": ["mail"]}},
    )


def run(
    tmp_path: Path, cfg: OpsbotConfig, secret: bytes | None, sleeps: Sleeps, n: Notice | None = None
) -> Summary:
    creds = credentials(tmp_path / "c", {} if secret is None else {"mail": secret})
    with approver(tmp_path / "approver.sock", [[n or notice()]]) as fake:
        return notify(cfg, socket_path=fake.path, credentials=creds, sleep=sleeps)


def test_the_email_arrives_with_subject_recipients_and_links(
    tmp_path: Path, smtp: tuple[Inbox, int]
) -> None:
    """Sent through the local relay without a login: one message to both recipients,
    Subject "opsbot: plan <id> for <unit> on <host> waits for approval", the text with
    the argv, the sha256 prefix and alice's two links."""
    inbox, port = smtp
    n = notice()
    summary = run(tmp_path, mail_config(port), None, Sleeps(), n)
    assert summary.ok and summary.sent == 1
    (mail_from, rcpt_tos, content) = inbox.messages[0]
    assert len(inbox.messages) == 1
    assert mail_from == "opsbot@web1.example.com"
    assert rcpt_tos == ["alice@example.com", "oncall@example.com"]
    mail = email.message_from_bytes(content, policy=email.policy.default)
    assert mail["Subject"] == f"opsbot: plan {PLAN_ID} for app.service on web1 waits for approval"
    assert mail["Auto-Submitted"] == "auto-generated"
    assert mail["X-Opsbot-Plan"] == PLAN_ID
    body = mail.get_content()  # type: ignore[attr-defined]
    assert "systemctl restart --no-block app.service" in body
    assert f"sha256: {SHA256[:12]}" in body
    assert f"{BASE}/p/{token(n, 'alice', 'approve')}" in body
    assert f"{BASE}/p/{token(n, 'alice', 'reject')}" in body


def test_with_a_user_opsbot_logs_in_with_the_credential(
    tmp_path: Path, smtp: tuple[Inbox, int]
) -> None:
    """``user`` set: AUTH with the password from notify_mail (a password may hold
    spaces; the trailing newline of the file is not part of it); the server accepts."""
    inbox, port = smtp
    summary = run(tmp_path, mail_config(port, user=USER), PASSWORD.encode() + b"\n", Sleeps())
    assert summary.ok
    assert len(inbox.messages) == 1


def test_a_wrong_password_is_refused_once_and_logged(
    tmp_path: Path, smtp: tuple[Inbox, int]
) -> None:
    """The server refuses the login (535): a permanent failure, one try, no backoff,
    logged with the channel; nothing delivered; the password is in no log."""
    inbox, port = smtp
    sleeps = Sleeps()
    with capture_logs() as logs:
        summary = run(tmp_path, mail_config(port, user=USER), b"wrong password", sleeps)
    assert inbox.messages == [] and sleeps.delays == []
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert failed["channel"] == "mail" and failed["reason"] == "SMTP login refused: 535"
    assert failed["tries"] == 1
    assert "wrong password" not in repr(logs)
    assert not summary.ok


def test_a_user_without_its_password_credential_costs_the_channel(
    tmp_path: Path, smtp: tuple[Inbox, int]
) -> None:
    """``user`` set but no notify_mail credential: the channel is unusable (logged),
    nothing is sent in the clear without a login."""
    inbox, port = smtp
    with capture_logs() as logs:
        summary = run(tmp_path, mail_config(port, user=USER), None, Sleeps())
    assert inbox.messages == [] and summary.failed == 1
    assert [e["channel"] for e in logs if e["event"] == "notify.channel_unusable"] == ["mail"]


def test_starttls_is_required_when_configured(tmp_path: Path, smtp: tuple[Inbox, int]) -> None:
    """``security = "starttls"`` with a server that offers no STARTTLS: refused, not
    sent in the clear, and not retried."""
    inbox, port = smtp
    sleeps = Sleeps()
    with capture_logs() as logs:
        summary = run(tmp_path, mail_config(port, security="starttls"), None, sleeps)
    assert inbox.messages == [] and sleeps.delays == []
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert "STARTTLS" in failed["reason"]
    assert not summary.ok


def test_a_server_that_is_not_there_is_retried_and_logged(tmp_path: Path) -> None:
    """Nothing listens: each of the 3 tries fails to connect, with backoff between."""
    sleeps = Sleeps()
    started = time.monotonic()
    with capture_logs() as logs:
        summary = run(tmp_path, mail_config(free_port()), None, sleeps)
    assert sleeps.delays == [1.0, 2.0]
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert failed["reason"].startswith("SMTP: ConnectionRefusedError")
    assert not summary.ok
    assert time.monotonic() - started < 10
