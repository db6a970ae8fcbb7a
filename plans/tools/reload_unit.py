"""reload_unit: `systemctl reload` one unit."""

from plans.tools import systemctl, write_tool


@write_tool("reload_unit")
def argv(unit: str) -> list[str]:
    return systemctl("reload", unit)
