"""list_failed_units: the units systemd holds as failed, from its JSON output."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from diagnose_svc._model import Model
from diagnose_svc.limits import (
    COMMAND_PARSE_LIMIT,
    COMMAND_TIMEOUT_SECONDS,
    FAILED_UNITS_LIMIT,
    TOOL_OUTPUT_BUDGET,
)
from diagnose_svc.tools._registry import ToolArgs, ToolContext, ToolOutput, read_tool
from shared_io.errors import CommandFailed
from shared_io.run import run

ARGV = ("systemctl", "list-units", "--state=failed", "--output=json", "--no-pager")


class NoArgs(ToolArgs):
    pass


class _Row(BaseModel):
    # systemctl's own JSON: tolerate columns a later systemd adds.
    model_config = ConfigDict(extra="ignore")

    unit: str
    load: str
    active: str
    sub: str
    description: str = ""


_ROWS = TypeAdapter(list[_Row])


class FailedUnit(Model):
    unit: str
    load: str
    active: str
    sub: str
    description: str


class FailedUnits(ToolOutput):
    """The failed units, as ``systemctl list-units --state=failed`` shows them; ``omitted``
    counts those left out to keep the answer short."""

    units: list[FailedUnit]
    omitted: int = 0

    def summary(self) -> str:
        if not self.units:
            return "no failed units"
        names = ", ".join(u.unit for u in self.units[:8])
        more = len(self.units) - 8 + self.omitted
        return f"{len(self.units) + self.omitted} failed units: {names}" + (
            f" and {more} more" if more > 0 else ""
        )

    def related_units(self) -> list[str]:
        return [u.unit for u in self.units]


def parse_failed_units(text: str) -> FailedUnits:
    """Parse ``systemctl list-units --output=json`` output."""
    try:
        rows = _ROWS.validate_json(text)
    except ValidationError as exc:
        raise CommandFailed(
            f"systemctl list-units printed JSON opsbot does not understand: {exc.errors()[:1]}"
        ) from exc
    units = [
        FailedUnit(
            unit=row.unit,
            load=row.load,
            active=row.active,
            sub=row.sub,
            description=row.description[:120],
        )
        for row in rows[:FAILED_UNITS_LIMIT]
    ]
    # Keep what fits the observation budget (the first units, as systemctl sorts them).
    while units and len(FailedUnits(units=units).model_dump_json()) > TOOL_OUTPUT_BUDGET:
        units.pop()
    return FailedUnits(units=units, omitted=len(rows) - len(units))


@read_tool(NoArgs)
def list_failed_units(args: NoArgs, context: ToolContext) -> FailedUnits:
    """List the units systemd holds as failed: unit, load, active and sub state, description.

    Takes no arguments.
    """
    result = run(ARGV, timeout=COMMAND_TIMEOUT_SECONDS, output_limit=COMMAND_PARSE_LIMIT).check()
    return parse_failed_units(result.stdout)
