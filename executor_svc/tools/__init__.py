"""The executor's write tools: each turns validated args into the argv it will run.

One module per tool; each registers itself here with ``@write_tool``. A plan step names
a tool from this table, and nothing else can run: if a step cannot be printed as argv,
it is not a step.
"""

from collections.abc import Callable
from dataclasses import dataclass

from shared_schema import UnitArgs


@dataclass(frozen=True)
class WriteTool:
    name: str
    verb: str  # the systemd verb polkit sees for it
    argv: Callable[[UnitArgs], list[str]]


TOOLS: dict[str, WriteTool] = {}


def write_tool(name: str, verb: str) -> Callable[[Callable[[UnitArgs], list[str]]], WriteTool]:
    def register(build: Callable[[UnitArgs], list[str]]) -> WriteTool:
        tool = WriteTool(name, verb, build)
        TOOLS[name] = tool
        return tool

    return register


def systemctl(verb: str, unit: str) -> list[str]:
    """``systemctl VERB --no-ask-password -- UNIT``: never prompts, never parses UNIT as
    an option."""
    return ["systemctl", verb, "--no-ask-password", "--", unit]


def _load() -> None:
    from executor_svc.tools import (  # noqa: F401
        reload_unit,
        reset_failed_unit,
        restart_unit,
        start_unit,
        stop_unit,
    )


_load()
