"""The channels' secrets: only files systemd hands the unit in ``$CREDENTIALS_DIRECTORY``.

``LoadCredential=notify:/etc/opsbot/notify`` loads every file of that root-only
directory as the credential ``notify_<file name>``: ``/etc/opsbot/notify/ops-hook`` is
the webhook ``ops-hook``'s HMAC key, ``/etc/opsbot/notify/team`` the Slack channel
``team``'s incoming-webhook URL, and so on. A credential is read whole (at most 64 KiB)
without the whitespace around it, so that ``echo KEY >file`` works (a webhook's receiver
strips its copy of the key the same way); nothing of it is ever logged or put in an
error message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from notify_svc.errors import CredentialError
from shared_io.trusted import untrusted_reason

MAX_CREDENTIAL_BYTES = 65536
HINT = (
    "put it in /etc/opsbot/notify/<channel> (root's, mode 0600); "
    "see docs/operating.md, 'Secrets and approvers'"
)


def credential_name(channel: str) -> str:
    """The credential that holds ``channel``'s secret."""
    return f"notify_{channel}"


@dataclass(frozen=True)
class Credentials:
    """The unit's credentials directory (None: the unit has none)."""

    directory: Path | None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Credentials:
        value = (os.environ if env is None else env).get("CREDENTIALS_DIRECTORY", "").strip()
        return cls(Path(value) if value else None)

    def get(self, channel: str) -> bytes | None:
        """``channel``'s secret, or None when there is none. CredentialError when it
        exists but cannot be read, is too big, or may be changed by others."""
        name = credential_name(channel)
        if self.directory is None:
            return None
        path = self.directory / name
        try:
            with path.open("rb") as f:
                untrusted = untrusted_reason(path, os.fstat(f.fileno()), secret=True)
                data = f.read(MAX_CREDENTIAL_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CredentialError(
                f"cannot read credential {name}: {exc.strerror or type(exc).__name__}",
                hint=HINT,
            ) from None
        if untrusted:
            raise CredentialError(f"credential {untrusted}")
        if len(data) > MAX_CREDENTIAL_BYTES:
            raise CredentialError(f"credential {name} is larger than {MAX_CREDENTIAL_BYTES} bytes")
        data = data.strip()
        return data or None

    def require(self, channel: str) -> bytes:
        """``channel``'s secret; CredentialError when there is none."""
        secret = self.get(channel)
        if secret is None:
            raise CredentialError(
                f"channel {channel!r} needs the credential {credential_name(channel)}, "
                "and the unit has none",
                hint=HINT,
            )
        return secret

    def require_text(self, channel: str, *, spaces: bool = False) -> str:
        """``channel``'s secret as one line of visible ASCII (a URL or a token that goes
        in a header; with ``spaces``, a password for SMTP AUTH)."""
        secret = self.require(channel)
        try:
            text = secret.decode("ascii").strip()
        except UnicodeDecodeError:
            text = ""
        lowest = 0x20 if spaces else 0x21
        if not text or any(not lowest <= ord(c) < 0x7F for c in text):
            # Never quote it, not even the offending character.
            raise CredentialError(
                f"credential {credential_name(channel)} must be one line of visible ASCII",
                hint=HINT,
            )
        return text
