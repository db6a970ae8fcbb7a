"""The read-tool dispatch table, and what a tool is.

A tool is a function ``(args, context) -> ToolOutput`` whose arguments are a pydantic
model and whose docstring is the description a policy (possibly a model) sees. Each tool
module registers itself with :func:`read_tool`; the table is :data:`READ_TOOLS`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from diagnose_svc.actions import ToolSpec
from diagnose_svc.errors import ToolError
from shared_schema import DiagnoseSettings, field_errors


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown arguments are errors, strings are strict."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ToolOutput(BaseModel):
    """Base of what a tool returns. Shown to the policy as compact JSON of its fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def summary(self) -> str:
        """One line saying what the tool found, for the evidence list of a verdict."""
        raise NotImplementedError

    def related_units(self) -> list[str]:
        """Units this output points at that deserve a look (e.g. failed dependencies)."""
        return []


@dataclass(frozen=True)
class ToolContext:
    """What tools may consult besides their arguments.

    ``journal_path``: read journal files from this directory instead of the system
    journal (for tests and for looking at a copied journal).
    """

    settings: DiagnoseSettings
    journal_path: Path | None = None


A = TypeVar("A", bound=ToolArgs)
O = TypeVar("O", bound=ToolOutput)  # noqa: E741


@dataclass(frozen=True)
class Tool:
    """One entry of a dispatch table: name, argument model, function, description."""

    name: str
    args_model: type[ToolArgs]
    function: Callable[[Any, ToolContext], ToolOutput]
    description: str

    def spec(self) -> ToolSpec:
        """The tool as a policy sees it."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.args_model.model_json_schema(),
        )

    def parse_args(self, raw: Mapping[str, Any]) -> ToolArgs:
        """Validate raw JSON arguments; ToolError lists each bad field."""
        try:
            return self.args_model.model_validate(dict(raw))
        except ValidationError as exc:
            errors = "; ".join(str(e) for e in field_errors(exc))
            raise ToolError(f"bad arguments for {self.name}: {errors}") from exc

    def __call__(self, args: ToolArgs, context: ToolContext) -> ToolOutput:
        return self.function(args, context)


def make_tool(
    args_model: type[A], function: Callable[[A, ToolContext], O], name: str | None = None
) -> Tool:
    """A Tool for ``function``, described by its docstring."""
    doc = inspect.getdoc(function)
    if not doc:
        raise TypeError(f"tool {function.__name__} needs a docstring: it is its description")
    return Tool(
        name=name or function.__name__,
        args_model=args_model,
        function=function,
        description=doc,
    )


#: name -> Tool, filled by each tool module as it is imported.
READ_TOOLS: dict[str, Tool] = {}


def read_tool(
    args_model: type[A],
) -> Callable[[Callable[[A, ToolContext], O]], Callable[[A, ToolContext], O]]:
    """Register the decorated function as a read tool named after it."""

    def register(function: Callable[[A, ToolContext], O]) -> Callable[[A, ToolContext], O]:
        tool = make_tool(args_model, function)
        if tool.name in READ_TOOLS:
            raise RuntimeError(f"read tool {tool.name} is registered twice")
        READ_TOOLS[tool.name] = tool
        return function

    return register
