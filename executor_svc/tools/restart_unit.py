"""restart_unit: `systemctl restart` one unit."""

from executor_svc.tools import systemctl, write_tool
from shared_schema import UnitArgs


@write_tool("restart_unit")
def argv(args: UnitArgs) -> list[str]:
    return systemctl("restart", args.unit)
