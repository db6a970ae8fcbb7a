"""The read-tool dispatch table, and what a tool is.

A tool is a function ``(args, context) -> ToolOutput`` whose arguments are a pydantic
model and whose docstring is the description a policy (possibly a model) sees. Each tool
module registers itself with :func:`read_tool`; the table is :data:`READ_TOOLS`.

A tool declares what it gives, so that the runtime names no tool: its output model (the
function's return annotation), and through its argument model the kind of evidence a
call gives (``gives``: the ``state`` of a unit, its ``journal``, a ``health`` target)
about the subject its arguments name (:meth:`ToolArgs.subject`). The readiness rule (a
plan acts only on units whose state was read) and the "unknown" list of a note are made
from these declarations.
"""

from __future__ import annotations

import functools
import inspect
import threading
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from diagnose_svc.actions import ToolSpec
from diagnose_svc.errors import DiagnoseError, ToolError
from shared_schema import DiagnoseSettings, UnitName, field_errors

#: What a call can establish: a unit's live state, its journal, a health target, its
#: processes, the sockets listening, its effective unit file, its filesystems, its memory,
#: a timer's schedule.
EvidenceKind = Literal[
    "state",
    "journal",
    "health",
    "process",
    "listeners",
    "connections",
    "configured",
    "baseline",
    "unit_file",
    "disk",
    "memory",
    "timer",
    "changes",
    "limits",
    "certificates",
]
#: In words, for a note that lists what is still unknown.
EVIDENCE_WORDS: dict[EvidenceKind, str] = {
    "state": "the state of",
    "journal": "the journal of",
    "health": "health target",
    "process": "the processes of",
    "listeners": "the listening sockets",
    "connections": "the connections between units",
    "configured": "the endpoints units are configured with",
    "baseline": "the host as it was when last healthy",
    "unit_file": "the unit file of",
    "disk": "the filesystems of",
    "memory": "the memory of",
    "timer": "the timer",
    "changes": "what changed since the host was healthy for",
    "limits": "the descriptors and tasks against their limits of",
    "certificates": "the TLS certificates of",
}


class ToolArgs(BaseModel):
    """Base of every tool's arguments: unknown arguments are errors, strings are strict."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    #: The kind of evidence a call with these arguments gives (None: nothing specific).
    gives: ClassVar[EvidenceKind | None] = None

    def subject(self) -> str | None:
        """What the call is about (a unit, a target), for the evidence it gives."""
        return None


class HostToolArgs(ToolArgs):
    """The arguments of a tool about the whole host, or only what concerns ``unit``."""

    unit: UnitName | None = None

    def subject(self) -> str:
        return self.unit or "*"


class UnitToolArgs(ToolArgs):
    """The arguments of a tool about one unit: the evidence it gives is about ``unit``."""

    unit: UnitName

    def subject(self) -> str:
        return self.unit


class ToolOutput(BaseModel):
    """Base of what a tool returns. Shown to the policy as compact JSON of its fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def summary(self) -> str:
        """One line saying what the tool found, for the evidence list of a verdict."""
        raise NotImplementedError

    def related_units(self) -> list[str]:
        """Units this output points at that deserve a look (e.g. failed dependencies)."""
        return []

    def established(self) -> list[str]:
        """Names the answer establishes evidence for, besides the subject asked about
        (a unit's own name when it was asked for by an alias)."""
        return []

    def failing_target(self) -> tuple[str, str] | None:
        """The health target this answer saw fail and the unit that serves it ("" for
        none); None for any other answer."""
        return None

    def unit_result(self) -> tuple[str, str] | None:
        """A unit and systemd's Result= of it, where this answer read them; else None."""
        return None


T = TypeVar("T")


