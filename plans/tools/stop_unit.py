"""stop_unit: `systemctl stop` one unit."""

from plans.tools import systemctl, write_tool


@write_tool("stop_unit")
def argv(unit: str) -> list[str]:
    return systemctl("stop", unit)
