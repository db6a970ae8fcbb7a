"""The read tools of the diagnosis service, and their dispatch table.

Each tool lives in its own module and registers itself in :data:`READ_TOOLS` (name ->
:class:`Tool`: argument model, function, description = the function's docstring, which is
what a policy sees). Write tools do not exist here; they live only in the executor.

===================  ===============  ===============================================
tool                 arguments        returns
===================  ===============  ===============================================
read_unit_status     UnitArgs         UnitStatus
http_get_health      HealthArgs       HealthResult
tail_journal         JournalArgs      JournalTail
list_failed_units    NoArgs           FailedUnits
===================  ===============  ===============================================
"""

from diagnose_svc.tools._registry import (
    READ_TOOLS,
    Tool,
    ToolArgs,
    ToolContext,
    ToolOutput,
    make_tool,
    read_tool,
)
from diagnose_svc.tools.http_get_health import HealthArgs, HealthResult
from diagnose_svc.tools.list_failed_units import FailedUnit, FailedUnits, NoArgs
from diagnose_svc.tools.read_unit_status import DependencyState, UnitArgs, UnitStatus
from diagnose_svc.tools.tail_journal import JournalArgs, JournalLine, JournalTail

#: What each tool returns, by tool name: how an observation is read back.
OUTPUT_MODELS: dict[str, type[ToolOutput]] = {
    "read_unit_status": UnitStatus,
    "http_get_health": HealthResult,
    "tail_journal": JournalTail,
    "list_failed_units": FailedUnits,
}

__all__ = [
    "OUTPUT_MODELS",
    "READ_TOOLS",
    "DependencyState",
    "FailedUnit",
    "FailedUnits",
    "HealthArgs",
    "HealthResult",
    "JournalArgs",
    "JournalLine",
    "JournalTail",
    "NoArgs",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolOutput",
    "UnitArgs",
    "UnitStatus",
    "make_tool",
    "read_tool",
]
