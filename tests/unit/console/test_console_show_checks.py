"""`opsbot show` checks the executor's answer before an operator copies a sha256 off it to
`approve --sha256`: a subverted executor could show one plan beside another's sha256 (one
it logged and stored), or argv that is not what the plan runs."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from opsbot_cli.errors import ConsoleError
from opsbot_cli.show import check_detail
from plans import step_argv
from shared_schema import Plan, PlanDetail, PlanSummary, sha256_hex

SHOWN = Plan.model_validate(
    {"goal": "restart app", "steps": [{"tool": "restart_unit", "args": {"unit": "app.service"}}]}
)
STORED = Plan.model_validate(
    {"goal": "restart app", "steps": [{"tool": "stop_unit", "args": {"unit": "db.service"}}]}
)


def detail(plan: Plan, sha256: str, argv: list[list[str]] | None = None) -> PlanDetail:
    summary = PlanSummary(
        plan_id="20261201-120000-0a1b2c3d",
        state="PROPOSED",  # type: ignore[arg-type]
        sha256=sha256,
        goal=plan.goal,
        units=[s.args.unit for s in plan.steps],
        submitted_at=datetime(2026, 12, 1, 12, tzinfo=UTC),
        submitted_by="opsbot-diagnose",
    )
    return PlanDetail(summary=summary, plan=plan, argv=argv or step_argv(plan))


def test_a_plan_shown_with_its_own_sha256_and_argv_passes() -> None:
    """A plan shown with its own sha256 and the argv it really runs passes the check."""
    check_detail(detail(SHOWN, sha256_hex(SHOWN.canonical())))


def test_a_plan_shown_beside_another_plans_sha256_is_refused() -> None:
    """The executor shows "restart app" with the sha256 of "stop db": the console says
    the answer does not add up, and prints no sha256 to approve."""
    with pytest.raises(ConsoleError) as refused:
        check_detail(detail(SHOWN, sha256_hex(STORED.canonical())))
    assert "does not add up" in refused.value.message
    assert "do not approve it" in (refused.value.hint or "")


def test_argv_that_is_not_what_the_plan_runs_is_refused() -> None:
    """The executor shows a restart of app.service as the argv of a plan that stops
    db.service: the console refuses the answer, naming the argv it reports."""
    forged = [["systemctl", "restart", "--no-ask-password", "--", "app.service"]]
    with pytest.raises(ConsoleError, match="argv it reports"):
        check_detail(detail(STORED, sha256_hex(STORED.canonical()), forged))
