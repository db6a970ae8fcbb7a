"""Checking a plan against the executor's policy: the write tools' table, the allowlist in
the config, and the built-in denylist no config can lift."""

from plans.tools import TOOLS
from shared_schema import ExecutorPolicy, FieldError, Plan, denied_reason

__all__ = ["policy_errors", "step_argv"]


def policy_errors(plan: Plan, policy: ExecutorPolicy) -> list[FieldError]:
    """Everything in ``plan`` today's policy does not allow, as field errors."""
    errors: list[FieldError] = []
    for index, step in enumerate(plan.steps):
        unit = step.args.unit
        if step.tool not in TOOLS:
            errors.append(FieldError(path=f"steps.{index}.tool", message="unknown tool"))
            continue
        denied = denied_reason(unit)
        if denied is not None:
            errors.append(
                FieldError(
                    path=f"steps.{index}.args.unit",
                    message=f"{unit} is on the built-in denylist ({denied}); opsbot never "
                    "touches it",
                )
            )
        elif not policy.allows(step.tool, unit):
            allowed = policy.allow.get(step.tool, [])
            errors.append(
                FieldError(
                    path=f"steps.{index}.args.unit",
                    message=f"{step.tool} may not touch {unit}; allowed: "
                    + (", ".join(allowed) if allowed else "no unit"),
                )
            )
    return errors


def step_argv(plan: Plan) -> list[list[str]]:
    """Each step as the argv it will run."""
    return [TOOLS[step.tool].argv(step.args.unit) for step in plan.steps]
