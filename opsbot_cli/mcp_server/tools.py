"""What each tool of ``opsbot mcp`` does, in plain Python (no MCP here): the console's
own functions over the same sockets, as the user who started the server, and the
result as text (opsbot_cli.mcp_server.results). An error is the console's
(OpsbotError: ``.message`` and ``.hint``), raised as the console would raise it.

    diagnose     opsbot diagnose UNIT --symptom S   diagnose.sock (the diagnosis service)
    list_plans   opsbot plans --state S --limit N   executor.sock (list)
    show_plan    opsbot show ID                     executor.sock (show)
    plan_story   opsbot show ID, then opsbot audit ID: executor.sock, and the journal

No tool approves, rejects or applies anything, and none writes a file: the diagnosis
service may store the plan it proposes, which then waits for a person.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opsbot_cli import audit, diagnose as diagnose_verb, plans, show, wire
from opsbot_cli.output import plan_id_arg, unit_arg
from opsbot_cli.story import read_story
from shared_io.paths import Paths
from shared_schema.diagnose_socket import FinishedEvent, StartedEvent, StepEvent

from . import results

#: The most plans list_plans lists at once (``opsbot plans --limit``'s default is 20).
MOST_PLANS = 100

Event = StartedEvent | StepEvent | FinishedEvent


def diagnose(paths: Paths, unit: str, symptom: str, on_event: Callable[[Event], None]) -> str:
    """``opsbot diagnose UNIT --symptom SYMPTOM``: each event to ``on_event``, then the
    verdict as text."""
    verdict = diagnose_verb.diagnosis(paths, unit_arg(unit), symptom, on_event)
    return results.verdict_result(verdict, diagnose_verb.verdict_status(verdict), symptom)


def list_plans(paths: Paths, states: Sequence[str], limit: int) -> str:
    """``opsbot plans --state STATES --limit LIMIT --json``, as text."""
    wanted = plans.states_arg(list(states))
    limit = max(1, min(limit, MOST_PLANS, wire.list_limits()[1]))
    shown, listing = plans.listed(paths, limit, wanted, None)
    total = listing.get("total")
    # The executor lists oldest first (ids are times), as `opsbot plans` prints them; the
    # tool's description promises the newest first, where an agent reads first.
    newest_first = shown[::-1]
    return results.plans_result(newest_first, total if isinstance(total, int) else None, limit)


def show_plan(paths: Paths, plan_id: str) -> str:
    """``opsbot show ID --json``, as text."""
    return results.plan_result(show.fetched(paths, plan_id_arg(plan_id)))


def plan_story(paths: Paths, plan_id: str) -> str:
    """``opsbot audit ID`` for this host: the plan must be one the executor shows this
    user (an operator's), then its trusted journal entries (root, or group
    systemd-journal, reads them); an entry not from its event's writer is left out of
    the story and said apart (opsbot_cli/writers.py)."""
    detail = show.fetched(paths, plan_id_arg(plan_id))
    story = read_story(plan_id)
    if not story.entries:
        raise audit.nothing_found(plan_id)
    summary = audit.summary(plan_id, story.entries, verbose=True)
    state = detail["summary"]["state"]
    return results.story_result(plan_id, state, story.entries, story.ignored, summary, story.apart)
