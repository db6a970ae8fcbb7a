"""The road every approval takes (plans/road.py), step by step, with the host scripted at
its seams (the journal witness, systemd's apply units, polkit): what it reads, in which
order, what it writes, what it says in the journal. The doors' own checks and one check
refusing at every door: tests/unit/approver/test_one_road.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from plans import (
    Accepted,
    PlanRecord,
    PlanRefused,
    PlanStore,
    WindowState,
    approval_path,
    road,
)
from plans.road import Granted, Person, Request, Road, Rule, still_waits
from shared_io.errors import StoreError
from shared_io.paths import Paths
from shared_schema import PlanState
from shared_schema.config import ApplyWindow
from tests.unit.plans.helpers import NOW, POLICY, approved, plan_of, step, submitted


@dataclass
class Host:
    """What the road asks of the host, scripted, and what it was asked."""

    store: PlanStore
    approvals_dir: Path
    logged: dict[str, set[str]] = field(default_factory=dict)
    witnessed: list[str] = field(default_factory=list)
    busy: bool = False
    #: Whether an approval file existed each time the road asked if an apply runs.
    approval_when_asked: list[bool] = field(default_factory=list)
    started: list[bool] = field(default_factory=list)
    windowed: list[tuple[WindowState, datetime]] = field(default_factory=list)
    mode: str = "polkit-rule-missing"

    def witness(self, plan_id: str) -> Accepted:
        self.witnessed.append(plan_id)
        return Accepted(frozenset(self.logged.get(plan_id, set())), NOW - timedelta(days=1))

    def apply_busy(self, plan_id: str) -> bool:
        self.approval_when_asked.append(approval_path(self.approvals_dir, plan_id).exists())
        return self.busy

    def road(self, plan_id: str, tmp_path: Path, **policy: object) -> Road:
        return Road(
            store=self.store,
            approvals_dir=self.approvals_dir,
            policy=POLICY.model_copy(update=policy),
            start_apply=lambda busy: (self.started.append(busy) or "it starts now", True),
            window_apply=lambda w, now: (self.windowed.append((w, now)) or "in its window", True),
            witness=self.witness,
            apply_busy=lambda: self.apply_busy(plan_id),
            analyze=calendar,
            privilege=lambda: self.mode,
            grants_dir=tmp_path,
        )


def calendar(expression: str, base: datetime, iterations: int) -> list[datetime]:
    """systemd-analyze for "*-*-* 02:00" in UTC: the next 02:00 after ``base``, daily."""
    first = base.replace(hour=2, minute=0, second=0, microsecond=0)
    if first <= base:
        first += timedelta(days=1)
    return [first + timedelta(days=n) for n in range(iterations)]


NIGHTLY = [ApplyWindow(start="*-*-* 02:00", duration="2h")]


@pytest.fixture
def host(store: PlanStore, approvals_dir: Path) -> Host:
    return Host(store, approvals_dir)


def proposed(host: Host) -> PlanRecord:
    """A restart of nginx.service, stored and logged by the executor."""
    record = submitted(host.store, plan_of(step("restart_unit", "nginx.service")))
    host.logged[record.plan_id] = {record.sha256}
    return record


def asked(record: PlanRecord, by: Person | Rule, **more: object) -> Request:
    fields: dict[str, object] = {"now": NOW, "ttl_seconds": 600, **more}
    return Request(plan_id=record.plan_id, sha256=record.sha256, by=by, **fields)  # type: ignore[arg-type]


ALICE = Person("alice", via="web")
ROOT = Person("root", via="terminal")


def test_a_click_writes_the_approval_after_asking_whether_an_apply_runs(
    host: Host, tmp_path: Path
) -> None:
    """The road asks the journal, hands the door the plan it reviewed (to spend its
    link), asks whether an apply runs while no approval exists yet, writes the approval
    bound to the sha256, starts the apply, and journals approval.web with the door's
    facts."""
    record = proposed(host)
    committed: list[str] = []
    with capture_logs() as logs:
        granted = host.road(record.plan_id, tmp_path).approve(
            asked(record, ALICE, facts={"source": "192.0.2.7"}),
            commit=lambda reviewed: committed.append(reviewed.record.sha256),
        )
    assert isinstance(granted, Granted)
    assert host.witnessed == [record.plan_id]
    assert committed == [record.sha256]
    assert host.approval_when_asked == [False]
    assert host.started == [False] and host.windowed == []
    assert (granted.applies, granted.starts) == ("it starts now", True)
    assert granted.reviewed.record.plan_id == record.plan_id
    approval = json.loads(approval_path(host.approvals_dir, record.plan_id).read_bytes())
    assert (approval["sha256"], approval["approver"]) == (record.sha256, "alice")
    status = host.store.status(record.plan_id)
    assert (status.state, status.approved_by) == (PlanState.APPROVED, "alice")
    [entry] = [e for e in logs if e["event"] == "approval.web"]
    assert entry["plan_id"] == record.plan_id and entry["sha256"] == record.sha256
    assert (entry["approver"], entry["via"], entry["source"]) == ("alice", "web", "192.0.2.7")
    assert entry["approved_by_rule"] is None and entry["rule_sha256"] is None
    assert entry["units"] == "nginx.service" and entry["applies"] == "it starts now"
    assert entry["expires_at"] == (NOW + timedelta(seconds=600)).isoformat()


def test_an_apply_running_before_the_approval_is_told_to_the_apply_s_start(
    host: Host, tmp_path: Path
) -> None:
    """An apply ran when the road asked: the start is told so (it merges into that run)."""
    record = proposed(host)
    host.busy = True
    host.road(record.plan_id, tmp_path).approve(asked(record, ALICE))
    assert host.started == [True]


def test_a_rule_s_approval_is_the_rule_s_and_no_one_s(host: Host, tmp_path: Path) -> None:
    """A rule: the approval and the status name the rule and its sha256, no approver;
    the journal says approval.rule."""
    record = proposed(host)
    with capture_logs() as logs:
        host.road(record.plan_id, tmp_path).approve(asked(record, Rule("nightly", "ab" * 32)))
    approval = json.loads(approval_path(host.approvals_dir, record.plan_id).read_bytes())
    assert (approval["approved_by_rule"], approval["rule_sha256"]) == ("nightly", "ab" * 32)
    assert "approver" not in approval
    [entry] = [e for e in logs if e["event"] == "approval.rule"]
    assert (entry["approved_by_rule"], entry["rule_sha256"], entry["approver"]) == (
        "nightly",
        "ab" * 32,
        None,
    )


def test_a_witness_the_door_read_is_not_read_again(host: Host, tmp_path: Path) -> None:
    """A door that read the journal for its own review passes what it read: the road
    reads it no second time, and believes it (a witness naming another sha256 refuses)."""
    record = proposed(host)
    path = host.road(record.plan_id, tmp_path)
    seen = Accepted(frozenset({record.sha256}), NOW - timedelta(days=1))
    assert path.review(record.plan_id, seen).record.sha256 == record.sha256
    path.approve(asked(record, ROOT, renew=True), witnessed=seen)
    assert host.witnessed == []
    other = proposed_again(host)
    with pytest.raises(Exception, match="rewritten after it was accepted"):
        path.approve(
            asked(other, ALICE),
            witnessed=Accepted(frozenset({"0" * 64}), NOW - timedelta(days=1)),
        )
    assert path.review(other.plan_id).record.plan_id == other.plan_id
    assert host.witnessed == [other.plan_id]


def proposed_again(host: Host) -> PlanRecord:
    record = submitted(host.store, plan_of(step("restart_unit", "app.service")))
    host.logged[record.plan_id] = {record.sha256}
    return record


def test_a_click_never_renews_an_approval_root_made(host: Host, tmp_path: Path) -> None:
    """root approved the plan: a click (or a rule) is refused, naming who approved it and
    how root renews it; root at the terminal renews it."""
    record = proposed(host)
    approved(host.store, host.approvals_dir, record)
    path = host.road(record.plan_id, tmp_path)
    with pytest.raises(PlanRefused) as refused:
        path.approve(asked(record, ALICE))
    assert refused.value.message == (
        f"plan {record.plan_id} was approved already by alice; nothing was changed"
    )
    assert refused.value.hint == f"root renews an approval with `opsbot approve {record.plan_id}`"
    path.approve(asked(record, ROOT, renew=True))


def test_a_plan_is_clicked_until_the_instant_it_expires(host: Host, tmp_path: Path) -> None:
    """plan_ttl_seconds after its submission the plan no longer waits: a click a second
    before approves, one at that instant is refused, saying when it expired."""
    record = proposed(host)
    expires = record.submitted_at + timedelta(seconds=POLICY.plan_ttl_seconds)
    reviewed = host.road(record.plan_id, tmp_path).review(record.plan_id)
    with pytest.raises(PlanRefused) as refused:
        still_waits(asked(record, ALICE, now=expires), reviewed, POLICY)
    assert refused.value.message == (
        f"plan {record.plan_id} expired at {expires.isoformat(timespec='seconds')} "
        "(plan_ttl_seconds); nothing was approved"
    )
    assert refused.value.hint == "diagnose again for a new plan"
    still_waits(asked(record, ALICE, now=expires - timedelta(seconds=1)), reviewed, POLICY)
    still_waits(asked(record, ROOT, now=expires, renew=True), reviewed, POLICY)


def test_outside_its_window_a_plan_waits_for_the_window_and_no_apply_starts(
    host: Host, tmp_path: Path
) -> None:
    """Approved at 21:35 with a nightly window at 02:00: the window's words, no start."""
    record = proposed(host)
    granted = host.road(record.plan_id, tmp_path, apply_window=NIGHTLY).approve(
        asked(record, ALICE)
    )
    assert host.started == []
    [(window, now)] = host.windowed
    assert not window.open and window.opens_at == NOW.replace(hour=2, minute=0) + timedelta(days=1)
    assert now == NOW
    assert granted.applies == "in its window" and not granted.approved.window.open


