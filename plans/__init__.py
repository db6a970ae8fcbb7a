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
    incidents      a symptom's chain of plans: follow-ups, their incident, its cap
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
here and loaded when first used (shared_io.exports), so that ``opsbot show`` can use the
argv builders and the precondition words without building every model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shared_io.exports import lazy_exports

if TYPE_CHECKING:
    from plans.apply_unit import apply_running, start_apply, watched, window_apply
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
        TooManyWaiting,
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
    from plans.incidents import INCIDENT_CAP, follow_up, members
    from plans.names import APPLY_PATH, APPLY_TIMER, APPLY_UNIT, EXECUTOR_UNIT, EXECUTOR_USER
    from plans.outcomes import LiveStates, Outcome, StepPreview, failed, outcome_json, preview_steps
    from plans.policy import policy_errors, step_argv
    from plans.polkit import RULE_PATH, allowed_verbs, privilege_mode, render_rule, write_rule
    from plans.preconditions import Check, expect_words, expectation_mismatch, precondition_checks
    from plans.preview import dry_run, preview_plans
    from plans.records import PlanRecord, Provenance, StatusRecord, Transition
    from plans.states import ALLOWED, TransitionRefused, transition
    from plans.store import PlanStore, WaitingCaps, new_plan_id, utcnow
    from plans.tools import TOOLS, argv_of
    from plans.verification import (
        VERIFY_HORIZON,
        UnitReader,
        history_errors,
        mark_applied,
        pending,
        read_plan_units,
        record_report,
        unbelievable,
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
    from plans.witness import Accepted, accepted, consumed, executor_uids

#: Each module and the names it exports here.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "plans.apply_unit": ("apply_running", "start_apply", "watched", "window_apply"),
    "plans.approvals": (
        "CLOCK_SKEW",
        "CheckedApproval",
        "approval_path",
        "archive_used",
        "check_approval",
        "read_approval_file",
        "rejection_path",
        "rejection_reason",
        "remove_approval",
        "used_dir",
        "write_approval",
        "write_rejection",
    ),
    "plans.decisions": (
        "Approved",
        "Reviewed",
        "SHA256_PREFIX_MIN",
        "approve",
        "is_sha256_prefix",
        "reject",
        "review",
    ),
    "plans.errors": (
        "ApprovalExpired",
        "ApprovalRefused",
        "CalendarError",
        "NoApplyWindow",
        "PlanError",
        "PlanNotFound",
        "PlanRefused",
        "TamperedPlan",
        "TooManyWaiting",
        "UsageError",
    ),
    "plans.gate": (
        "AwaitApproval",
        "AwaitWindow",
        "Decision",
        "Expire",
        "INTERRUPTED_REASON",
        "Interrupted",
        "NotFinal",
        "Refuse",
        "Run",
        "Skip",
        "Stale",
        "decide",
        "precondition_mismatch",
        "waits_text",
        "window_wait",
    ),
    "plans.names": ("APPLY_PATH", "APPLY_TIMER", "APPLY_UNIT", "EXECUTOR_UNIT", "EXECUTOR_USER"),
    "plans.outcomes": (
        "LiveStates",
        "Outcome",
        "StepPreview",
        "failed",
        "outcome_json",
        "preview_steps",
    ),
    "plans.incidents": ("INCIDENT_CAP", "follow_up", "members"),
    "plans.policy": ("policy_errors", "step_argv"),
    "plans.polkit": ("RULE_PATH", "allowed_verbs", "privilege_mode", "render_rule", "write_rule"),
    "plans.preconditions": ("Check", "expect_words", "expectation_mismatch", "precondition_checks"),
    "plans.preview": ("dry_run", "preview_plans"),
    "plans.records": ("PlanRecord", "Provenance", "StatusRecord", "Transition"),
    "plans.states": ("ALLOWED", "TransitionRefused", "transition"),
    "plans.store": ("PlanStore", "WaitingCaps", "new_plan_id", "utcnow"),
    "plans.tools": ("TOOLS", "argv_of"),
    "plans.verification": (
        "VERIFY_HORIZON",
        "UnitReader",
        "history_errors",
        "mark_applied",
        "pending",
        "read_plan_units",
        "record_report",
        "unbelievable",
    ),
    "plans.windows": (
        "Analyzer",
        "WindowState",
        "approval_expiry",
        "at_text",
        "check_calendar",
        "lifetime_ceiling",
        "runs_when",
        "span_text",
        "state_text",
        "systemd_analyze",
        "wait_text",
        "window_state",
    ),
    "plans.witness": ("Accepted", "accepted", "consumed", "executor_uids"),
}
__all__ = [
    "ALLOWED",
    "APPLY_PATH",
    "APPLY_TIMER",
    "APPLY_UNIT",
    "Accepted",
    "Analyzer",
    "ApprovalExpired",
    "ApprovalRefused",
    "Approved",
    "AwaitApproval",
    "AwaitWindow",
    "CLOCK_SKEW",
    "CalendarError",
    "Check",
    "CheckedApproval",
    "Decision",
    "EXECUTOR_UNIT",
    "EXECUTOR_USER",
    "Expire",
    "INCIDENT_CAP",
    "INTERRUPTED_REASON",
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
    "RULE_PATH",
    "Refuse",
    "Reviewed",
    "Run",
    "SHA256_PREFIX_MIN",
    "Skip",
    "Stale",
    "StatusRecord",
    "StepPreview",
    "TOOLS",
    "TamperedPlan",
    "TooManyWaiting",
    "Transition",
    "TransitionRefused",
    "UnitReader",
    "UsageError",
    "VERIFY_HORIZON",
    "WaitingCaps",
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
    "follow_up",
    "history_errors",
    "is_sha256_prefix",
    "lifetime_ceiling",
    "mark_applied",
    "members",
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
    "read_plan_units",
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
    "unbelievable",
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
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
