"""A plan: a goal and 1 to 8 steps, each a write tool with its own validated arguments.

The plan is the only thing that crosses from diagnosis to execution. Its canonical JSON
is what is stored, fingerprinted, approved and run; nothing else is.
"""

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import (
    Field,
    StrictBool,
    ValidationError,
    create_model,
    model_validator,
)

from shared_schema._model import Model
from shared_schema.canonical import canonical_json, sha256_hex
from shared_schema.errors import FieldError, field_errors
from shared_schema.text import Goal, Reason
from shared_schema.units import PlanId, UnitName
from shared_schema.write_tools import WRITE_TOOL_TABLE, WRITE_TOOLS, WriteTool

__all__ = [
    "Expect",
    "Plan",
    "STEP_MODELS",
    "Step",
    "StepModel",
    "Symptom",
    "UnitArgs",
    "fingerprint",
    "parse_plan",
]

MAX_STEPS = 8
#: How the executor's refusals on history begin (plans.verification): a policy
#: that reads them knows restarts are not fixing the unit.
RESTART_BUDGET = "restart budget spent"
TRIED_BEFORE = "tried before"

ActiveState = Literal[
    "active",
    "reloading",
    "inactive",
    "failed",
    "activating",
    "deactivating",
    "maintenance",
]


class UnitArgs(Model):
    """Arguments of every unit tool: the one unit it acts on."""

    # (The docstring is the description a hosted model is shown: kept word for word.)

    unit: UnitName


class Expect(Model):
    """A precondition on the step's unit, checked against live state just before apply.

    A plan made for a failed unit must not run against one that has since recovered:
    when any given field does not match, the plan is STALE and nothing runs.
    """

    active_state: Annotated[list[ActiveState], Field(min_length=1, max_length=7)] | None = None
    sub_state: (
        Annotated[
            list[Annotated[str, Field(pattern=r"^[a-z-]{1,32}$")]],
            Field(min_length=1, max_length=8),
        ]
        | None
    ) = None
    invocation_id: Annotated[str, Field(pattern=r"^([0-9a-f]{32})?$")] | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> "Expect":
        if self.active_state is None and self.sub_state is None and self.invocation_id is None:
            raise ValueError("expect needs at least one of active_state, sub_state, invocation_id")
        return self


class StepModel(Model):
    """A plan step: a write tool, its arguments, an optional precondition and reason.

    Each write tool of the table has its own subclass (``RestartUnit`` ...) whose
    ``tool`` is that tool's name and whose ``args`` are that tool's model; ``Step`` is
    their union, told apart by ``tool``.
    """

    tool: str
    args: UnitArgs
    expect: Expect | None = None
    reason: Reason | None = None


def _step_model(tool: WriteTool) -> type[StepModel]:
    name: Any = Literal[tool.name]  # a Literal made at run time: one per row of the table
    return create_model(
        tool.model_name,
        __base__=StepModel,
        __doc__=f"{tool.name}: {tool.summary}.",
        __module__=__name__,
        tool=(name, ...),
        args=(UnitArgs, ...),
    )


STEP_MODELS: dict[str, type[StepModel]] = {t.name: _step_model(t) for t in WRITE_TOOL_TABLE}

if TYPE_CHECKING:
    Step = StepModel
else:
    Step = Annotated[Union[tuple(STEP_MODELS.values())], Field(discriminator="tool")]  # noqa: UP007


#: A health target's name, as the config's [diagnose.health.NAME] tables give it.
TargetName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")]


#: systemd's values of a service's Result= (systemd.exec(5), org.freedesktop.systemd1).
SYSTEMD_RESULTS = (
    "success",
    "protocol",
    "resources",
    "timeout",
    "exit-code",
    "signal",
    "core-dump",
    "watchdog",
    "start-limit-hit",
    "oom-kill",
    "exec-condition",
    "condition",
)
if TYPE_CHECKING:
    SystemdResult = str
else:
    SystemdResult = Literal[SYSTEMD_RESULTS]


class Symptom(Model):
    """What the operator saw, that the plan is meant to cure: the unit asked about and
    the health targets that failed when it was diagnosed. The diagnosis's code sets it
    from what its tools answered (never the model); verification samples it, and a
    plan is VERIFIED only when it is gone."""

    unit: UnitName
    health: Annotated[list[TargetName], Field(max_length=16)] = []
    #: systemd's Result= of ``unit`` when diagnosis first read it (``signal``: killed;
    #: ``oom-kill``, ``exit-code``, ``core-dump``, ``timeout``, ``watchdog``,
    #: ``start-limit-hit``...): the kind of cause, in systemd's words, not the model's.
    #: Shown to the approver; a standing rule never trusts it (it reads Result= itself:
    #: plans.readings). Absent where it was not read.
    result: SystemdResult | None = None


class Plan(Model):
    """What diagnosis proposes and an operator approves. Any other key is an error."""

    # (The docstring is the description a hosted model is shown: kept word for word.)

    goal: Goal
    steps: Annotated[list[Step], Field(min_length=1, max_length=MAX_STEPS)]
    stop_on_error: StrictBool = True
    # Hashed with the steps: an operator approves a fix for a symptom, and a second
    # attempt as the second attempt (``follows``: the plan that ran and did not cure it;
    # the executor checks it and sets the incident). Written by the diagnosis's runtime,
    # never shown to the model (diagnose_svc/policies/prompt.py).
    symptom: Symptom | None = None
    follows: PlanId | None = None

    def canonical(self) -> bytes:
        """The bytes that are stored, fingerprinted and approved."""
        return canonical_json(self.model_dump(mode="json", exclude_none=True))

    def fingerprint(self) -> str:
        """sha256 of the canonical plan: same plan, same fingerprint; any change, a new one."""
        return sha256_hex(self.canonical())

    def units(self) -> list[str]:
        """Every unit the plan touches, in step order, without repeats."""
        seen: dict[str, None] = {}
        for step in self.steps:
            seen.setdefault(step.args.unit, None)
        return list(seen)


def fingerprint(plan: Plan) -> str:
    """sha256 hex of ``plan``'s canonical JSON."""
    return plan.fingerprint()


def parse_plan(data: Any) -> Plan | list[FieldError]:
    """Validate a decoded JSON value as a plan: the plan, or field-level errors."""
    if not isinstance(data, dict):
        return [FieldError(path="", message=f"a plan is a JSON object, not {type(data).__name__}")]
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        return field_errors(exc, union_tags=frozenset(WRITE_TOOLS))