def test_root_s_now_outside_the_window_writes_the_plan_s_grant_under_polkit(
    host: Host, tmp_path: Path
) -> None:
    """`approve --now` outside the window on a host whose executor polkit holds: the
    apply starts at once, its words say it overrides the window, and the plan's grant
    names its own verb and unit until the approval expires."""
    record = proposed(host)
    host.mode = "polkit"
    granted = host.road(record.plan_id, tmp_path, apply_window=NIGHTLY).approve(
        asked(record, ROOT, renew=True, override_window=True)
    )
    assert host.started == [False]
    assert granted.applies == "overrides its apply window (--now): it starts now"
    grant = (tmp_path / f"59-opsbot-now-{record.plan_id}.rules").read_text()
    assert '"restart": [\n        "nginx.service"\n    ]' in grant
    until = int((NOW + timedelta(seconds=600)).timestamp() * 1000)
    assert f"Date.now() >= {until}" in grant


@pytest.mark.parametrize(
    ("mode", "windows", "now"),
    [("polkit", [], True), ("polkit", NIGHTLY, False), ("polkit-rule-missing", NIGHTLY, True)],
    ids=["no-window", "no-override", "no-polkit"],
)
def test_no_grant_without_an_override_of_a_window_under_polkit(
    host: Host, tmp_path: Path, mode: str, windows: list[ApplyWindow], now: bool
) -> None:
    """No window to override, no --now, or a host whose executor polkit does not hold
    (there the windows bind opsbot's code only): no grant; the words say the override
    where there is one."""
    record = proposed(host)
    host.mode = mode
    granted = host.road(record.plan_id, tmp_path, apply_window=windows).approve(
        asked(record, ROOT, renew=True, override_window=now)
    )
    assert not list(tmp_path.glob("59-opsbot-now-*"))
    assert ("overrides its apply window" in granted.applies) == (now and bool(windows))


