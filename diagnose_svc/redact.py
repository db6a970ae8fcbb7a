"""Redaction: secrets are cut out of every observation before any policy sees it.

Anything that reaches the journal or a health endpoint's body may carry a secret, and a
policy may be a remote model. :class:`Redactor` replaces what looks like one with a
``[REDACTED ...]`` marker and counts the replacements, so the trace shows that redaction
happened (and how often) without showing what was redacted.

Built-in rules, in the order they apply:

* private key blocks (``-----BEGIN ... PRIVATE KEY-----`` up to its END line, or to the end
  of the text when the END line was cut off);
* ``Authorization:`` / ``Proxy-Authorization:`` header values, and ``Bearer`` tokens anywhere;
* credentials in URLs (``scheme://user:secret@host``);
* ``password=...``, ``secret: ...``, ``api_key=...`` and the like, and JSON members
  such as ``"token": "..."``;
* well-known key formats: ``sk-...`` (OpenAI style), ``AKIA``/``ASIA`` (AWS),
  ``ghp_``/``gho_``/... (GitHub), ``xox?-`` (Slack), and JSON web tokens;
* long base64 runs that mix upper case, lower case and digits (the body lines of a key
  that was logged line by line, so that each line is its own journal entry).

Then the operator's own patterns from ``[diagnose] redact_patterns``: each match is
replaced as a whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["Redactor", "redact"]

MARK = "[REDACTED]"

_Replacement = str | Callable[[re.Match[str]], str]

_KEY_NAMES = (
    r"password|passwd|passphrase|pwd|secret|client_secret|api_key|apikey|api-key"
    r"|access_key|secret_key|access_token|refresh_token|auth_token|token"
)


def _keep_prefix(match: re.Match[str]) -> str:
    return match.group(1) + MARK


def _base64_run(match: re.Match[str]) -> str:
    run = match.group(0)
    mixed = (
        any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
    )
    return "[REDACTED base64]" if mixed else run


_BUILTIN: tuple[tuple[re.Pattern[str], _Replacement], ...] = (
    (
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?"
            r"(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\Z)"
        ),
        "[REDACTED private key]",
    ),
    (
        re.compile(
            r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
            r"(?:(?:bearer|basic|digest|token|negotiate)\s+)?[^\s\"',;]+"
        ),
        _keep_prefix,
    ),
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{6,}"), _keep_prefix),
    (re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^@\s/]+(?=@)"), _keep_prefix),
    (
        re.compile(rf"(?i)(\"(?:{_KEY_NAMES})\"\s*:\s*\")(?:[^\"\\]|\\.)*(?=\")"),
        _keep_prefix,
    ),
    (
        re.compile(rf"(?i)(\b(?:{_KEY_NAMES})\s*[=:]\s*)(?![\s\"']|\[REDACTED)[^\s\"'&,;]+"),
        _keep_prefix,
    ),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), "[REDACTED api key]"),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "[REDACTED api key]"),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"), "[REDACTED api key]"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), "[REDACTED api key]"),
    (
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        "[REDACTED token]",
    ),
    (re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{40,}={0,2}(?![A-Za-z0-9+/=])"), _base64_run),
)


class Redactor:
    """Replaces secrets in text (or in every string of a JSON-like value) and counts them."""

    def __init__(self, extra_patterns: Iterable[str] = ()) -> None:
        extra = tuple((re.compile(p), MARK) for p in extra_patterns)
        self._rules: tuple[tuple[re.Pattern[str], _Replacement], ...] = _BUILTIN + extra

    def text(self, text: str) -> tuple[str, int]:
        """The text with secrets replaced, and how many replacements were made."""
        total = 0
        for pattern, replacement in self._rules:
            text, count = _apply(pattern, replacement, text)
            total += count
        return text, total

    def value(self, value: Any) -> tuple[Any, int]:
        """Redact every string inside a JSON-like value (dicts, lists, scalars)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            total = 0
            for key, item in value.items():
                out[key], count = self.value(item)
                total += count
            return out, total
        if isinstance(value, list | tuple):
            items = []
            total = 0
            for item in value:
                redacted, count = self.value(item)
                items.append(redacted)
                total += count
            return items, total
        return value, 0


def _apply(pattern: re.Pattern[str], replacement: _Replacement, text: str) -> tuple[str, int]:
    """Replace the matches of one rule; count those that really changed."""
    count = 0

    def replace(match: re.Match[str]) -> str:
        nonlocal count
        new = replacement(match) if callable(replacement) else replacement
        if new != match.group(0):
            count += 1
        return new

    return pattern.sub(replace, text), count


def redact(text: str, extra_patterns: Iterable[str] = ()) -> tuple[str, int]:
    """Shortcut: redact ``text`` with the built-in rules plus ``extra_patterns``."""
    return Redactor(extra_patterns).text(text)
