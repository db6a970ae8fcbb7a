"""The read tools of the diagnosis service, and their dispatch table.

Each tool lives in its own module and registers itself in :data:`READ_TOOLS` (name ->
:class:`Tool`: argument model, output model, function, description = the function's
docstring, which is what a policy sees). Loading this package imports every module in
it, so a new tool is one new module. Write tools do not exist here; they live only in the
executor.

===================  ===============  ===============================================
tool                 arguments        returns
===================  ===============  ===============================================
read_unit_status     UnitArgs         UnitStatus
http_get_health      HealthArgs       HealthResult
tail_journal         JournalArgs      JournalTail
list_failed_units    NoArgs           FailedUnits
read_process_state   ProcessArgs      ProcessState
list_listeners       ListenersArgs    Listeners
read_connections     ConnectionsArgs  Connections
read_config_edges    ConfigEdgesArgs  ConfigEdges
read_baseline        BaselineArgs     Baseline
read_unit_file       UnitFileArgs     UnitFile
disk_usage           DiskArgs         DiskUsage
read_memory          MemoryArgs       MemoryState
read_timer           TimerArgs        TimerState
read_changes         ChangesArgs      Changes
read_limits          LimitsArgs       Limits
read_certificates    CertificatesArgs Certificates
===================  ===============  ===============================================
"""

import importlib
import pkgutil

from diagnose_svc.tools._registry import (
    EVIDENCE_WORDS,
    READ_TOOLS,
    EvidenceKind,
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

__all__ = [
    "EVIDENCE_WORDS",
    "READ_TOOLS",
    "DependencyState",
    "EvidenceKind",
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


def _load_every_tool() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


_load_every_tool()
