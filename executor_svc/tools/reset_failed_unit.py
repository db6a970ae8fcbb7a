"""reset_failed_unit: `systemctl reset-failed` one unit (clears a hit start limit)."""

from executor_svc.tools import systemctl, write_tool
from shared_schema import UnitArgs


@write_tool("reset_failed_unit")
def argv(args: UnitArgs) -> list[str]:
    return systemctl("reset-failed", args.unit)
