"""What a diagnosis ends with: a ``Verdict``, the last line the diagnose socket sends.

A discriminated union on ``kind``: ``"plan"`` (the executor accepted a plan: its id,
fingerprint and the plan) or ``"note"`` (no plan: a text for the operator). Both say how
the run ended (``ended_by``), how many steps and tokens it used, and the evidence
gathered: each tool called and one line on what it returned.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from shared_schema._model import Model
from shared_schema.plan import Plan

EndedBy = Literal[
    "plan_accepted",  # the executor accepted the plan: it waits for an operator's approval
    "final_note",  # the policy finished with a note
    "plan_rejected",  # the executor rejected the plan outright
    "step_limit",  # max_steps used up without an answer
    "token_budget",  # the policy used more tokens than [diagnose] token_budget allows
    "cycle",  # tools were withdrawn for repeated calls and the policy still called one
    "policy_error",  # the policy could not propose (model endpoint down, bad answer)
    "executor_error",  # the executor could not be reached, or answered nonsense
]


class Evidence(Model):
    """One tool call of a run and one line on what it returned (already redacted)."""

    step: int
    tool: str
    args: dict[str, Any]
    summary: str
    error: bool = False

    def line(self) -> str:
        args = ", ".join(f"{key}={value}" for key, value in self.args.items())
        return f"step {self.step} {self.tool}({args}): {self.summary}"


CauseKind = Literal[
    "healthy",  # nothing is wrong now: no change is warranted
    "masked",  # the unit is masked: only a human can unmask it
    "unit_file_error",  # the unit file does not load, or changed on disk (daemon-reload)
    "config_error",  # the service's own configuration is invalid (a check failed, a bad setting)
    "missing_file",  # a program or file the unit needs does not exist
    "permission_denied",  # a file the unit needs exists but its user cannot read it
    "disk_full",  # a filesystem the unit writes to is full
    "read_only",  # a filesystem the unit writes to is mounted read-only
    "mount_failed",  # a mount the unit requires (RequiresMountsFor=, a .mount) failed
    "certificate_expired",  # a TLS certificate it serves, or a peer it reaches serves, expired
    "port_in_use",  # another process holds the port the unit needs
    "out_of_memory",  # the kernel killed it for memory, again
    "in_transition",  # systemd is starting or stopping it right now
    "crash_loop",  # systemd keeps restarting it and nothing found explains why it exits
    "timeout",  # its start did not finish within its timeout, and nothing changed since
    "app_error",  # it runs, its dependencies are healthy, and it answers errors
    "denylisted",  # the cause is in a unit opsbot never acts on
    "not_allowed",  # a fix exists, but the policy does not allow it: a human must run it
    "restarts_not_fixing",  # opsbot's restarts did not fix it (budget spent, or tried already)
    "unknown",  # the run ended before a cause was established
]


class Cause(Model):
    """What a note says is wrong, as data: what kind of cause, in which unit, and the fact
    that shows it (a property, a file's mode, a filesystem's usage, a port's owner)."""

    kind: CauseKind
    unit: str | None = None
    fact: Annotated[str, Field(max_length=500)] = ""


class _Verdict(Model):
    run_id: str
    unit: str
    steps_used: int
    tokens: int
    evidence: list[Evidence]


class PlanVerdict(_Verdict):
    """The executor accepted a plan; it now waits for an operator's approval."""

    kind: Literal["plan"] = "plan"
    ended_by: Literal["plan_accepted"] = "plan_accepted"
    plan_id: str
    sha256: str
    plan: Plan


class NoteVerdict(_Verdict):
    """No plan: a note for the operator (no change warranted, a human must act, or why
    the run stopped, with the evidence gathered and what is still unknown)."""

    kind: Literal["note"] = "note"
    ended_by: EndedBy
    text: str
    #: The cause as data, when the policy named one (a run that stopped: kind "unknown").
    cause: Cause | None = None


Verdict = Annotated[PlanVerdict | NoteVerdict, Field(discriminator="kind")]
