"""Email over SMTP, with Python's smtplib: ``security = "starttls"`` (port 587, the
default: STARTTLS, refused if the server does not offer it), ``"tls"`` (implicit TLS,
port 465) or ``"none"`` (a relay on this host or its LAN only: the message, and a
password if ``user`` is set, cross in the clear). Certificates are checked against the
system's CAs. With ``user`` set, opsbot logs in with the password that is the
credential ``notify_<channel>``.

The message is a plain-text email, Subject ``opsbot: plan <id> for <unit> on <host>
waits for approval``, marked ``Auto-Submitted: auto-generated`` so that vacation
responders stay quiet.
"""

from __future__ import annotations

import smtplib
import ssl
from email.message import EmailMessage
from email.utils import formatdate, make_msgid

from notify_svc.channels._base import Context
from notify_svc.errors import DeliveryFailed
from notify_svc.message import Message
from shared_schema.config import EmailChannel


def email_message(channel: EmailChannel, message: Message) -> EmailMessage:
    mail = EmailMessage()
    mail["Subject"] = message.subject
    mail["From"] = channel.sender
    mail["To"] = ", ".join(channel.to)
    mail["Date"] = formatdate(localtime=False, usegmt=True)
    mail["Message-ID"] = make_msgid(domain=channel.sender.rpartition("@")[2])
    mail["Auto-Submitted"] = "auto-generated"
    mail["X-Opsbot-Plan"] = message.plan_id
    mail.set_content(message.text)
    return mail


class EmailSender:
    def __init__(self, name: str, channel: EmailChannel, context: Context) -> None:
        self.channel = channel
        self.password = (
            context.credentials.require_text(name, spaces=True) if channel.user else None
        )
        self.timeout = context.timeout_seconds

    def _connect(self) -> smtplib.SMTP:
        channel = self.channel
        if channel.security == "tls":
            return smtplib.SMTP_SSL(
                channel.host,
                channel.port,
                timeout=self.timeout,
                context=ssl.create_default_context(),
            )
        smtp = smtplib.SMTP(channel.host, channel.port, timeout=self.timeout)
        if channel.security == "starttls":
            try:
                smtp.starttls(context=ssl.create_default_context())
            except BaseException:
                smtp.close()
                raise
        return smtp

    def send(self, message: Message) -> None:
        mail = email_message(self.channel, message)
        try:
            with self._connect() as smtp:
                if self.channel.user and self.password is not None:
                    smtp.login(self.channel.user, self.password)
                smtp.send_message(mail)
        except smtplib.SMTPNotSupportedError as exc:
            raise DeliveryFailed(
                f"the SMTP server does not support {exc}", permanent=True
            ) from None
        except smtplib.SMTPAuthenticationError as exc:
            raise DeliveryFailed(f"SMTP login refused: {exc.smtp_code}", permanent=True) from None
        except smtplib.SMTPRecipientsRefused as exc:
            codes = sorted({code for code, _ in exc.recipients.values()})
            permanent = all(code >= 500 for code in codes)
            raise DeliveryFailed(
                f"SMTP refused the recipients ({', '.join(map(str, codes))})",
                permanent=permanent,
            ) from None
        except smtplib.SMTPResponseException as exc:
            said = exc.smtp_error
            reason = (said.decode("utf-8", "replace") if isinstance(said, bytes) else said)[:200]
            raise DeliveryFailed(
                f"SMTP {exc.smtp_code} {reason}".strip(), permanent=exc.smtp_code >= 500
            ) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryFailed(f"SMTP: {type(exc).__name__}: {exc}"[:200]) from None
