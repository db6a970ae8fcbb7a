"""start_unit: `systemctl start` one unit."""

from executor_svc.tools import systemctl, write_tool
from shared_schema import UnitArgs


@write_tool("start_unit")
def argv(args: UnitArgs) -> list[str]:
    return systemctl("start", args.unit)
