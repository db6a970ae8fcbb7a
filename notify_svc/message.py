"""What one approver is told about one plan: a short plain text (email, Slack, ntfy),
the same facts as a JSON document (the generic webhook), the same again as a
:class:`Card` for the chats that draw one (Slack's blocks, a Teams Adaptive Card), and a
subject line.

The text, for a plan with one step::

    opsbot: plan 20261201-183500-1a2b3c4d for app.service on web1 waits for approval
    Goal: restart app.service, which crashed on a full disk
    Step 1: systemctl restart app.service
      precondition: app.service is failed
    Evidence: app.service failed with result 'exit-code'
              journal: No space left on device
    sha256: 0123456789ab   runs: at once
    Approve (alice): https://ops.example.com/opsbot/p/<token>  confirm K7QM
    Reject (alice):  https://ops.example.com/opsbot/p/<token>  confirm 3XWA
    Type the confirmation beside the link you open with your code: the page never sees it.
    Links expire 2026-12-01 19:35 UTC; the plan expires 2026-12-02 18:35 UTC.
    On the host: sudo opsbot approve 20261201-183500-1a2b3c4d --sha256 0123456789ab

Everything in it that came from the plan (the goal, the evidence, argv, the host) went
through a model that read text anyone can write to the journal: control characters and
bidirectional overrides are shown as escapes (shared_schema.text.printable), and long
lines are cut. The page the link opens shows the plan whole, with its full sha256; the
12 hex here are for comparing it, and for ``opsbot approve --sha256`` on the host.

News that asks nothing of the approver (a plan a standing rule approved, how a plan
that ran turned out) is :mod:`notify_svc.news`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from shared_schema.approver_socket import Decision, Link, Notice, PlanView
from shared_schema.text import printable

#: The sha256 prefix shown, and passed to ``opsbot approve --sha256``.
SHA_PREFIX = 12
#: Steps shown in the message; the page shows the rest.
MAX_STEPS = 8
MAX_LINE = 300
MAX_EVIDENCE_LINES = 2


def clean(value: str, limit: int = MAX_LINE) -> str:
    """``value`` safe to show: escapes for control characters, cut to ``limit``."""
    shown = printable(value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def link_url(link_base: str, token: str) -> str:
    """The page of one decision: ``<link_base>/p/<token>``."""
    return f"{link_base.rstrip('/')}/p/{token}"


def shell_fallback(plan: PlanView) -> str:
    """What root types on the host instead of clicking."""
    return f"sudo opsbot approve {plan.plan_id} --sha256 {plan.sha256[:SHA_PREFIX]}"


#: The two buttons of a card: each only opens the page, where a person types a code.
APPROVE_LABEL = "Review and approve"
REJECT_LABEL = "Reject"


@dataclass(frozen=True)
class Button:
    """A link drawn as a button; ``decision`` picks its colour, and None (a status link,
    which decides nothing) draws it in the chat's default style."""

    label: str
    url: str
    decision: Decision | None = None


@dataclass(frozen=True)
class Item:
    """One plan of a digest: its lines, and its two buttons (none without the page)."""

    text: str
    buttons: tuple[Button, ...] = ()


