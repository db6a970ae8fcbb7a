"""How the page says things to a person on a phone: what a plan does, as its headline
("Restart app.service on web1", from each step's argv as root's approver built it, never
from the goal the model wrote); a time as "in 14 min" or "3 min ago"
inside ``<time datetime=... title=...>`` (the exact time and its zone stay in the
element), a plan's state in words, and the text root's approver relays (a refusal's
reason, a state change's reason) escaped, with its `inline code` as ``<code>`` and its
ISO times said like every other time on the page.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from datetime import UTC, datetime

from markupsafe import Markup, escape

from shared_schema.approver_socket import StepView
from shared_schema.escape import printable
from shared_schema.states import PlanState
from shared_schema.write_tools import WRITE_TOOL_TABLE, WriteTool

#: A relayed text's `inline code` and ISO 8601 times (as datetime.isoformat writes them).
_RELAYED = re.compile(
    r"`(?P<code>[^`\n]+)`"
    r"|(?P<time>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))"
)

#: What each state means to the approver who decided the plan.
STATE_WORDS: dict[PlanState, str] = {
    PlanState.PROPOSED: "It waits for a decision.",
    PlanState.APPROVED: "Approved; opsbot-apply has not started its steps yet.",
    PlanState.APPLYING: "Its steps are running now.",
    PlanState.APPLIED: "Its steps ran; opsbot-verify is checking that the service came back.",
    PlanState.VERIFIED: "It worked: the service came back and stayed up.",
    PlanState.UNRESOLVED: "Its steps ran, but the service did not come back.",
    PlanState.FAILED: "A step failed; nothing more runs.",
    PlanState.STALE: "Not run: the host or the policy changed since the diagnosis.",
    PlanState.EXPIRED: "Not run: it expired.",
    PlanState.REJECTED: "Rejected: it never runs.",
    PlanState.INTERRUPTED: "The apply died half-way; it is never resumed.",
}
#: States after which nothing more happens to the plan (the status view stops reloading).
SETTLED = frozenset(PlanState) - {
    PlanState.PROPOSED,
    PlanState.APPROVED,
    PlanState.APPLYING,
    PlanState.APPLIED,
}


#: The write tools by the systemctl verb their argv carries.
_BY_VERB: dict[str, WriteTool] = {tool.verb: tool for tool in WRITE_TOOL_TABLE}
#: Steps named in a headline; the rest are counted.
HEADLINE_STEPS = 2


def step_action(step: StepView) -> str:
    """``Restart app.service``: what the step does, from its argv (``systemctl VERB ...
    UNIT``); an argv of no write tool is said as it runs."""
    argv = step.argv
    tool = _BY_VERB.get(argv[1]) if len(argv) > 1 and argv[0] == "systemctl" else None
    if tool is None:
        return f"Run {printable(shlex.join(argv))}"
    return f"{tool.action} {printable(step.unit)}"


def headline(steps: Sequence[StepView], host: str) -> str:
    """The plan's headline: ``Restart app.service on web1``, ``Clear the failed state of
    db.service, then start db.service on web1``, ``..., then 3 more steps on web1``."""
    said = [step_action(step) for step in steps[:HEADLINE_STEPS]]
    if not said:
        return f"Nothing to run on {printable(host)}"
    more = len(steps) - len(said)
    if more:
        said.append(f"{more} more step{'' if more == 1 else 's'}")
    first, *then = said
    words = ", then ".join([first, *(part[0].lower() + part[1:] for part in then)])
    return f"{words} on {printable(host)}"


def exact(moment: datetime) -> str:
    """``2026-12-01 15:50:01 UTC``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def span(seconds: float) -> str:
    """``40 s``, ``14 min``, ``2 h 5 min``, ``3 days`` (rounded down)."""
    whole = int(abs(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes and hours < 10 else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} days {hours} h" if hours and days < 7 else f"{days} days"


def relative(moment: datetime, now: datetime) -> str:
    """``in 14 min``, ``3 min ago``, or ``just now`` (within 5 s)."""
    seconds = (moment - now).total_seconds()
    if abs(seconds) < 5:
        return "just now"
    return f"in {span(seconds)}" if seconds > 0 else f"{span(seconds)} ago"


def time_element(moment: datetime, now: datetime, *, full: bool = False) -> Markup:
    """``<time datetime="ISO" title="exact">in 14 min</time>``; with ``full``, the exact
    time follows in brackets (for the details, where there is room)."""
    said = Markup('<time datetime="{}" title="{}">{}</time>').format(
        moment.isoformat(), exact(moment), relative(moment, now)
    )
    return said + Markup(" ({})").format(exact(moment)) if full else said


def relayed(text: str, now: datetime) -> Markup:
    """``text`` escaped, its `inline code` as ``<code>``, its ISO times as ``<time>``;
    a backtick that opens no code is dropped."""
    out = Markup()
    last = 0
    text = printable(text)
    for found in _RELAYED.finditer(text):
        out += escape(text[last : found.start()].replace("`", ""))
        if found["code"] is not None:
            out += Markup("<code>{}</code>").format(found["code"])
        else:
            out += _moment(found["time"], now)
        last = found.end()
    return out + escape(text[last:].replace("`", ""))


def _moment(iso: str, now: datetime) -> Markup:
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        return escape(iso)
    return time_element(moment, now)
