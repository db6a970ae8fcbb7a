"""The write tools, declared once: the name a plan step uses, the systemctl verb it runs
(what polkit sees), what it leaves the unit in, and one line saying what it does.

Everything else is derived from :data:`WRITE_TOOL_TABLE`: the plan's ``Step`` union
(shared_schema.plan), the names the config's allowlist knows (``ToolName``), the
``WRITE_TOOLS`` the diagnosis refuses to call, what verification waits for after a step
(``leaves``), and the words the console and the approval page use. A new write tool is one
row here plus its argv builder in plans/tools/.

Pure data: this module imports no model, so the console's fast paths read it without
building any.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["WRITE_TOOLS", "WRITE_TOOLS_BY_NAME", "WRITE_TOOL_TABLE", "WriteTool"]

#: What a step leaves its unit in, as verification checks it after the plan ran:
#: ``active`` (running; for a ``Type=oneshot`` service without ``RemainAfterExit=``, run
#: to a clean end: inactive with ``Result=success``, its exit status 0), ``inactive``
#: (stopped), or ``not-failed`` (no longer failed: said only where no other step of the
#: plan asks more of that unit).
Leaves = Literal["active", "inactive", "not-failed"]


@dataclass(frozen=True)
class WriteTool:
    name: str
    verb: str
    leaves: Leaves
    summary: str
    #: What it does to UNIT, said before the unit's name ("Restart" app.service): the
    #: approval page's headline.
    action: str

    @property
    def model_name(self) -> str:
        """The name of its step model: ``restart_unit`` -> ``RestartUnit``."""
        return "".join(part.capitalize() for part in self.name.split("_"))


WRITE_TOOL_TABLE: tuple[WriteTool, ...] = (
    WriteTool("restart_unit", "restart", "active", "stop the unit and start it again", "Restart"),
    WriteTool(
        "reload_unit", "reload", "active", "ask the running unit to reload its config", "Reload"
    ),
    WriteTool("start_unit", "start", "active", "start a unit that is not running", "Start"),
    WriteTool("stop_unit", "stop", "inactive", "stop a running unit", "Stop"),
    WriteTool(
        "reset_failed_unit",
        "reset-failed",
        "not-failed",
        "clear a unit's failed state and its start-limit counter",
        "Clear the failed state of",
    ),
)

WRITE_TOOLS: tuple[str, ...] = tuple(tool.name for tool in WRITE_TOOL_TABLE)
WRITE_TOOLS_BY_NAME: dict[str, WriteTool] = {tool.name: tool for tool in WRITE_TOOL_TABLE}


def expected_states(steps: list[tuple[str, str]]) -> dict[str, Leaves]:
    """Each unit of a plan's ``(tool, unit)`` steps and the state its steps leave it in:
    the last step's that says more than ``not-failed``, else ``not-failed`` (an unknown
    tool is taken to leave its unit ``active``)."""
    wanted: dict[str, Leaves] = {}
    for tool, unit in steps:
        declared = WRITE_TOOLS_BY_NAME.get(tool)
        leaves: Leaves = declared.leaves if declared else "active"
        if leaves == "not-failed":
            wanted.setdefault(unit, leaves)
        else:
            wanted[unit] = leaves
    return wanted
