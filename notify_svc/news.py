"""Messages that are news, not questions: what an approver is told that asks nothing of
them. A plan a standing rule approved (:func:`render_ruled`), and how a plan that ran
turned out (:func:`render_outcome`): UNRESOLVED, or its incident ended. No approve or
reject link: the same facts go to every approver, with, when the approver minted one
and ``[notify] link_base`` is set, a **status link** (``<link_base>/p/TOKEN/status``),
a read-only view of where the plan is now that can decide nothing.

A plan a rule approved::

    opsbot: rule night-restarts approved plan <id> for app.service on web1
    Goal: start app.service, killed by SIGKILL
    Step 1: systemctl start --no-block app.service
    Why: app.service failed with result 'signal'
         journal: Main process exited, code=killed, status=9/KILL
    It runs at once and will be verified; opsbot show <id> on the host follows it.
    Status: https://ops.example.com/opsbot/p/<token>/status
    sha256: 0123456789ab   rule sha256: 89abcdef0123   approved 2026-12-01 18:35 UTC
    Pause every rule: sudo opsbot policy pause

A plan whose verification found the symptom still there::

    opsbot: plan <id> for app.service on web1 is UNRESOLVED
    Goal: start app.service, killed by SIGKILL
    Step 1: systemctl start --no-block app.service
    State: UNRESOLVED since 2026-12-01 18:41 UTC: app.service failed again
    Verification: app.service is failed (signal)
                  journal: Main process exited, code=killed, status=9/KILL
    Incident: <incident>, 1 plan since 2026-12-01 18:35 UTC
    Approved by: rule night-restarts
    Next: a follow-up diagnosis may propose another plan (its link comes as any plan's)
    Status: https://ops.example.com/opsbot/p/<token>/status
    On the host: opsbot show <id>

An incident that ended says ``opsbot: incident <incident> on web1 ended: app.service
VERIFIED``, or ``... ended FAILED: a human must look``, over the same lines.

As in :mod:`notify_svc.message`, everything that came from the plan or the host (the
goal, argv, the reason, what opsbot-verify saw) goes through :func:`clean`.
"""

from __future__ import annotations

import shlex
from datetime import UTC
from typing import Any

from notify_svc.message import (
    MAX_EVIDENCE_LINES,
    MAX_STEPS,
    SHA_PREFIX,
    Button,
    Card,
    Message,
    clean,
    link_url,
    when,
)
from shared_schema.approver_socket import OutcomeNotice, PlanBrief, RuleNotice
from shared_schema.states import PlanState
from shared_schema.text import printable

#: What stops every standing rule at once (root, on the host).
PAUSE_RULES = "sudo opsbot policy pause"
#: The card's button to the status view: a plain link, drawn in the chat's default style.
STATUS_LABEL = "Status"


def status_url(link_base: str | None, watch: str | None) -> str | None:
    """The plan's read-only status view, ``<link_base>/p/<watch>/status``, or None
    without the page or without a token."""
    if not link_base or not watch:
        return None
    return f"{link_url(link_base, watch)}/status"


def _status_buttons(url: str | None) -> tuple[Button, ...]:
    return (Button(STATUS_LABEL, url),) if url else ()


def _units(plan: PlanBrief) -> str:
    return ", ".join(plan.units) or "no unit"


def _steps(plan: PlanBrief, follow: str) -> list[str]:
    """Each step as it runs (at most MAX_STEPS), then how many more."""
    steps = [
        f"Step {number}: {clean(shlex.join(argv))}"
        for number, argv in enumerate(plan.argv[:MAX_STEPS], start=1)
    ]
    if len(plan.argv) > MAX_STEPS:
        steps.append(f"... and {len(plan.argv) - MAX_STEPS} more steps ({follow} shows all)")
    return steps


def _plan_document(event: str, plan: PlanBrief) -> dict[str, Any]:
    """What every news document begins with: the event, and the plan's facts."""
    return {
        "event": event,
        "plan_id": plan.plan_id,
        "sha256": plan.sha256,
        "sha256_prefix": plan.sha256[:SHA_PREFIX],
        "host": clean(plan.host),
        "units": [clean(u) for u in plan.units],
        "goal": clean(plan.goal),
        "steps": [
            {"argv": [printable(a) for a in argv], "command": clean(shlex.join(argv))}
            for argv in plan.argv
        ],
    }


def _message(
    plan: PlanBrief,
    approver: str,
    head: str,
    lines: list[str],
    document: dict[str, Any],
    card: Card,
) -> Message:
    text = "\n".join(lines)
    return Message(
        plan_id=plan.plan_id,
        approver=approver,
        subject=head,
        text=text + "\n",
        approve_url=None,
        reject_url=None,
        document={**document, "text": text},
        card=card,
    )


# -- a plan a standing rule approved -----------------------------------------------------


def ruled_subject(notice: RuleNotice) -> str:
    plan = notice.plan
    return clean(
        f"opsbot: rule {notice.rule} approved plan {plan.plan_id} for {_units(plan)} on "
        f"{plan.host}",
        200,
    )


