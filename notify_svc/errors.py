"""What can go wrong in opsbot-notify, each said for the operator.

    OpsbotError (shared_io.errors)
    └── NotifyError          the approver could not be asked, or said no (exit 1)
        ├── CredentialError  a channel's credential is missing or cannot be read
        └── DeliveryFailed   one try of one message on one channel did not go out

A :class:`CredentialError` or :class:`DeliveryFailed` costs one channel's message, never
the run: the other channels are still sent, and the run exits 1. ``DeliveryFailed``
says whether another try could help (``permanent``: an HTTP 4xx, an SMTP 5xx, a
refused login) so that retries are spent only on what may pass. No message of these
errors holds a secret: not a key, not a Slack URL, not a link's token.
"""

from __future__ import annotations

from shared_io.errors import OpsbotError


class NotifyError(OpsbotError):
    """The run could not announce: the approver is away or refused (exit 1)."""


class CredentialError(NotifyError):
    """A channel's credential ``notify_<channel>`` is missing, unreadable or unusable."""


class DeliveryFailed(NotifyError):
    """One try on one channel failed; ``permanent`` when trying again cannot help."""

    def __init__(self, reason: str, *, permanent: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent
