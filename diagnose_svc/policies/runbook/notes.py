"""Notes for a human: the cause that stops a plan, a unit found healthy, several units
that do not answer with nothing to tell which waits on which, and restarts that do not
fix it."""

from __future__ import annotations

from typing import Any

from diagnose_svc.actions import FinalNote, Transcript
from diagnose_svc.policies.runbook.outcomes import Human
from diagnose_svc.policies.runbook.view import View
from diagnose_svc.policies.runbook.words import cut
from diagnose_svc.tools import UnitStatus


def note(text: str, cause: Human | None = None, kind: str = "", unit: str = "") -> FinalNote:
    if cause is not None:
        body: dict[str, Any] = {
            "kind": cause.kind,
            "unit": cause.unit,
            "fact": cut(cause.fact, 480),
        }
    else:
        body = {"kind": kind, "unit": unit or None, "fact": cut(text.split(". ")[0], 480)}
    return FinalNote(text=text, cause=body)


def restarts_not_fixing(unit: str, why: str, transcript: Transcript) -> FinalNote:
    """What the runbook would do again did not fix it: a human must find why."""
    tried = "".join(f" {t.line()}." for t in transcript.tried)
    fact = cut(why, 480)
    via = (
        f"{transcript.unit} is failing because of {unit}, which it needs. "
        if unit != transcript.unit
        else ""
    )
    text = (
        f"{via}{unit}: restarting is not fixing it: {why}.{tried} No plan is proposed: a human "
        f"must find why it does not stay up (journalctl -u {unit}, systemctl status {unit})."
    )
    return FinalNote(
        text=cut(text, 3900), cause={"kind": "restarts_not_fixing", "unit": unit, "fact": fact}
    )


def human_note(view: View, entry: str, human: Human, roots: list[str]) -> FinalNote:
    via = ""
    if human.unit != entry:
        chain = view.failing(entry)
        via = (
            f"{entry} is failing ({chain}) because of {human.unit}, which it needs. "
            if chain
            else ""
        )
    others = [r for r in roots if r not in (human.unit, human.via)]
    more = f" Also failing: {', '.join(others)}." if others else ""
    since = view.since_healthy(human.unit)
    changed = view.changed(human.unit)
    text = (
        f"{via}{human.unit}: {human.fact}. {human.advice} No plan is proposed."
        f"{' ' + changed if changed else ''}{' ' + since if since else ''}{more}"
        f"{also_failing(view)}"
    )
    return note(cut(text, 3900), human)


def also_failing(view: View) -> str:
    """The failing units found outside the entry's chain, in words ('' if none): each
    is its own diagnosis, never part of this one's plan. Those that reach the entry (a
    front above it) fail through it and are said so; only the rest are unrelated."""
    strangers = view.strangers()
    if not strangers:
        return ""
    above = [u for u in strangers if view.entry in view.closure(u)]
    others = [u for u in strangers if u not in above]
    words = ""
    if above:
        words += (
            f" Also failing, as it reaches {view.entry}: {', '.join(above)}; "
            f"{'it' if len(above) == 1 else 'they'} should answer again once "
            f"{view.entry} does."
        )
    if others:
        words += (
            f" Also failing, unrelated to {view.entry} as far as any dependency or "
            f"connection shows: {', '.join(others)}; diagnose "
            f"{'it' if len(others) == 1 else 'each'} on its own."
        )
    return words


def healthy(view: View, unit: str, status: UnitStatus) -> FinalNote:
    answered = [h for h in view.found.health.values() if h.outcome == "ok"]
    health = (
        "health target(s) " + ", ".join(f"{h.target} answered {h.status}" for h in answered)
        if answered
        else "no health target is configured for it, so only systemd's view was checked"
    )
    recovered = (
        f" It has recovered: systemd restarted it {status.n_restarts} times "
        f"(NRestarts={status.n_restarts})."
        if status.n_restarts
        else ""
    )
    since = status.active_enter_timestamp
    since_words = f" since {since:%Y-%m-%d %H:%M:%S} UTC" if since else ""
    fact = f"{unit} is {status.active_state}/{status.sub_state}{since_words}; {health}"
    return note(
        f"{fact}.{recovered} Nothing it depends on is failing. No change is warranted."
        f"{also_failing(view)}",
        Human("healthy", unit, fact, ""),
    )


def which_waits(view: View, silent: list[str]) -> Human:
    """Several running units do not answer, none of them stopped or stuck, and no
    dependency says which waits on which (a proxy and its upstream with no systemd
    edge between them): restarting the wrong one is the 3 a.m. mistake."""
    words = "; ".join(f"{u}: {view.failing(u)}" for u in silent)
    return Human(
        "unknown",
        silent[0],
        f"{', '.join(silent)} run but do not answer ({words}); none has a stopped "
        "process, and no dependency between them says which waits on which",
        "A human must tell which one is slow (its own logs, or curl each directly); no "
        "restart is proposed, since restarting a proxy for its upstream's fault hides "
        "the fault.",
    )
