"""start_unit: `systemctl start` one unit."""

from plans.tools import systemctl, write_tool


@write_tool("start_unit")
def argv(unit: str) -> list[str]:
    return systemctl("start", unit)
