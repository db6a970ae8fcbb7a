"""Validation errors as data: a list of {path, message} a model (or a person) can act on."""

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError

from shared_schema._model import Model

__all__ = ["FieldError", "field_errors"]


class FieldError(Model):
    """One thing wrong with an input: where (dotted path, '' for the whole) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


def _path(loc: Sequence[int | str], union_tags: frozenset[str]) -> str:
    parts: list[str] = []
    for item in loc:
        # pydantic puts the discriminator tag in the location of a union member
        # ("steps.0.restart_unit.args"); operators think in input keys, so drop it.
        if item in union_tags and parts and parts[-1].isdigit():
            continue
        parts.append(str(item))
    return ".".join(parts)


def field_errors(
    exc: ValidationError, prefix: str = "", union_tags: frozenset[str] = frozenset()
) -> list[FieldError]:
    """Turn a pydantic ValidationError into FieldErrors, never a traceback.

    ``union_tags`` are discriminator values to leave out of paths.
    """
    out: list[FieldError] = []
    for err in exc.errors(include_url=False, include_context=False):
        path = _path(err["loc"], union_tags)
        if prefix:
            path = f"{prefix}.{path}" if path else prefix
        message = str(err["msg"])
        # "Value error, x" -> "x": the prefix is pydantic's, not the operator's business.
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        out.append(FieldError(path=path, message=message))
    return out


def errors_text(errors: Iterable[FieldError]) -> str:
    """One line per error, for a terminal or a log."""
    return "; ".join(str(e) for e in errors)


def describe(value: Any, limit: int = 60) -> str:
    """A short, printable rendering of a bad value for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
