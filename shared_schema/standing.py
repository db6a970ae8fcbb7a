"""Standing approvals: root's ``[[approve.rule]]`` tables in opsbot.toml, each a rule that
may approve a routine fix in a human's place (plans.standing decides; nothing here does).

A rule names exactly what it may approve, and nothing is implied:

- ``tools``: the write tools, each by name (``start_unit``, ``restart_unit``,
  ``reset_failed_unit``; ``stop_unit`` and ``reload_unit`` only when named). There is no
  wildcard.
- ``units``: exact unit names or shell globs (``worker@*.service``) that end in a unit
  suffix; a plan's unit must also be in ``[executor.allow]`` for that tool when the rule
  is asked, so a rule never reaches past the allowlist.
- ``causes``: systemd's Result= of each step's unit as root reads it when the rule is
  asked (``signal``, ``oom-kill``...), to narrow by; none: any.
- ``windows``: when it may approve (the apply windows' syntax; none: any time).
- ``max_per_unit`` approvals of one unit within ``period`` at most, counting every rule's
  (a unit's budget is shared by the rules that reach it).

Whatever it names, a rule approves only a fix of units root reads failing itself
(plans.readings), never on the plan's own words.
- ``mode``: ``shadow`` (the default: root's approver only records what it would
  approve, for ``opsbot policy report``); ``enforce``: it writes the approval.

::

    [[approve.rule]]
    name = "night-restarts"
    mode = "shadow"
    tools = ["restart_unit", "start_unit"]
    units = ["app.service", "worker@*.service"]
    max_per_unit = 3
    period = "24h"
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from shared_schema._model import Model
from shared_schema.apply_window import ApplyWindow
from shared_schema.canonical import canonical_json
from shared_schema.plan import SYSTEMD_RESULTS, SystemdResult
from shared_schema.timespan import parse_timespan
from shared_schema.units import check_unit
from shared_schema.write_tools import WRITE_TOOLS

if TYPE_CHECKING:
    RuleTool = str
else:
    #: The tools a rule may name, each only by its name: the write tools of the table.
    RuleTool = Literal[WRITE_TOOLS]
RuleName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,47}$")]
#: Glob characters a unit pattern may hold (fnmatch's, without escapes).
_GLOB = re.compile(r"\[[^\]/]*\]|[*?]")
#: The shortest and the longest period a limit counts over.
PERIOD_MIN_SECONDS = 3600
PERIOD_MAX_SECONDS = 30 * 86400


def check_unit_pattern(pattern: str) -> str:
    """An exact unit name, or a glob that would be one with each wildcard filled in: it
    ends in a unit suffix, so ``*`` alone (every unit) is refused."""
    filled = _GLOB.sub("x", pattern)
    try:
        check_unit(filled)
    except ValueError:
        raise ValueError(
            f"{pattern[:80]!r} is not a unit name, nor a glob of unit names that ends in a "
            "unit suffix such as .service"
        ) from None
    return pattern


UnitPattern = Annotated[str, AfterValidator(check_unit_pattern)]


class ApproveRule(Model):
    """One ``[[approve.rule]]``."""

    name: RuleName
    mode: Literal["shadow", "enforce"] = "shadow"
    tools: Annotated[list[RuleTool], Field(min_length=1, max_length=len(WRITE_TOOLS))]
    units: Annotated[list[UnitPattern], Field(min_length=1, max_length=64)]
    #: Only plans whose every unit ended so, as root reads it when asked (systemd's
    #: Result=: ``signal`` for killed, ``oom-kill``, ``exit-code``...); none: any. A
    #: narrowing only: the tools, units, windows and limits must be safe without it.
    causes: Annotated[list[SystemdResult], Field(max_length=len(SYSTEMD_RESULTS))] = []
    windows: Annotated[list[ApplyWindow], Field(max_length=16)] = []
    max_per_unit: Annotated[int, Field(ge=1, le=20)] = 3
    period: Annotated[str, Field(min_length=1, max_length=64)] = "24h"

    @field_validator("tools")
    @classmethod
    def _each_once(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("a tool is named twice")
        return value

    @field_validator("period")
    @classmethod
    def _period(cls, value: str) -> str:
        seconds = parse_timespan(value)
        if seconds is None:
            raise ValueError(f"{value!r} is not a systemd timespan (12h, 1d, '1d 12h')")
        if not PERIOD_MIN_SECONDS <= seconds <= PERIOD_MAX_SECONDS:
            raise ValueError(f"{value!r}: a period lasts from 1h to 30d")
        return value

    @property
    def sha256(self) -> str:
        """The rule as it stands, fingerprinted: recorded with each approval it writes, so
        the audit says which wording of the rule approved."""
        return hashlib.sha256(canonical_json(self.model_dump(mode="json"))).hexdigest()

    @property
    def period_seconds(self) -> float:
        seconds = parse_timespan(self.period)
        assert seconds is not None  # checked by the validator
        return seconds


class StandingApprovals(Model):
    """``[approve]``: the rules, in the order they are asked (the first that approves
    decides)."""

    rule: Annotated[list[ApproveRule], Field(max_length=64)] = []

    @model_validator(mode="after")
    def _unique_names(self) -> StandingApprovals:
        names = [rule.name for rule in self.rule]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"rule names must differ: {', '.join(twice)} is used twice")
        return self


__all__ = [
    "ApproveRule",
    "RuleName",
    "RuleTool",
    "StandingApprovals",
    "UnitPattern",
    "check_unit_pattern",
]
