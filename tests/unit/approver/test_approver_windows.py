"""A click outside the apply window: the approval the approver writes holds until the
window's end, as ``opsbot approve`` would write it, and the page and the reply say when
the plan will run (systemd-analyze stood in for by a daily 02:00 UTC calendar)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from plans import PlanStore, approval_path
from shared_schema.approver_socket import Decided, Viewed
from shared_schema.config import ApplyWindow
from tests.unit.approver.bench import Bench, bench
from tests.unit.plans.helpers import NOW, POLICY

WINDOWED = POLICY.model_copy(
    update={"apply_window": [ApplyWindow(start="*-*-* 02:00", duration="2h")]}
)
#: The window after NOW (Sun 2026-11-29 21:35 UTC): Mon 02:00 to 04:00.
OPENS = datetime(2026, 11, 30, 2, 0, tzinfo=NOW.tzinfo)


def daily_at_two(expression: str, base: datetime, iterations: int) -> list[datetime]:
    first = base.replace(hour=2, minute=0, second=0, microsecond=0)
    if first <= base:
        first += timedelta(days=1)
    return [first + timedelta(days=k) for k in range(iterations)]


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


@pytest.fixture
def b(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(tmp_path, store, approvals_dir, policy=WINDOWED, analyze=daily_at_two) as running:
        yield running


def test_an_approval_outside_the_window_holds_until_its_end(b: Bench) -> None:
    """The page says it runs in the window and that an approval now holds until 04:00;
    the approval written says so too, and the reply says it waits for the window."""
    record = b.submit()
    link = b.links(record.plan_id)[("alice", "approve")]
    seen = b.view(link.token)
    assert isinstance(seen, Viewed), seen
    assert seen.plan.runs.startswith("in its apply window")
    assert seen.plan.approval_expires_at == OPENS + timedelta(hours=2)
    reply = b.decide(link.token, b.code())
    assert isinstance(reply, Decided), reply
    assert reply.approval_expires_at == OPENS + timedelta(hours=2)
    assert reply.applies.startswith("it runs in its apply window")
    written = approval_path(b.approvals_dir, record.plan_id).read_text()
    assert '"expires_at":"2026-11-30T04:00:00Z"' in written.replace(" ", "")