def test_a_grant_that_cannot_be_written_is_said(host: Host, tmp_path: Path) -> None:
    """The grant's directory is a file: the approval stands, and the error says the
    steps will be refused outside the window."""
    record = proposed(host)
    host.mode = "polkit"
    blocked = tmp_path / "rules.d"
    blocked.write_text("")
    path = replace(host.road(record.plan_id, tmp_path, apply_window=NIGHTLY), grants_dir=blocked)
    with pytest.raises(StoreError, match="refused outside its window") as failed:
        path.approve(asked(record, ROOT, renew=True, override_window=True))
    assert failed.value.message.startswith(
        f"approved, but the polkit grant {blocked}/59-opsbot-now-{record.plan_id}.rules could "
        "not be written"
    )


def test_the_host_s_road_starts_the_apply_its_units_watch(
    store: PlanStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Road.on_host: the apply's start and the window's words are plans.apply_unit's
    for these paths; an apply runs only where its units read these approvals."""
    paths = Paths.from_env()
    calls: list[tuple[str, object]] = []
    monkeypatch.setattr(road, "start_apply", lambda p, busy: calls.append(("start", (p, busy))))
    monkeypatch.setattr(road, "window_apply", lambda p, w, n: calls.append(("window", (p, w, n))))
    monkeypatch.setattr(road, "watched", lambda p: calls.append(("watched", p)) or False)
    monkeypatch.setattr(road, "apply_running", lambda: calls.append(("running", None)) or True)
    witness = lambda plan_id: Accepted(frozenset())  # noqa: E731
    host_road = Road.on_host(store, paths, POLICY, witness=witness, analyze=calendar)
    assert (host_road.store, host_road.approvals_dir, host_road.policy) == (
        store,
        paths.approvals_dir,
        POLICY,
    )
    assert host_road.witness is witness and host_road.analyze is calendar
    window = WindowState(False, None, None)
    host_road.start_apply(True)
    host_road.window_apply(window, NOW)
    assert host_road.apply_busy() is False
    assert calls == [
        ("start", (paths, True)),
        ("window", (paths, window, NOW)),
        ("watched", paths),
    ]
