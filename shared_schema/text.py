"""Free text in plans and notes: bounded and free of control characters.

Plans are shown to operators in a terminal; text that came from a model (which read
text that came from anyone who can write to the journal) must not carry escape
sequences there. The schema refuses them rather than trusting every printer.
"""

import re
from typing import Annotated

from pydantic import AfterValidator, StringConstraints

#: C0 and C1 controls and DEL; the bidirectional formatting characters (marks U+061C,
#: U+200E, U+200F, embeddings and overrides U+202A..U+202E, isolates U+2066..U+2069), with
#: which a text displays in another order than it holds ("Trojan Source"); and the line
#: and paragraph separators U+2028/U+2029, which some terminals and pagers break lines on.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def _no_control(value: str) -> str:
    match = _CONTROL.search(value)
    if match:
        raise ValueError(
            f"control character U+{ord(match.group()):04X} at offset {match.start()} is not "
            "allowed (no newlines, tabs, escape sequences or bidirectional overrides)"
        )
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    return value


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(value: str) -> str:
    """Replace control and bidirectional formatting characters with visible escapes
    (``\\x1b``, ``\\u202e``), for showing untrusted text."""
    return _CONTROL.sub(lambda m: _escape(m.group()), value)


Goal = Annotated[str, StringConstraints(strict=True, max_length=200), AfterValidator(_no_control)]
Reason = Annotated[str, StringConstraints(strict=True, max_length=500), AfterValidator(_no_control)]
