"""Free text in plans and notes: bounded and free of control characters.

Plans are shown to operators in a terminal; text that came from a model (which read
text that came from anyone who can write to the journal) must not carry escape
sequences there. The schema refuses them rather than trusting every printer.
"""

import re
from typing import Annotated

from pydantic import AfterValidator, StringConstraints

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _no_control(value: str) -> str:
    match = _CONTROL.search(value)
    if match:
        raise ValueError(
            f"control character U+{ord(match.group()):04X} at offset {match.start()} is not "
            "allowed (no newlines, tabs or escape sequences)"
        )
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    return value


def printable(value: str) -> str:
    """Replace control characters with visible escapes, for showing untrusted text."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value)


Goal = Annotated[str, StringConstraints(strict=True, max_length=200), AfterValidator(_no_control)]
Reason = Annotated[str, StringConstraints(strict=True, max_length=500), AfterValidator(_no_control)]
