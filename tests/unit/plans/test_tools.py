"""The write tools: each step is exactly one systemctl argv. (The polkit rule that lets
the executor's user do exactly what the allowlist says: test_executor_polkit.py.)"""

import pytest

from plans import TOOLS, policy_errors, step_argv
from shared_schema import WRITE_TOOLS, ExecutorPolicy

from .helpers import plan_of, step

VERBS = {
    "restart_unit": "restart",
    "reload_unit": "reload",
    "start_unit": "start",
    "stop_unit": "stop",
    "reset_failed_unit": "reset-failed",
}


def test_the_tool_table_is_exactly_the_schemas_write_tools() -> None:
    """Every tool a plan may name has a module that builds its argv, and no other tool
    exists."""
    assert set(TOOLS) == set(WRITE_TOOLS)
    assert {name: tool.name for name, tool in TOOLS.items()} == {name: name for name in WRITE_TOOLS}


@pytest.mark.parametrize(("tool", "verb"), VERBS.items())
def test_each_tool_runs_one_systemctl_verb_that_never_prompts_or_reads_options(
    tool: str, verb: str
) -> None:
    """``systemctl VERB --no-ask-password -- UNIT``: no password prompt, and the unit
    after ``--`` so it can never be read as an option."""
    assert TOOLS[tool].verb == verb
    assert TOOLS[tool].argv("nginx.service") == [
        "systemctl",
        verb,
        "--no-ask-password",
        "--",
        "nginx.service",
    ]


def test_restart_is_exactly_the_documented_argv() -> None:
    """The argv an operator sees in ``opsbot show`` for a restart."""
    assert TOOLS["restart_unit"].argv("nginx.service") == [
        "systemctl",
        "restart",
        "--no-ask-password",
        "--",
        "nginx.service",
    ]


def test_a_plan_becomes_one_argv_per_step_in_order() -> None:
    """step_argv is what will run, step by step."""
    plan = plan_of(step("reset_failed_unit", "nginx.service"), step("start_unit", "nginx.service"))
    assert step_argv(plan) == [
        ["systemctl", "reset-failed", "--no-ask-password", "--", "nginx.service"],
        ["systemctl", "start", "--no-ask-password", "--", "nginx.service"],
    ]


def test_policy_names_each_step_it_refuses() -> None:
    """Checked against the allowlist, each refused step is a field error at its unit,
    naming what is allowed for that tool."""
    policy = ExecutorPolicy(allow={"restart_unit": ["nginx.service", "app.service"]})
    plan = plan_of(
        step("restart_unit", "nginx.service"),
        step("restart_unit", "redis.service"),
        step("stop_unit", "nginx.service"),
        step("restart_unit", "sshd.service"),
    )
    assert [(e.path, e.message) for e in policy_errors(plan, policy)] == [
        (
            "steps.1.args.unit",
            "restart_unit may not touch redis.service; allowed: nginx.service, app.service",
        ),
        ("steps.2.args.unit", "stop_unit may not touch nginx.service; allowed: no unit"),
        (
            "steps.3.args.unit",
            "sshd.service is on the built-in denylist (ssh*); opsbot never touches it",
        ),
    ]
