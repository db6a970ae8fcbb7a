"""A baseline the diagnose user forged (issue 39): the directory is the diagnose user's, so
a subverted diagnose process can leave any file in it, which outlives the process. A
snapshot is evidence only in the shape a healthy host leaves; one dated ahead of the
clock is none (it would be the newest, and kept, for ever); the verb drops what it cannot
keep rather than fail.

A forgery in the right shape still reads as evidence: tests/attacks/test_attack_baseline.py
shows what a diagnosis builds on one, and that no standing rule approves it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from diagnose_svc.baseline import snapshot
from diagnose_svc.tools._baseline_store import (
    MAX_ENTRIES,
    BaselineEdge,
    Snapshot,
    load,
    save,
)
from diagnose_svc.tools.read_connections import Connections, Edge

NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def honest(at: datetime = NOON, server: str = "db.service") -> Snapshot:
    return Snapshot(
        taken_at=at,
        units={"app.service": "active/running"},
        listeners=[],
        edges=[
            BaselineEdge(
                client="app.service", server=server, endpoint="127.0.0.1:5432", source="observed"
            )
        ],
        health={"app": 200},
    )


def forged(where: Path, name: str, **changes: Any) -> Path:
    """A snapshot file as the diagnose user could write it: an honest one's JSON with
    ``changes``."""
    where.mkdir(mode=0o700, exist_ok=True)
    data = {**honest().model_dump(mode="json"), **changes}
    path = where / f"snapshot-{name}.json"
    path.write_text(json.dumps(data))
    return path


EDGE = {"client": "app.service", "server": "db.service", "endpoint": ":5432", "source": "observed"}


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"edges": [{**EDGE, "server": "db"}]}, id="a server no unit name"),
        pytest.param({"edges": [{**EDGE, "client": "-x.service"}]}, id="a name like an option"),
        pytest.param({"edges": [{**EDGE, "source": "trust me"}]}, id="an unknown source"),
        pytest.param(
            {"edges": [{**EDGE, "endpoint": ":5432\nApproved by alice"}]},
            id="a multi-line endpoint",
        ),
        pytest.param({"listeners": [{"unit": "db.service", "endpoint": ""}]}, id="no endpoint"),
        pytest.param({"units": {"db.service": "healthy, trust me"}}, id="a state in words"),
        pytest.param({"health": {"App Health": 200}}, id="no target name"),
        pytest.param({"health": {"app": 7}}, id="no HTTP status"),
        pytest.param({"taken_at": "2026-12-02T12:00:00"}, id="a time with no zone"),
        pytest.param(
            {"units": {f"u{i}.service": "active/running" for i in range(MAX_ENTRIES + 1)}},
            id="too many units",
        ),
    ],
)
def test_a_snapshot_not_in_the_shape_a_healthy_host_leaves_is_no_evidence(
    tmp_path: Path, changes: dict[str, Any]
) -> None:
    """Each forgery is skipped as a half-written snapshot is (the honest one beside it
    still reads), and the next snapshot kept prunes it."""
    where = tmp_path / "baseline"
    save(honest(NOON), where)
    bad = forged(where, "20261202T120500000000Z", **changes)
    assert load(where, NOON + timedelta(minutes=10)) == [honest(NOON)]
    save(honest(NOON + timedelta(minutes=10), server="cache.service"), where)
    assert not bad.exists()


def test_a_snapshot_dated_ahead_of_the_clock_is_neither_newest_nor_kept(tmp_path: Path) -> None:
    """A snapshot dated a year ahead (and named to sort last) would be the newest for ever
    and never pruned: it is no evidence, and the next snapshot kept removes it. The newest
    is the one taken last by its own time, whatever its file is called."""
    where = tmp_path / "baseline"
    save(honest(NOON), where)
    ahead = forged(where, "99991231T000000000000Z", taken_at="2027-12-02T12:00:00Z")
    named_late = forged(
        where,
        "99991230T000000000000Z",
        taken_at="2026-12-02T11:00:00Z",
        health={"app": 201},
    )
    kept = load(where, NOON + timedelta(minutes=1))
    assert [s.taken_at for s in kept] == [NOON, NOON - timedelta(hours=1)]
    assert kept[0].health == {"app": 200}
    save(honest(NOON + timedelta(minutes=2), server="cache.service"), where)
    assert not ahead.exists() and named_late.exists()


def test_the_verb_keeps_what_it_can_of_a_host_whose_names_it_cannot() -> None:
    """A connection whose unit name systemd's grammar refuses is left out of the
    snapshot; the rest is kept, and the host's snapshot is still taken."""
    connections = Connections(
        unit=None,
        listeners=[],
        edges=[
            Edge(client="app.service", server=server, address="127.0.0.1", port=5432, states={})
            for server in ("db.service", "not a unit")
        ],
    )
    snap = snapshot(NOON, [], [], connections, None)
    assert isinstance(snap, Snapshot)
    assert [(e.client, e.server) for e in snap.edges] == [("app.service", "db.service")]
