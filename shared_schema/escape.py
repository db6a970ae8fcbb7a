"""Untrusted text shown on a terminal: which characters may not be shown as they are, and
how they are shown instead. Pure text (the console uses it without building a model)."""

import re

__all__ = ["CONTROL", "CONTROL_CLASS", "printable"]

#: C0 and C1 controls and DEL; the bidirectional formatting characters (marks U+061C,
#: U+200E, U+200F, embeddings and overrides U+202A..U+202E, isolates U+2066..U+2069), with
#: which a text displays in another order than it holds ("Trojan Source"); and the line
#: and paragraph separators U+2028/U+2029, which some terminals and pagers break lines on.
#: Written as escapes, so that the class can travel in a JSON Schema as plain ASCII.
CONTROL_CLASS = r"\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
CONTROL = re.compile(f"[{CONTROL_CLASS}]")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(value: str) -> str:
    """Replace control and bidirectional formatting characters with visible escapes
    (``\\x1b``, ``\\u202e``), for showing untrusted text."""
    return CONTROL.sub(lambda m: _escape(m.group()), value)
