"""reload_unit: `systemctl reload` one unit."""

from executor_svc.tools import systemctl, write_tool
from shared_schema import UnitArgs


@write_tool("reload_unit")
def argv(args: UnitArgs) -> list[str]:
    return systemctl("reload", args.unit)
