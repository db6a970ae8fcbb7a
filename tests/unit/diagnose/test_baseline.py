"""The last-known-good baseline: taken only from a healthy host, kept atomically in the
diagnose user's own directory, for at most three days and a few hundred KiB, never twice
the same; and what a diagnosis says with it: a backend down now, with no connection left
to see, is still the dependency it was an hour ago, and the note says what changed."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from diagnose_svc.baseline import snapshot, take
from diagnose_svc.tools._baseline_store import (
    KEEP_DAYS,
    MAX_BYTES,
    BaselineEdge,
    BaselineListener,
    Snapshot,
    load,
    save,
)
from diagnose_svc.tools.read_connections import Connections, Edge, Endpoint
from diagnose_svc.verdict import PlanVerdict
from tests.unit.diagnose import recorded
from tests.unit.diagnose.helpers import RecordedHost, health
from tests.unit.diagnose.test_runbook import (
    APP_ALONE,
    DB_RAN,
    diagnose,
    looping,
    settings,
    steps_of,
)

NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def healthy_host(at: datetime = NOON) -> Snapshot | str:
    host = RecordedHost().add(recorded.APP_SHOW.replace("db.service ", ""))
    connections = Connections(
        unit=None,
        listeners=[Endpoint(address="127.0.0.1", port=5432, unit="db.service")],
        edges=[
            Edge(
                client="app.service",
                server="db.service",
                address="127.0.0.1",
                port=5432,
                states={"established": 3},
            )
        ],
    )
    return snapshot(
        at,
        [host.status("app.service")],
        [health("app", "app.service", "ok", status=200)],
        connections,
        None,
    )


def test_a_snapshot_is_taken_only_of_a_healthy_host() -> None:
    """Every unit up and every health target answering: a snapshot of states, listeners,
    edges and answers. A failed unit or a failing target: none, and the reason why."""
    snap = healthy_host()
    assert isinstance(snap, Snapshot)
    assert snap.units == {"app.service": "active/running"}
    assert snap.edges == [
        BaselineEdge(
            client="app.service", server="db.service", endpoint="127.0.0.1:5432", source="observed"
        )
    ]
    assert snap.health == {"app": 200}
    down = RecordedHost().add(DB_RAN).status("db.service")
    assert (
        snapshot(NOON, [down], [], None, None) == "db.service is failed/failed (Result=exit-code)"
    )
    refused = health("app", "app.service", "connection_refused")
    assert snapshot(NOON, [], [refused], None, None) == "health target app connection_refused"


def test_the_baseline_is_the_diagnose_user_s_alone_and_written_whole(tmp_path: Path) -> None:
    """The directory is 0700 and each snapshot 0600; a snapshot cut short by a killed
    process is no evidence (skipped), the others still are."""
    where = tmp_path / "baseline"
    snap = healthy_host()
    assert isinstance(snap, Snapshot)
    written = save(snap, where)
    assert written is not None
    assert stat.S_IMODE(where.stat().st_mode) == 0o700
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    (where / "snapshot-20261202T130000000000Z.json").write_text('{"taken_at": "2026-12-')
    assert load(where, NOON) == [snap]
    assert not [p for p in os.listdir(where) if p.startswith(".")]  # no temporary left


def test_the_same_host_is_kept_once_and_old_or_excess_snapshots_go(tmp_path: Path) -> None:
    """A snapshot that says what the newest says only moves its time; snapshots older
    than three days go; past the size limit the oldest go first."""
    where = tmp_path / "baseline"
    first = healthy_host(NOON)
    later = healthy_host(NOON + timedelta(minutes=2))
    assert isinstance(first, Snapshot) and isinstance(later, Snapshot)
    save(first, where)
    assert save(later, where) is None
    [kept] = load(where, NOON + timedelta(minutes=3))
    assert kept.taken_at == later.taken_at
    assert load(where, NOON + timedelta(days=KEEP_DAYS, minutes=3)) == []
    big = later.model_copy(
        update={
            "listeners": [
                BaselineListener(unit=f"u{i}.service", endpoint=f"127.0.0.1:{i}")
                for i in range(1000, 1200)
            ]
        }
    )
    for minute in range(40):
        moved = big.model_copy(
            update={
                "taken_at": NOON + timedelta(minutes=10 + minute),
                "health": {"app": 200 + minute},
            }
        )
        save(moved, where)
    total = sum(p.stat().st_size for p in where.iterdir())
    assert total <= MAX_BYTES
    assert load(where, NOON + timedelta(hours=1))[0].health == {"app": 239}


def test_an_unhealthy_host_leaves_the_baseline_as_it_was(tmp_path: Path) -> None:
    """The verb on a host that is not healthy says why and keeps nothing."""
    where = tmp_path / "baseline"
    said = take(lambda: "db.service is failed/failed (Result=exit-code)", where)
    assert said == (
        "no baseline taken: the host is not healthy now "
        "(db.service is failed/failed (Result=exit-code))"
    )
    assert not where.exists()


def test_a_baseline_that_cannot_be_kept_is_said_and_verification_goes_on(tmp_path: Path) -> None:
    """Where the snapshot cannot be written (here a file where its directory should be;
    a full disk, a directory removed under a run), the verb says so and returns: the
    verify run that takes it first has plans to judge."""
    where = tmp_path / "baseline"
    where.write_text("not a directory")
    said = take(healthy_host, where)
    assert said.startswith("no baseline kept: "), said


def test_a_backend_down_now_is_still_the_dependency_it_was_when_healthy() -> None:
    """app loops; db is down: no connection to it now, and nothing declared or
    configured links them. At noon, while the host was healthy, app was connected to db:
    the plan starts db, and says what changed since the host was healthy."""
    snap = healthy_host()
    assert isinstance(snap, Snapshot)
    snap = snap.model_copy(
        update={
            "units": {"app.service": "active/running", "db.service": "active/running"},
            "listeners": [BaselineListener(unit="db.service", endpoint="127.0.0.1:5432")],
        }
    )
    host = RecordedHost(baseline=snap, connections=[], configured=[])
    host.add(looping(APP_ALONE)).add(DB_RAN, recorded.DB_JOURNAL)
    verdict, _ = diagnose(host, "app.service", settings())
    assert steps_of(verdict) == [("start_unit", "db.service", {"active_state": ["failed"]})]
    assert isinstance(verdict, PlanVerdict)
    reason = verdict.plan.steps[0].reason
    assert (
        "Last healthy 2026-12-02 12:00 UTC: db.service was active/running, listening on "
        "127.0.0.1:5432, reached by app.service; now it is failed/failed."
    ) in reason


def test_a_baseline_edge_to_a_unit_removed_since_is_history() -> None:
    """The baseline remembers killed.service reaching old.service, which has been removed
    since (systemd: not found): that edge is history; it neither blocks the evidence of
    killed.service nor gets in the plan, which starts killed.service."""
    old = BaselineEdge(
        client="killed.service", server="old.service", endpoint=":7000", source="configured"
    )
    snap = Snapshot(
        taken_at=NOON,
        units={"killed.service": "active/running"},
        listeners=[],
        edges=[old],
        health={},
    )
    host = RecordedHost(baseline=snap, connections=[], configured=[])
    host.add(recorded.KILLED_SHOW, recorded.KILLED_JOURNAL)
    verdict, _ = diagnose(host, "killed.service", settings())
    assert steps_of(verdict) == [("start_unit", "killed.service", {"active_state": ["failed"]})]
    assert ("read_unit_status", {"unit": "old.service"}) in host.calls
