"""The write tools, declared once: the name a plan step uses, the systemctl verb it runs
(what polkit sees), the model of its arguments, and one line saying what it does.

Everything else is derived from :data:`WRITE_TOOL_TABLE`: the plan's ``Step`` union
(shared_schema.plan), the names the config's allowlist knows (``ToolName``), and the
``WRITE_TOOLS`` the diagnosis refuses to call. A new write tool is one row here plus its
module in executor_svc/tools/, which turns its arguments into the argv it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared_schema._model import Model
from shared_schema.units import UnitName


class UnitArgs(Model):
    """Arguments of every unit tool: the one unit it acts on."""

    unit: UnitName


@dataclass(frozen=True)
class WriteTool:
    name: str
    verb: str
    #: Every write tool acts on one unit (polkit authorises per unit and verb), so its
    #: arguments are UnitArgs or a model derived from it.
    args: type[UnitArgs]
    summary: str

    @property
    def model_name(self) -> str:
        """The name of its step model: ``restart_unit`` -> ``RestartUnit``."""
        return "".join(part.capitalize() for part in self.name.split("_"))


WRITE_TOOL_TABLE: tuple[WriteTool, ...] = (
    WriteTool("restart_unit", "restart", UnitArgs, "stop the unit and start it again"),
    WriteTool("reload_unit", "reload", UnitArgs, "ask the running unit to reload its config"),
    WriteTool("start_unit", "start", UnitArgs, "start a unit that is not running"),
    WriteTool("stop_unit", "stop", UnitArgs, "stop a running unit"),
    WriteTool(
        "reset_failed_unit",
        "reset-failed",
        UnitArgs,
        "clear a unit's failed state and its start-limit counter",
    ),
)

WRITE_TOOLS: tuple[str, ...] = tuple(tool.name for tool in WRITE_TOOL_TABLE)
WRITE_TOOLS_BY_NAME: dict[str, WriteTool] = {tool.name: tool for tool in WRITE_TOOL_TABLE}