@dataclass(frozen=True)
class ToolContext:
    """What tools may consult besides their arguments.

    ``journal_path``: read journal files from this directory instead of the system
    journal (for tests and for looking at a copied journal). ``journal_scope``: the units
    whose journals this run may read (diagnose_svc/scope.py); None reads any, for runs
    that are not on an operator's behalf (tests, a copied journal). ``moment``: what
    the tools of one snapshot of the host have read, by what, so that two of them asking
    for the same reading (the socket dump, systemd's counters) take it once, even from
    threads of their own; None reads the present at every call (a diagnosis gives each
    step a moment of its own: :meth:`step`).
    """

    settings: DiagnoseSettings
    journal_path: Path | None = None
    journal_scope: frozenset[str] | None = None
    moment: dict[str, Any] | None = None
    #: The units this moment's calls ask about, by tool (``{"read_unit_status": (...)}``):
    #: a tool may read them all at once (one ``systemctl show`` for four statuses).
    asked: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False)
    _taking: threading.RLock = field(
        default_factory=threading.RLock, init=False, repr=False, compare=False
    )

    def once(self, what: str, read: Callable[[], T]) -> T:
        """``read()``, or the reading this moment already took of ``what``."""
        if self.moment is None:
            return read()
        with self._taking:
            if what not in self.moment:
                self.moment[what] = read()
            return cast(T, self.moment[what])

    def step(self, asked: Mapping[str, tuple[str, ...]] | None = None) -> ToolContext:
        """This context for the calls of one step (``asked``: the units they ask about,
        by tool): a moment of their own, unless it is one moment already."""
        if self.moment is not None:
            return self
        return replace(self, moment={}, asked=dict(asked or {}))


A = TypeVar("A", bound=ToolArgs)
O = TypeVar("O", bound=ToolOutput)  # noqa: E741


@dataclass(frozen=True)
class Tool:
    """One entry of a dispatch table: name, argument model, function, description."""

    name: str
    args_model: type[ToolArgs]
    output_model: type[ToolOutput]
    function: Callable[[Any, ToolContext], ToolOutput]
    description: str

    @property
    def gives(self) -> EvidenceKind | None:
        return self.args_model.gives

    def spec(self) -> ToolSpec:
        """The tool as a policy sees it (built once: every diagnosis shows the same)."""
        return _spec(self)

    def parse_args(self, raw: Mapping[str, Any]) -> ToolArgs:
        """Validate raw JSON arguments; ToolError lists each bad field."""
        try:
            return self.args_model.model_validate(dict(raw))
        except ValidationError as exc:
            errors = "; ".join(str(e) for e in field_errors(exc))
            raise ToolError(f"bad arguments for {self.name}: {errors}") from exc

    def __call__(self, args: ToolArgs, context: ToolContext) -> ToolOutput:
        return self.function(args, context)

    def answer(self, args: ToolArgs, context: ToolContext) -> ToolOutput | str:
        """Its output, or the operator's message of why it could not read (for code that
        reads outside a diagnosis: verification, the baseline)."""
        try:
            return self.function(args, context)
        except DiagnoseError as exc:
            return exc.message


def make_tool(
    args_model: type[A], function: Callable[[A, ToolContext], O], name: str | None = None
) -> Tool:
    """A Tool for ``function``, described by its docstring; its output model is the
    function's return annotation."""
    doc = inspect.getdoc(function)
    if not doc:
        raise TypeError(f"tool {function.__name__} needs a docstring: it is its description")
    output = typing.get_type_hints(function).get("return")
    if not (isinstance(output, type) and issubclass(output, ToolOutput)):
        raise TypeError(f"tool {function.__name__} must be annotated to return a ToolOutput")
    return Tool(
        name=name or function.__name__,
        args_model=args_model,
        output_model=output,
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


@functools.cache
def _spec(tool: Tool) -> ToolSpec:
    """A JSON schema takes pydantic about half a millisecond a tool to generate: once per
    process, not once per tool and diagnosis."""
    return ToolSpec(
        name=tool.name,
        description=tool.description,
        parameters=tool.args_model.model_json_schema(),
    )