def render_ruled(notice: RuleNotice, approver: str, link_base: str | None) -> Message:
    """The message ``approver`` gets about a plan a standing rule approved: the rule, each
    step as it runs, why, when it runs, its status link, and how to pause every rule. No
    decision link: nothing is left to decide (the approval is written), so the same text
    goes to every approver."""
    plan = notice.plan
    head = ruled_subject(notice)
    prefix = plan.sha256[:SHA_PREFIX]
    follow = f"opsbot show {plan.plan_id}"
    runs = clean(notice.runs, 100) + "," if notice.runs else "at once"
    status = status_url(link_base, notice.watch)
    lines = [head, f"Goal: {clean(plan.goal)}"]
    steps = _steps(plan, follow)
    lines.extend(steps)
    why = [clean(w) for w in notice.why[:MAX_EVIDENCE_LINES]] or ["(none recorded)"]
    lines.append(f"Why: {why[0]}")
    lines.extend(f"     {more}" for more in why[1:])
    follows = f"It runs {runs} and will be verified; {follow} on the host follows it."
    lines.append(follows)
    if status:
        lines.append(f"Status: {status}")
    lines.append(
        f"sha256: {prefix}   rule sha256: {notice.rule_sha256[:SHA_PREFIX]}   "
        f"approved {when(notice.approved_at)}"
    )
    lines.append(f"Pause every rule: {PAUSE_RULES}")
    card = Card(
        title=head,
        facts=(
            ("Host", clean(plan.host)),
            ("Units", clean(_units(plan))),
            ("Rule", f"{clean(notice.rule)} (sha256 {notice.rule_sha256[:SHA_PREFIX]})"),
            ("Approved", when(notice.approved_at)),
            ("Runs", clean(notice.runs or "at once", 100)),
            ("sha256", prefix),
        ),
        goal=clean(plan.goal),
        steps=tuple(steps),
        why=tuple(why),
        buttons=_status_buttons(status),
        notes=(follows, f"Pause every rule: {PAUSE_RULES}"),
    )
    document: dict[str, Any] = {
        **_plan_document("plan.approved_by_rule", plan),
        "why": [clean(w) for w in notice.why[:MAX_EVIDENCE_LINES]],
        "rule": clean(notice.rule),
        "rule_sha256": notice.rule_sha256,
        "approved_at": notice.approved_at.astimezone(UTC).isoformat(),
        "runs": clean(notice.runs or "at once", 100),
        "approver": approver,
        "follow": follow,
        "status_url": status,
        "pause": PAUSE_RULES,
    }
    return _message(plan, approver, head, lines, document, card)


# -- how a plan that ran turned out --------------------------------------------------------

#: The webhook's event of each kind of outcome.
OUTCOME_EVENTS = {"unresolved": "plan.unresolved", "ended": "incident.ended"}


def outcome_subject(notice: OutcomeNotice) -> str:
    """``... plan ID for UNITS on HOST is UNRESOLVED``; an incident over: ``... ended:
    UNITS VERIFIED``, or ``... ended FAILED: a human must look``."""
    plan, state = notice.plan, notice.state.value
    if notice.kind == "unresolved":
        said = f"opsbot: plan {plan.plan_id} for {_units(plan)} on {plan.host} is {state}"
    elif notice.state is PlanState.VERIFIED:
        said = f"opsbot: incident {notice.incident} on {plan.host} ended: {_units(plan)} {state}"
    else:
        said = f"opsbot: incident {notice.incident} on {plan.host} ended {state}: a human must look"
    return clean(said, 200)


def render_outcome(notice: OutcomeNotice, approver: str, link_base: str | None) -> Message:
    """The message ``approver`` gets about how a plan that ran turned out: its goal and
    steps, its state since when and why, what opsbot-verify saw, the incident so far, who
    approved it, what comes next, its status link, and how to follow it on the host. The
    same for every approver: there is nothing to decide here (a follow-up plan comes with
    its own links)."""
    plan = notice.plan
    head = outcome_subject(notice)
    prefix = plan.sha256[:SHA_PREFIX]
    follow = f"opsbot show {plan.plan_id}"
    status = status_url(link_base, notice.watch)
    reason = clean(notice.reason)
    since = f"{notice.state.value} since {when(notice.at)}"
    seen = [clean(v) for v in notice.verification[:MAX_EVIDENCE_LINES]]
    shown = seen or ["(none recorded)"]
    count = f"{notice.plans} plan" + ("" if notice.plans == 1 else "s")
    incident = f"{clean(notice.incident)}, {count} since {when(notice.started_at)}"
    approved_by = clean(notice.approved_by)
    next_ = clean(notice.next)
    on_host = f"On the host: {follow}"

    lines = [head, f"Goal: {clean(plan.goal)}"]
    steps = _steps(plan, follow)
    lines.extend(steps)
    lines.append(f"State: {since}" + (f": {reason}" if reason else ""))
    lines.append(f"Verification: {shown[0]}")
    lines.extend(f"              {more}" for more in shown[1:])
    lines.append(f"Incident: {incident}")
    if approved_by:
        lines.append(f"Approved by: {approved_by}")
    if next_:
        lines.append(f"Next: {next_}")
    if status:
        lines.append(f"Status: {status}")
    lines.append(on_host)

    facts = [
        ("Host", clean(plan.host)),
        ("Units", clean(_units(plan))),
        ("State", since),
        *([("Reason", reason)] if reason else []),
        ("Incident", incident),
        *([("Approved by", approved_by)] if approved_by else []),
        ("sha256", prefix),
    ]
    card = Card(
        title=head,
        facts=tuple(facts),
        goal=clean(plan.goal),
        steps=tuple(steps),
        why=tuple(shown),
        why_label="Verification",
        buttons=_status_buttons(status),
        notes=(*([f"Next: {next_}"] if next_ else []), on_host),
    )
    document: dict[str, Any] = {
        **_plan_document(OUTCOME_EVENTS[notice.kind], plan),
        "state": notice.state.value,
        "at": notice.at.astimezone(UTC).isoformat(),
        "reason": reason,
        "verification": seen,
        "incident": clean(notice.incident),
        "plans": notice.plans,
        "started_at": notice.started_at.astimezone(UTC).isoformat(),
        "approved_by": approved_by,
        "next": next_,
        "status_url": status,
        "approver": approver,
        "follow": follow,
    }
    return _message(plan, approver, head, lines, document, card)
