"""The write tools and the polkit rule: each step is exactly one systemctl argv, and
polkit lets the executor's user do exactly what the allowlist says."""

import json
import re

import pytest

from executor_svc.policy import policy_errors, step_argv
from executor_svc.polkit import allowed_verbs, render_rule
from executor_svc.tools import TOOLS
from shared_schema import WRITE_TOOLS, ExecutorPolicy, UnitArgs

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
    assert TOOLS[tool].argv(UnitArgs(unit="nginx.service")) == [
        "systemctl",
        verb,
        "--no-ask-password",
        "--",
        "nginx.service",
    ]


def test_restart_is_exactly_the_documented_argv() -> None:
    """The argv an operator sees in ``opsbot show`` for a restart."""
    assert TOOLS["restart_unit"].argv(UnitArgs(unit="nginx.service")) == [
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


POLICY = ExecutorPolicy(
    allow={
        "restart_unit": ["nginx.service", "app.service"],
        "reset_failed_unit": ["nginx.service"],
        "reload_unit": ["nginx.service"],
    }
)


def _allowed_in(rule: str) -> dict[str, list[str]]:
    match = re.search(r"var allowed = (\{.*?\});", rule, re.DOTALL)
    assert match, rule
    allowed: dict[str, list[str]] = json.loads(match.group(1))
    return allowed


def test_the_polkit_rule_allows_each_allowed_verb_on_each_allowed_unit() -> None:
    """The generated rule maps each systemd verb (as polkit sees it) to exactly the
    allowlisted units, for the executor's user and systemd's manage-units action only."""
    rule = render_rule(POLICY)
    assert _allowed_in(rule) == {
        "reload": ["nginx.service"],
        "reset-failed": ["nginx.service"],
        "restart": ["app.service", "nginx.service"],
    }
    assert _allowed_in(rule) == allowed_verbs(POLICY)
    assert 'subject.user !== "opsbot-executor"' in rule
    assert 'action.id !== "org.freedesktop.systemd1.manage-units"' in rule
    assert rule.rstrip().endswith("});")
    assert "return polkit.Result.NO;" in rule


def test_the_polkit_rule_mentions_nothing_that_is_not_allowed() -> None:
    """Verbs and units not in the allowlist, and denylisted units, appear nowhere in the
    rule."""
    rule = render_rule(POLICY)
    for absent in (
        '"stop"',
        '"start"',
        "redis.service",
        "sshd",
        "dbus",
        "journald",
        "opsbot-diagnose",
    ):
        assert absent not in rule


def test_an_empty_allowlist_gives_a_rule_that_allows_nothing() -> None:
    """With nothing allowed, the rule's table is empty: every request is answered NO."""
    assert _allowed_in(render_rule(ExecutorPolicy())) == {}


def test_the_executor_user_in_the_rule_is_quoted() -> None:
    """The user name is written as a JSON string, so no name can break out of it."""
    rule = render_rule(POLICY, executor_user='x" || true || "')
    assert 'subject.user !== "x\\" || true || \\""' in rule
