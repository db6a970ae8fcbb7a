"""stop_unit: `systemctl stop` one unit."""

from executor_svc.tools import systemctl, write_tool
from shared_schema import UnitArgs


@write_tool("stop_unit")
def argv(args: UnitArgs) -> list[str]:
    return systemctl("stop", args.unit)
