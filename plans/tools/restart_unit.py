"""restart_unit: `systemctl restart` one unit."""

from plans.tools import systemctl, write_tool


@write_tool("restart_unit")
def argv(unit: str) -> list[str]:
    return systemctl("restart", unit)
