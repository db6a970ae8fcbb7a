"""``[[executor.apply_window]]`` (and a standing approval rule's ``windows``): when
something may happen, as a systemd calendar expression and a timespan."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from shared_schema._model import Model
from shared_schema.limits import APPROVAL_CEILING_SECONDS
from shared_schema.timespan import parse_timespan


class ApplyWindow(Model):
    """One ``[[executor.apply_window]]``: when approved plans may run.

    ``start`` is a systemd calendar expression (systemd.time(7), checked by
    ``systemd-analyze calendar`` where it is used); ``duration`` a systemd timespan. The
    window is ``[start, start + duration)``: ``start = "Mon..Fri 02:00"``,
    ``duration = "2h"`` is 02:00 to 04:00 on weekdays (``02:00..04:00`` in a calendar
    expression would be 02:00 to 02:04).
    """

    start: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[ -~]+$")]
    duration: Annotated[str, Field(min_length=1, max_length=64)]

    @field_validator("duration")
    @classmethod
    def _timespan(cls, value: str) -> str:
        seconds = parse_timespan(value)
        if seconds is None:
            raise ValueError(f"{value!r} is not a systemd timespan (30min, 2h, '1h 30min')")
        if not 60 <= seconds <= APPROVAL_CEILING_SECONDS:
            raise ValueError(f"{value!r}: a window lasts from 1min to 7d")
        return value

    @property
    def seconds(self) -> float:
        seconds = parse_timespan(self.duration)
        assert seconds is not None  # checked by the validator
        return seconds
