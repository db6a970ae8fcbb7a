"""The exit statuses of every ``opsbot`` command: what a script may rely on.

Worst first where one run meets several (``opsbot apply`` over many plans): 1 and 2 end
the command at once; otherwise :func:`worst` picks FAILED over REFUSED over HUMAN over
WAITING over OK.
"""

from __future__ import annotations

OK = 0  # done, and nothing waits (diagnose: no change warranted; apply: applied and verified)
ERROR = 1  # cannot reach a daemon, permission denied, an internal error
USAGE = 2  # bad arguments, a malformed id, a root-only command run by another user
WAITING = 3  # a plan waits for approval (diagnose proposed one; approve --wait timed out)
HUMAN = 4  # a human must act (diagnose ended with a note naming a cause)
REFUSED = 5  # refused: STALE, REJECTED, EXPIRED, out of the diagnosis scope; a broken audit trail
FAILED = 6  # a step FAILED, or the plan is UNRESOLVED (its service did not come back)
CONFIG = 78  # invalid configuration (EX_CONFIG)

#: For --help and docs/operating.md: each status and what it means.
TABLE = (
    (OK, "done, nothing waits (diagnose: no change warranted; apply: applied and verified)"),
    (ERROR, "error: a daemon cannot be reached, permission denied, internal error"),
    (USAGE, "usage: bad arguments or id, a root-only command run by another user"),
    (WAITING, "a plan waits for approval (diagnose proposed one; approve --wait timed out)"),
    (HUMAN, "a human must act: diagnose ended with a note naming a cause"),
    (REFUSED, "refused: STALE, REJECTED, EXPIRED, out of scope; audit --verify: trail broken"),
    (FAILED, "a step FAILED, or the plan is UNRESOLVED: the service did not come back"),
    (CONFIG, "invalid configuration (opsbot check-config says where)"),
)

_RANK = {OK: 0, WAITING: 1, HUMAN: 2, REFUSED: 3, FAILED: 4}


def worst(*statuses: int) -> int:
    """The status that says most of several outcomes (OK for none)."""
    return max(statuses, key=lambda s: _RANK.get(s, 5), default=OK)


def help_text() -> str:
    """The table as --help's epilog prints it."""
    return "exit status:\n" + "\n".join(f"  {code:<3} {what}" for code, what in TABLE)


#: What a plan's state means to a script that waited for it (``approve --wait``,
#: ``apply``): None for a state that is not an end (PROPOSED, APPROVED, APPLYING, and
#: APPLIED, which opsbot-verify has yet to judge).
_STATE_STATUS = {
    "VERIFIED": OK,
    "UNRESOLVED": FAILED,
    "FAILED": FAILED,
    "INTERRUPTED": FAILED,
    "STALE": REFUSED,
    "EXPIRED": REFUSED,
    "REJECTED": REFUSED,
}


def at_timeout(state: str) -> int:
    """The exit status of a plan whose wait ended before it did: WAITING while it is not
    approved or not yet applied, FAILED once its steps ran (APPLYING, or APPLIED and not
    verified: not known to be fixed)."""
    ended = for_state(state)
    if ended is not None:
        return ended
    return WAITING if str(state) in ("PROPOSED", "APPROVED") else FAILED


def for_state(state: str) -> int | None:
    """The exit status of a plan that ended in ``state``, or None while it has not ended."""
    return _STATE_STATUS.get(str(state))
