"""A stored plan's life after it is submitted, in one room: below the executor's daemons,
root's approver and the operator's console (the doors onto it), above shared_io.

    store          plans/, status/, consumed/, verify/ under the state directory
    records        what the store keeps: the plan record (immutable) and its status
    states         the plan state machine: which transitions exist
    gate           whether a plan may run now: one decision, a union of small types
    decisions      root's two decisions: approve (bound to a sha256), reject
    approvals      root-owned approval files and every check they must pass
    windows        apply windows ([executor.apply_window]) via systemd-analyze
    verification   what opsbot-verify records, and the history that bounds new plans
    policy         a plan against the allowlist and the built-in denylist
    tools          the write tools' argv builders, one module each
    preconditions  a step's ``expect`` against a unit's live state, and in words
    outcomes       what an apply did or would do with each plan
    preview        ``opsbot apply --dry-run``: the gate's decisions, running nothing
    witness        what the executor's unit wrote in the journal, as root trusts it
    apply_unit     starting opsbot-apply after an approval, and saying what applies it
    polkit         the polkit rule generated from the policy
    names          opsbot's own units and users
    errors         PlanError and its kin

It imports neither a daemon nor the console (a test enforces it). Names are exported
here and loaded when first used, so that ``opsbot show`` can use the argv builders and
the precondition words without building every model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from plans.apply_unit import (
        apply_running,
        start_apply,
        watched,
        window_apply,
    )
    from plans.approvals import (
        CLOCK_SKEW,
        CheckedApproval,
        approval_path,
        archive_used,
        check_approval,
        read_approval_file,
        rejection_path,
        rejection_reason,
        remove_approval,
        used_dir,
        write_approval,
        write_rejection,
    )
    from plans.decisions import (
        SHA256_PREFIX_MIN,
        Approved,
        Reviewed,
        approve,
        is_sha256_prefix,
        reject,
        review,
    )
    from plans.errors import (
        ApprovalExpired,
        ApprovalRefused,
        CalendarError,
        NoApplyWindow,
        PlanError,
        PlanNotFound,
        PlanRefused,
        TamperedPlan,
        UsageError,
    )
    from plans.gate import (
        INTERRUPTED_REASON,
        AwaitApproval,
        AwaitWindow,
        Decision,
        Expire,
        Interrupted,
        NotFinal,
        Refuse,
        Run,
        Skip,
        Stale,
        decide,
        precondition_mismatch,
        waits_text,
        window_wait,
    )
    from plans.names import (
        APPLY_PATH,
        APPLY_TIMER,
        APPLY_UNIT,
        EXECUTOR_UNIT,
        EXECUTOR_USER,
    )
    from plans.outcomes import (
        LiveStates,
        Outcome,
        StepPreview,
        failed,
        outcome_json,
        preview_steps,
    )
    from plans.policy import (
        policy_errors,
        step_argv,
    )
    from plans.polkit import (
        RULE_PATH,
        allowed_verbs,
        privilege_mode,
        render_rule,
        write_rule,
    )
    from plans.preconditions import (
        Check,
        expect_words,
        expectation_mismatch,
        precondition_checks,
    )
    from plans.preview import (
        dry_run,
        preview_plans,
    )
    from plans.records import (
        PlanRecord,
        Provenance,
        StatusRecord,
        Transition,
    )
    from plans.states import (
        ALLOWED,
        TransitionRefused,
        transition,
    )
    from plans.store import (
        PlanStore,
        new_plan_id,
        utcnow,
    )
    from plans.tools import (
        TOOLS,
        argv_of,
    )
    from plans.verification import (
        VERIFY_HORIZON,
        history_errors,
        mark_applied,
        pending,
        record_report,
    )
    from plans.windows import (
        Analyzer,
        WindowState,
        approval_expiry,
        at_text,
        check_calendar,
        lifetime_ceiling,
        runs_when,
        span_text,
        state_text,
        systemd_analyze,
        wait_text,
        window_state,
    )
    from plans.witness import (
        Accepted,
        accepted,
        consumed,
        executor_uids,
    )

#: Each exported name and the module that defines it.
_EXPORTS: dict[str, str] = {
    "watched": "plans.apply_unit",
    "apply_running": "plans.apply_unit",
    "start_apply": "plans.apply_unit",
    "window_apply": "plans.apply_unit",
    "CLOCK_SKEW": "plans.approvals",
    "CheckedApproval": "plans.approvals",
    "approval_path": "plans.approvals",
    "archive_used": "plans.approvals",
    "check_approval": "plans.approvals",
    "read_approval_file": "plans.approvals",
    "rejection_path": "plans.approvals",
    "rejection_reason": "plans.approvals",
    "remove_approval": "plans.approvals",
    "used_dir": "plans.approvals",
    "write_approval": "plans.approvals",
    "write_rejection": "plans.approvals",
    "SHA256_PREFIX_MIN": "plans.decisions",
    "Approved": "plans.decisions",
    "Reviewed": "plans.decisions",
    "approve": "plans.decisions",
    "is_sha256_prefix": "plans.decisions",
    "reject": "plans.decisions",
    "review": "plans.decisions",
    "ApprovalExpired": "plans.errors",
    "ApprovalRefused": "plans.errors",
    "CalendarError": "plans.errors",
    "NoApplyWindow": "plans.errors",
    "PlanError": "plans.errors",
    "PlanNotFound": "plans.errors",
    "PlanRefused": "plans.errors",
    "TamperedPlan": "plans.errors",
    "UsageError": "plans.errors",
    "INTERRUPTED_REASON": "plans.gate",
    "AwaitApproval": "plans.gate",
    "AwaitWindow": "plans.gate",
    "Decision": "plans.gate",
    "Expire": "plans.gate",
    "Interrupted": "plans.gate",
    "NotFinal": "plans.gate",
    "Refuse": "plans.gate",
    "Run": "plans.gate",
    "Skip": "plans.gate",
    "Stale": "plans.gate",
    "decide": "plans.gate",
    "precondition_mismatch": "plans.gate",
    "waits_text": "plans.gate",
    "window_wait": "plans.gate",
    "APPLY_PATH": "plans.names",
    "APPLY_TIMER": "plans.names",
    "APPLY_UNIT": "plans.names",
    "EXECUTOR_UNIT": "plans.names",
    "EXECUTOR_USER": "plans.names",
    "LiveStates": "plans.outcomes",
    "Outcome": "plans.outcomes",
    "StepPreview": "plans.outcomes",
    "failed": "plans.outcomes",
    "outcome_json": "plans.outcomes",
    "preview_steps": "plans.outcomes",
    "policy_errors": "plans.policy",
    "step_argv": "plans.policy",
    "RULE_PATH": "plans.polkit",
    "allowed_verbs": "plans.polkit",
    "privilege_mode": "plans.polkit",
    "render_rule": "plans.polkit",
    "write_rule": "plans.polkit",
    "Check": "plans.preconditions",
    "expect_words": "plans.preconditions",
    "expectation_mismatch": "plans.preconditions",
    "precondition_checks": "plans.preconditions",
    "dry_run": "plans.preview",
    "preview_plans": "plans.preview",
    "PlanRecord": "plans.records",
    "Provenance": "plans.records",
    "StatusRecord": "plans.records",
    "Transition": "plans.records",
    "ALLOWED": "plans.states",
    "TransitionRefused": "plans.states",
    "transition": "plans.states",
    "PlanStore": "plans.store",
    "new_plan_id": "plans.store",
    "utcnow": "plans.store",
    "TOOLS": "plans.tools",
    "argv_of": "plans.tools",
    "VERIFY_HORIZON": "plans.verification",
    "history_errors": "plans.verification",
    "mark_applied": "plans.verification",
    "pending": "plans.verification",
    "record_report": "plans.verification",
    "Analyzer": "plans.windows",
    "WindowState": "plans.windows",
    "approval_expiry": "plans.windows",
    "at_text": "plans.windows",
    "check_calendar": "plans.windows",
    "lifetime_ceiling": "plans.windows",
    "runs_when": "plans.windows",
    "span_text": "plans.windows",
    "state_text": "plans.windows",
    "wait_text": "plans.windows",
    "systemd_analyze": "plans.windows",
    "window_state": "plans.windows",
    "Accepted": "plans.witness",
    "accepted": "plans.witness",
    "consumed": "plans.witness",
    "executor_uids": "plans.witness",
}
__all__ = [
    "ALLOWED",
    "APPLY_PATH",
    "APPLY_TIMER",
    "APPLY_UNIT",
    "CLOCK_SKEW",
    "EXECUTOR_UNIT",
    "EXECUTOR_USER",
    "INTERRUPTED_REASON",
    "RULE_PATH",
    "SHA256_PREFIX_MIN",
    "TOOLS",
    "VERIFY_HORIZON",
    "Accepted",
    "Analyzer",
    "ApprovalExpired",
    "ApprovalRefused",
    "Approved",
    "AwaitApproval",
    "AwaitWindow",
    "CalendarError",
    "Check",
    "CheckedApproval",
    "Decision",
    "Expire",
    "Interrupted",
    "LiveStates",
    "NoApplyWindow",
    "NotFinal",
    "Outcome",
    "PlanError",
    "PlanNotFound",
    "PlanRecord",
    "PlanRefused",
    "PlanStore",
    "Provenance",
    "Refuse",
    "Reviewed",
    "Run",
    "Skip",
    "Stale",
    "StatusRecord",
    "StepPreview",
    "TamperedPlan",
    "Transition",
    "TransitionRefused",
    "UsageError",
    "WindowState",
    "accepted",
    "allowed_verbs",
    "apply_running",
    "approval_expiry",
    "approval_path",
    "approve",
    "archive_used",
    "argv_of",
    "at_text",
    "check_approval",
    "check_calendar",
    "consumed",
    "decide",
    "dry_run",
    "executor_uids",
    "expect_words",
    "expectation_mismatch",
    "failed",
    "history_errors",
    "is_sha256_prefix",
    "lifetime_ceiling",
    "mark_applied",
    "new_plan_id",
    "outcome_json",
    "pending",
    "policy_errors",
    "precondition_checks",
    "precondition_mismatch",
    "preview_plans",
    "preview_steps",
    "privilege_mode",
    "read_approval_file",
    "record_report",
    "reject",
    "rejection_path",
    "rejection_reason",
    "remove_approval",
    "render_rule",
    "review",
    "runs_when",
    "span_text",
    "start_apply",
    "state_text",
    "step_argv",
    "systemd_analyze",
    "transition",
    "used_dir",
    "utcnow",
    "wait_text",
    "waits_text",
    "watched",
    "window_apply",
    "window_state",
    "window_wait",
    "write_approval",
    "write_rejection",
    "write_rule",
]


def __getattr__(name: str) -> Any:
    """Load an exported name's module the first time the name is asked for."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
