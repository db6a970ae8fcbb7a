"""reset_failed_unit: `systemctl reset-failed` one unit (clears a hit start limit)."""

from plans.tools import systemctl, write_tool


@write_tool("reset_failed_unit")
def argv(unit: str) -> list[str]:
    return systemctl("reset-failed", unit)
