"""The long tail of channels (Telegram, Matrix, Discord, Pushover, Gotify and the rest)
through Apprise (https://github.com/caronc/apprise): the Apprise URL that is the
channel's credential ``notify_<channel>`` (``tgram://TOKEN/CHAT``, ``discord://ID/TOKEN``,
``gotifys://HOST/TOKEN`` ...; it holds the channel's secrets, so it is never logged or
quoted) gets the message's subject as the title and its plain text as the body, marked
as text so that a channel which reads HTML gets it escaped, and :func:`defanged` first:
Discord, Slack, Matrix and the like take plain text as Markdown and act on mentions, so
every mention and link syntax in it is broken by a zero-width space.

Apprise is the extra ``opsbot[apprise]``, imported only when a channel of this kind is
built. It runs inside opsbot-notify's sandbox, held to what the other channels are held
to:

- only the plugins shipped with Apprise: no plugin path is scanned, and a URL whose
  schema a plugin registered at run time (Apprise's ``@notify``) is refused;
- no redirect is followed (the asset's ``http_redirects`` off, a URL's ``redirect=yes``
  undone): a redirect could carry the message to a host the operator did not name;
- no proxy: the ``*_proxy`` variables are out of the environment during the call
  (``requests``, under Apprise, would read them);
- each HTTP request waits at most ``[notify] timeout_seconds`` to connect and as long to
  read, and a whole try at most :data:`TRY_TIMEOUTS` times that;
- Apprise's own retries are off (a URL's ``retry=`` undone): notify_svc.retry tries
  again, with its backoff and within the run's time.

Apprise says that a try failed, not whether another could pass: every failure is worth
another try. Its reason is given with each part of the URL blanked out.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from urllib.parse import unquote

from notify_svc.channels._base import Context
from notify_svc.credentials import HINT, credential_name
from notify_svc.errors import CredentialError, DeliveryFailed
from notify_svc.message import Message
from shared_schema.config import AppriseChannel
from shared_schema.text import printable

#: A try may make several requests (a login, then the message): Apprise gives it up after
#: this many times ``[notify] timeout_seconds``.
TRY_TIMEOUTS = 3
#: Where the plugins shipped with Apprise live; any other was registered at run time.
SHIPPED_PLUGINS = "apprise.plugins."
#: The extra ``opsbot[apprise]`` (pyproject.toml), as pip takes it.
REQUIREMENT = "apprise>=2.3,<3"
MAX_REASON = 200


@contextlib.contextmanager
def no_proxy_environment() -> Iterator[None]:
    """The process's environment without ``http_proxy``, ``HTTPS_PROXY``, ``all_proxy``,
    ``no_proxy`` ... (in any case) while the block runs; they are put back after it."""
    names = [name for name in os.environ if name.lower().endswith("_proxy")]
    saved = {name: os.environ.pop(name) for name in names}
    try:
        yield
    finally:
        os.environ.update(saved)


def blank_out(text: str, url: str) -> str:
    """``text`` without the URL or any part of it but its schema, each shown as ``…``."""
    schema, _, rest = url.partition("://")
    parts = {url, rest, *re.split(r"[/:@?&=#,;+]+", rest)}
    parts |= {unquote(part) for part in parts}
    for part in sorted((p for p in parts if len(p) >= 3), key=len, reverse=True):
        text = text.replace(part, "…")
    return text


#: Put after what would ping or draw a link: invisible, and it breaks the syntax.
ZERO_WIDTH_SPACE = "\u200b"


def defanged(text: str) -> str:
    """``text`` with every mention and link syntax a chat would act on broken by a zero-width
    space: ``@everyone``, ``@here``, ``@room``, ``<@123>`` (Apprise's Discord plugin itself
    turns any ``@name`` or ``@123`` of the body into a ping), a Markdown link
    ``[label](url)``, a Slack-style ``<url|label>`` or ``<!channel>``. The text came in part
    from a model that read the journal; the chats that take it as plain text show it as
    it was. A bare URL stays whole (the chat still links it)."""
    for syntax in ("@", "<", "]("):
        text = text.replace(syntax, syntax[0] + ZERO_WIDTH_SPACE + syntax[1:])
    return text


def _shown(url: str) -> str:
    """What a message may say of the URL: its schema, if it looks like one."""
    schema = url.partition("://")[0]
    return f"an Apprise URL ({schema}://…)" if re.fullmatch(r"[a-z0-9+]{1,16}", schema) else "a URL"


class AppriseSender:
    def __init__(self, name: str, channel: AppriseChannel, context: Context) -> None:
        url = context.credentials.require_text(name)
        try:
            import apprise
        except ImportError:
            raise CredentialError(
                f"channel {name!r} is of kind apprise, and Apprise is not installed",
                hint=f"install it into opsbot's venv: {sys.prefix}/bin/pip install '{REQUIREMENT}'",
            ) from None
        self.url = url
        self.try_seconds = TRY_TIMEOUTS * context.timeout_seconds
        asset = apprise.AppriseAsset(
            plugin_paths=[],
            storage_mode="memory",
            service_timeout=self.try_seconds,
            secure_logging=True,
            http_redirects=False,
        )
        service = apprise.Apprise.instantiate(url, asset=asset)
        if service is None:
            raise CredentialError(
                f"credential {credential_name(name)} holds {_shown(url)} that Apprise "
                "cannot use (an unknown schema, or a part missing or malformed)",
                hint=HINT,
            )
        if not type(service).__module__.startswith(SHIPPED_PLUGINS):
            raise CredentialError(
                f"credential {credential_name(name)} holds {_shown(url)} of a plugin "
                "not shipped with Apprise; opsbot uses only those"
            )
        service.redirects = False
        service.retry = 0
        service.socket_connect_timeout = context.timeout_seconds
        service.socket_read_timeout = context.timeout_seconds
        self.apprise = apprise.Apprise(asset=asset)
        self.apprise.add(service)
        self.body_format = apprise.NotifyFormat.TEXT

    def send(self, message: Message) -> None:
        with no_proxy_environment():
            result = self.apprise.notify(
                body=defanged(message.text),
                title=defanged(message.subject),
                body_format=self.body_format,
            )
        if result:
            return
        if result.timeout_count:
            raise DeliveryFailed(f"no answer within the try's {self.try_seconds:g} s")
        said = [entry.message for entry in result.logs() if entry.level in ("WARNING", "ERROR")]
        service = ", ".join(r.name for r in result) or "Apprise"
        reason = f"{service}: {said[-1] if said else 'not sent'}"
        raise DeliveryFailed(printable(blank_out(reason, self.url))[:MAX_REASON])
