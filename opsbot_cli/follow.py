"""Following a plan to its end as root: its state in the store, each change as it happens.

``opsbot approve --wait`` and ``opsbot apply`` wait here for what happens to a plan after
the part they did: the apply opsbot-apply.path starts, and opsbot-verify's VERIFIED or
UNRESOLVED; after UNRESOLVED, the follow-up plan of its incident, if opsbot-verify's
follow-up diagnosis proposes one (which waits for a human: they never wait for another
approval). Bounded by a deadline; the caller says what a timeout means.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from opsbot_cli.output import fit, one_line, out, when
from plans import PlanStore, StatusRecord
from shared_io.errors import OpsbotError
from shared_io.exit_codes import for_state
from shared_io.unit_show import read_unit_state

#: How often the store is read while waiting.
POLL_SECONDS = 0.5
VERIFY_UNIT = "opsbot-verify.service"


@dataclass
class Followed:
    """Where a followed plan ended: its last status read, and whether that is an end
    (a final state, or an approval the apply refused); False: the deadline came first."""

    status: StatusRecord
    ended: bool


def say_change(status: StatusRecord) -> None:
    """One line (or a few) for a state a followed plan reached."""
    at = when(status.history[-1].at) if status.history else ""
    reason = one_line(status.reason)
    if status.state == "APPLIED":
        reason = f"{reason}; opsbot-verify checks that its units stay healthy"
    if status.state == "APPROVED" and status.refusal:
        reason = f"the apply refused it: {one_line(status.refusal)}"
    head = f"  {at}  {status.state:<11} "
    lines = fit(reason, " " * len(head), lines=3)
    out(head + lines[0][len(head) :] if reason else head.rstrip())
    for line in lines[1:] if reason else []:
        out(line)
    if status.verification is not None:
        for evidence in [e for e in status.verification.evidence if e != status.reason][:6]:
            for line in fit(one_line(evidence), "      ", lines=1):
                out(line)


def verify_running() -> bool:
    """Whether opsbot-verify.service runs now (its follow-up diagnosis may still come)."""
    try:
        return read_unit_state(VERIFY_UNIT, timeout=5).active_state in ("active", "activating")
    except OpsbotError:
        return False


def next_plan(
    store: PlanStore,
    plan_id: str,
    *,
    timeout: float,
    running: Callable[[], bool] = verify_running,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """The follow-up of ``plan_id`` (the plan of its incident that follows it), waited
    for while opsbot-verify runs (its follow-up diagnosis), up to ``timeout`` seconds;
    None when none came (no follow-up, or one that ended in a note)."""
    deadline = clock() + timeout
    try:
        incident = store.load(plan_id).incident_id
    except OpsbotError:
        return None
    while True:
        for other in store.ids():
            try:
                record = store.load(other)
                if other != plan_id and record.incident_id == incident:
                    if store.verified_plan(record).follows == plan_id:
                        return other
            except OpsbotError:
                continue
        if clock() >= deadline or not running():
            return None
        sleep(POLL_SECONDS)


def follow(
    store: PlanStore,
    plan_id: str,
    *,
    timeout: float,
    on_change: Callable[[StatusRecord], None] = say_change,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Followed:
    """Read ``plan_id``'s status until it ends or ``timeout`` seconds pass, calling
    ``on_change`` for each state (or refusal) it had not shown before."""
    deadline = clock() + timeout
    shown: tuple[str, str] | None = None
    status = store.status(plan_id)
    while True:
        seen = (str(status.state), status.refusal)
        if seen != shown:
            if shown is not None:
                on_change(status)
            shown = seen
        # approve clears a refusal when it writes the approval: any refusal is this one's.
        refused = status.state == "APPROVED" and bool(status.refusal)
        if for_state(status.state) is not None or refused:
            return Followed(status, ended=True)
        if clock() >= deadline:
            return Followed(status, ended=False)
        sleep(POLL_SECONDS)
        try:
            status = store.status(plan_id)
        except OpsbotError:  # mid-rename on a slow disk: read again next time
            continue
