"""The write tools' argv builders: each turns the unit a step acts on into the argv the
apply runs.

Which tools exist, their systemctl verb and what they leave a unit in are declared once,
in shared_schema.write_tools. Each tool here is one module named after it that registers
the function building its argv with ``@write_tool(name)``; loading the package imports
the module of every tool in the table, and a tool without one is an error at import. If
a step cannot be printed as argv, it is not a step. The executor runs these argv, the
console and the approval page show them, and ``opsbot show`` checks the executor's answer
against them: one builder for all.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from shared_schema.write_tools import WRITE_TOOL_TABLE, WRITE_TOOLS_BY_NAME

__all__ = ["TOOLS", "ExecutorTool", "argv_of", "systemctl", "write_tool"]


@dataclass(frozen=True)
class ExecutorTool:
    name: str
    verb: str  # the systemd verb polkit sees for it
    argv: Callable[[str], list[str]]


TOOLS: dict[str, ExecutorTool] = {}


def write_tool(name: str) -> Callable[[Callable[[str], list[str]]], ExecutorTool]:
    """Register the decorated function (the unit -> the argv) as the argv of write tool
    ``name`` (a row of shared_schema.WRITE_TOOL_TABLE)."""
    declared = WRITE_TOOLS_BY_NAME[name]

    def register(build: Callable[[str], list[str]]) -> ExecutorTool:
        tool = ExecutorTool(declared.name, declared.verb, build)
        TOOLS[name] = tool
        return tool

    return register


def systemctl(verb: str, unit: str) -> list[str]:
    """``systemctl VERB --no-ask-password -- UNIT``: never prompts, never parses UNIT as
    an option, and no other option (no ``--job-mode``) is ever passed."""
    return ["systemctl", verb, "--no-ask-password", "--", unit]


def argv_of(steps: Iterable[Mapping[str, Any]]) -> list[list[str]]:
    """Each step of a plan in its JSON form (``{"tool": ..., "args": {"unit": ...}}``) as
    the argv it runs (the console reads plans as JSON)."""
    return [TOOLS[step["tool"]].argv(step["args"]["unit"]) for step in steps]


def _load() -> None:
    for declared in WRITE_TOOL_TABLE:
        importlib.import_module(f"{__name__}.{declared.name}")
        if declared.name not in TOOLS:
            raise ImportError(
                f"{__name__}.{declared.name} does not register write tool {declared.name}"
            )


_load()