@dataclass(frozen=True)
class Card:
    """The message as a chat draws it: a title, labelled facts, the goal, each step (its
    argv as shell words), why (under ``why_label``), the buttons, a digest's plans, and
    lines under them. Every value is already :func:`clean`; each chat escapes it for its
    markup and cuts it to its own limits."""

    title: str
    facts: tuple[tuple[str, str], ...] = ()
    goal: str = ""
    steps: tuple[str, ...] = ()
    why: tuple[str, ...] = ()
    why_label: str = "Why"
    buttons: tuple[Button, ...] = ()
    items: tuple[Item, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Message:
    """One approver's message about one plan (a question, or news: notify_svc.news)."""

    plan_id: str
    approver: str
    subject: str
    text: str
    #: The two links, or None without ``[notify] link_base``.
    approve_url: str | None
    reject_url: str | None
    #: The generic webhook's JSON body.
    document: dict[str, Any]
    #: The chats' card (Slack, Teams).
    card: Card


def _link(links: list[Link], approver: str, decision: Decision) -> Link | None:
    return next((k for k in links if k.approver == approver and k.decision == decision), None)


def approvers_of(notice: Notice) -> list[str]:
    """The approvers the notice has links for, in the order the approver gave them."""
    return list(dict.fromkeys(link.approver for link in notice.links))


def subject(plan: PlanView) -> str:
    units = ", ".join(plan.units) or "no unit"
    return clean(f"opsbot: plan {plan.plan_id} for {units} on {plan.host} waits for approval", 200)


def render(notice: Notice, approver: str, link_base: str | None) -> Message:
    """The message ``approver`` gets about ``notice``'s plan, with their own links."""
    plan = notice.plan
    approve = _link(notice.links, approver, "approve")
    reject = _link(notice.links, approver, "reject")
    approve_url = link_url(link_base, approve.token) if link_base and approve else None
    reject_url = link_url(link_base, reject.token) if link_base and reject else None
    expiries = [k.expires_at for k in (approve, reject) if k is not None]
    links_expire = min(expiries) if expiries else plan.approval_expires_at
    prefix = plan.sha256[:SHA_PREFIX]
    fallback = shell_fallback(plan)

    lines = [subject(plan), f"Goal: {clean(plan.goal)}"]
    if plan.attempt:
        lines.append(f"This is the {clean(plan.attempt)}.")
    steps: list[str] = []
    for number, step in enumerate(plan.steps[:MAX_STEPS], start=1):
        steps.append(f"Step {number}: {clean(shlex.join(step.argv))}")
        condition = "; ".join(step.precondition) or "none"
        steps.append(f"  precondition: {clean(condition)}")
    if len(plan.steps) > MAX_STEPS:
        steps.append(f"... and {len(plan.steps) - MAX_STEPS} more steps (the page shows all)")
    lines.extend(steps)
    evidence = [clean(e) for e in plan.evidence[:MAX_EVIDENCE_LINES]] or ["(none recorded)"]
    lines.append(f"Evidence: {evidence[0]}")
    lines.extend(f"          {more}" for more in evidence[1:])
    runs = clean(plan.runs or "at once", 100)
    lines.append(f"sha256: {prefix}   runs: {runs}")
    buttons: tuple[Button, ...] = ()
    expires = f"plan {when(plan.plan_expires_at)}"
    if approve_url and reject_url and approve and reject:
        lines.append(f"Approve ({approver}): {approve_url}  confirm {approve.confirm}")
        lines.append(f"Reject ({approver}):  {reject_url}  confirm {reject.confirm}")
        lines.append(
            "Type the confirmation beside the link you open with your code: the page never sees it."
        )
        lines.append(
            f"Links expire {when(links_expire)}; the plan expires {when(plan.plan_expires_at)}."
        )
        expires = f"links {when(links_expire)}, {expires}"
        buttons = (
            Button(APPROVE_LABEL, approve_url, "approve"),
            Button(REJECT_LABEL, reject_url, "reject"),
        )
        note = (
            f"Confirmation for {approver}: {approve.confirm} to approve, {reject.confirm} to "
            "reject. Type it with your code on the page a button opens: the page never sees it."
        )
    else:
        note = "The approval page is not configured ([notify] link_base)."
        lines.append(note)
        lines.append(f"The plan expires {when(plan.plan_expires_at)}.")
    lines.append(f"On the host: {fallback}")
    card = Card(
        title=subject(plan),
        facts=(
            ("Host", clean(plan.host)),
            ("Units", clean(", ".join(plan.units) or "no unit")),
            ("Runs", runs),
            ("Expires", expires),
            ("sha256", prefix),
        ),
        goal=clean(plan.goal) + (f" (this is the {clean(plan.attempt)})" if plan.attempt else ""),
        steps=tuple(steps),
        why=tuple(evidence),
        buttons=buttons,
        notes=(note, f"On the host: {fallback}"),
    )

    document: dict[str, Any] = {
        "event": "plan.proposed",
        "plan_id": plan.plan_id,
        "sha256": plan.sha256,
        "sha256_prefix": prefix,
        "host": clean(plan.host),
        "units": [clean(u) for u in plan.units],
        "goal": clean(plan.goal),
        "attempt": clean(plan.attempt),
        "steps": [
            {
                "unit": clean(step.unit),
                "argv": [printable(a) for a in step.argv],
                "command": clean(shlex.join(step.argv)),
                "precondition": [clean(p) for p in step.precondition],
            }
            for step in plan.steps
        ],
        "evidence": [clean(e) for e in plan.evidence[:MAX_EVIDENCE_LINES]],
        "runs": clean(plan.runs or "at once", 100),
        "approver": approver,
        "approve_url": approve_url,
        "approve_confirm": approve.confirm if approve_url and approve else None,
        "reject_url": reject_url,
        "reject_confirm": reject.confirm if reject_url and reject else None,
        "links_expire_at": links_expire.astimezone(UTC).isoformat(),
        "approval_expires_at": plan.approval_expires_at.astimezone(UTC).isoformat(),
        "plan_expires_at": plan.plan_expires_at.astimezone(UTC).isoformat(),
        "shell": fallback,
        "text": "\n".join(lines),
    }
    return Message(
        plan_id=plan.plan_id,
        approver=approver,
        subject=subject(plan),
        text="\n".join(lines) + "\n",
        approve_url=approve_url,
        reject_url=reject_url,
        document=document,
        card=card,
    )


#: More plans than this for one approver in one announce, and they get one digest.
DIGEST_AFTER = 3


def render_digest(notices: list[Notice], approver: str, link_base: str | None) -> Message:
    """One message for many plans (a burst: a host where approvers were just set up, or
    a diagnosis that proposes too much): each plan in a few lines, with its links and
    their confirmations; the page shows each plan whole."""
    plans = [n.plan for n in notices]
    hosts = sorted({p.host for p in plans})
    head = clean(f"opsbot: {len(plans)} plans on {', '.join(hosts)} wait for approval", 200)
    lines = [head]
    items: list[dict[str, Any]] = []
    shown: list[Item] = []
    for notice in notices:
        plan = notice.plan
        approve = _link(notice.links, approver, "approve")
        reject = _link(notice.links, approver, "reject")
        units = ", ".join(plan.units) or "no unit"
        summary = f"{plan.plan_id} ({clean(units, 100)}): {clean(plan.goal, 120)}"
        lines.append(f"- {summary}")
        buttons: tuple[Button, ...] = ()
        item: dict[str, Any] = {
            "plan_id": plan.plan_id,
            "sha256": plan.sha256,
            "units": [clean(u) for u in plan.units],
            "goal": clean(plan.goal),
        }
        if link_base and approve and reject:
            approve_url, reject_url = (
                link_url(link_base, approve.token),
                link_url(link_base, reject.token),
            )
            lines.append(f"  approve: {approve_url}  confirm {approve.confirm}")
            lines.append(f"  reject:  {reject_url}  confirm {reject.confirm}")
            item.update(
                approve_url=approve_url,
                approve_confirm=approve.confirm,
                reject_url=reject_url,
                reject_confirm=reject.confirm,
            )
            buttons = (
                Button(APPROVE_LABEL, approve_url, "approve"),
                Button(REJECT_LABEL, reject_url, "reject"),
            )
            after = f"confirm {approve.confirm} to approve, {reject.confirm} to reject"
        else:
            after = f"on the host: {shell_fallback(plan)}"
            lines.append(f"  {after}")
        items.append(item)
        shown.append(Item(f"{summary}\n{after}", buttons))
    lines.append(
        "Type the confirmation beside the link you open with your code: the page never "
        "sees it. So many plans at once may mean a diagnosis gone wrong: `opsbot plans` "
        "on the host lists them."
    )
    text = "\n".join(lines)
    return Message(
        plan_id=plans[0].plan_id,
        approver=approver,
        subject=head,
        text=text + "\n",
        approve_url=None,
        reject_url=None,
        document={
            "event": "plans.proposed",
            "approver": approver,
            "plans": items,
            "text": text,
        },
        card=Card(title=head, items=tuple(shown), notes=(lines[-1],)),
    )
