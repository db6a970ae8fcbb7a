"""Free text in plans and notes: bounded and free of control characters.

Plans are shown to operators in a terminal; text that came from a model (which read
text that came from anyone who can write to the journal) must not carry escape
sequences there. The schema refuses them rather than trusting every printer.
"""

from typing import Annotated

from pydantic import AfterValidator, StringConstraints

from shared_schema.escape import CONTROL, CONTROL_CLASS, printable

__all__ = ["Goal", "Reason", "printable"]


def no_control(value: str) -> str:
    match = CONTROL.search(value)
    if match:
        raise ValueError(
            f"control character U+{ord(match.group()):04X} at offset {match.start()} is not "
            "allowed (no newlines, tabs, escape sequences or bidirectional overrides)"
        )
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    return value


#: The same rule as a JSON Schema pattern (the console's reader checks it:
#: shared_schema.console_schema): no control character, and one that is not white space.
TEXT_PATTERN = rf"^[^{CONTROL_CLASS}]*[^{CONTROL_CLASS}\s][^{CONTROL_CLASS}]*$"

Goal = Annotated[str, StringConstraints(strict=True, max_length=200), AfterValidator(no_control)]
Reason = Annotated[str, StringConstraints(strict=True, max_length=500), AfterValidator(no_control)]
