"""The executor's write tools: each turns its validated arguments into the argv it runs.

Which tools exist, their systemctl verb and their argument model are declared once, in
shared_schema.write_tools. Each tool here is one module named after it that registers
the function building its argv with ``@write_tool(name)``; loading the package imports
the module of every tool in the table, and a tool without one is an error at import. If
a step cannot be printed as argv, it is not a step.
"""

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from shared_schema import WRITE_TOOL_TABLE, WRITE_TOOLS_BY_NAME, UnitArgs


@dataclass(frozen=True)
class ExecutorTool:
    name: str
    verb: str  # the systemd verb polkit sees for it
    argv: Callable[[UnitArgs], list[str]]


TOOLS: dict[str, ExecutorTool] = {}


def write_tool(name: str) -> Callable[[Callable[[UnitArgs], list[str]]], ExecutorTool]:
    """Register the decorated function as the argv of write tool ``name`` (a row of
    shared_schema.WRITE_TOOL_TABLE)."""
    declared = WRITE_TOOLS_BY_NAME[name]

    def register(build: Callable[[UnitArgs], list[str]]) -> ExecutorTool:
        tool = ExecutorTool(declared.name, declared.verb, build)
        TOOLS[name] = tool
        return tool

    return register


def systemctl(verb: str, unit: str) -> list[str]:
    """``systemctl VERB --no-ask-password -- UNIT``: never prompts, never parses UNIT as
    an option, and no other option (no ``--job-mode``) is ever passed."""
    return ["systemctl", verb, "--no-ask-password", "--", unit]


def _load() -> None:
    for declared in WRITE_TOOL_TABLE:
        importlib.import_module(f"{__name__}.{declared.name}")
        if declared.name not in TOOLS:
            raise ImportError(
                f"{__name__}.{declared.name} does not register write tool {declared.name}"
            )


_load()
