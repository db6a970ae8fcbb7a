"""The plan store: what ACCEPT promises is on disk, byte for byte, and nothing that is
not a plan the executor wrote is ever read as one."""

import errno
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from plans import PlanNotFound, PlanStore, StatusRecord, TamperedPlan, new_plan_id
from shared_io.errors import StoreError
from shared_schema import PlanState, is_valid_plan_id, sha256_hex
from testbed.skips import skip_unless

from .helpers import DIAGNOSE, NOW, edit_record, plan_of, step, submitted


def test_add_stores_the_canonical_bytes_under_a_fresh_plan_id(store: PlanStore) -> None:
    """add() returns a plan id and the fingerprint; plans/<id>.json holds exactly the
    canonical bytes of the plan and their sha256, with who submitted it and when."""
    plan = plan_of()
    plan_id, sha, duplicate = store.add(plan, DIAGNOSE, NOW)
    assert is_valid_plan_id(plan_id)
    assert plan_id.startswith("20261129-213500-")
    assert not duplicate
    assert sha == plan.fingerprint()
    on_disk = json.loads((store.plans / f"{plan_id}.json").read_bytes())
    assert on_disk["plan"].encode() == plan.canonical()
    assert on_disk["sha256"] == sha256_hex(plan.canonical()) == sha
    assert on_disk["plan_id"] == plan_id
    assert on_disk["submitted_by"]["user"] == "opsbot-diagnose"
    assert store.ids() == [plan_id]


def test_a_stored_plan_is_not_readable_by_others(store: PlanStore) -> None:
    """Plan records are not world-readable."""
    plan_id, _, _ = store.add(plan_of(), DIAGNOSE, NOW)
    assert (store.plans / f"{plan_id}.json").stat().st_mode & 0o007 == 0


def test_a_new_plan_starts_proposed_by_its_submitter(store: PlanStore) -> None:
    """Before any transition, a stored plan is PROPOSED, by the user who submitted it."""
    record = submitted(store, plan_of())
    status = store.status(record.plan_id)
    assert status.state is PlanState.PROPOSED
    assert [(t.state, t.by, t.at) for t in status.history] == [
        (PlanState.PROPOSED, "opsbot-diagnose", NOW)
    ]


def test_the_same_plan_resubmitted_while_open_gets_the_same_id(store: PlanStore) -> None:
    """A model that submits the same plan twice (or a retry after a lost reply) gets the
    first plan's id back, marked duplicate, while that plan is PROPOSED or APPROVED;
    also after the daemon restarted (a new PlanStore on the same directory)."""
    first_id, sha, _ = store.add(plan_of(), DIAGNOSE, NOW)
    assert store.add(plan_of(), DIAGNOSE, NOW) == (first_id, sha, True)
    store.save_status(StatusRecord(plan_id=first_id, state=PlanState.APPROVED, approved_by="alice"))
    restarted = PlanStore(store.root)
    assert restarted.add(plan_of(), DIAGNOSE, NOW) == (first_id, sha, True)
    assert store.ids() == [first_id]


def test_a_different_plan_gets_a_different_id(store: PlanStore) -> None:
    """A plan that differs in anything (here: the unit) is a new plan."""
    first_id, _, _ = store.add(plan_of(), DIAGNOSE, NOW)
    second_id, _, duplicate = store.add(plan_of(step("restart_unit", "app.service")), DIAGNOSE, NOW)
    assert second_id != first_id
    assert not duplicate


@pytest.mark.parametrize("final", [PlanState.APPLIED, PlanState.FAILED, PlanState.REJECTED])
def test_after_a_plan_is_final_the_same_plan_gets_a_new_id(
    store: PlanStore, final: PlanState
) -> None:
    """Once a plan has run (or was rejected), submitting it again is a new plan with a
    new id, needing its own approval."""
    first_id, sha, _ = store.add(plan_of(), DIAGNOSE, NOW)
    store.save_status(StatusRecord(plan_id=first_id, state=final))
    second_id, second_sha, duplicate = store.add(plan_of(), DIAGNOSE, NOW)
    assert second_id != first_id
    assert second_sha == sha
    assert not duplicate
    assert store.ids() == sorted([first_id, second_id])


def test_verified_plan_gives_back_the_stored_plan(store: PlanStore) -> None:
    """An untouched record verifies and yields the plan that was stored."""
    plan = plan_of(step("reset_failed_unit", "nginx.service"), step("start_unit", "nginx.service"))
    record = submitted(store, plan)
    assert store.verified_plan(store.load(record.plan_id)) == plan


def test_verified_plan_detects_an_edited_plan(store: PlanStore) -> None:
    """Someone edits the stored plan's text (another unit) but not its fingerprint: the
    bytes no longer hash to it."""
    record = submitted(store, plan_of())
    edit_record(store, record.plan_id, plan=record.plan.replace("nginx.service", "sshd.service"))
    with pytest.raises(TamperedPlan, match="modified after it was stored"):
        store.verified_plan(store.load(record.plan_id))


def test_verified_plan_detects_an_edited_fingerprint(store: PlanStore) -> None:
    """Someone edits the stored fingerprint: the bytes no longer hash to it."""
    record = submitted(store, plan_of())
    edit_record(store, record.plan_id, sha256="0" * 64)
    with pytest.raises(TamperedPlan, match="no longer match its fingerprint"):
        store.verified_plan(store.load(record.plan_id))


def test_verified_plan_detects_a_non_canonical_rewrite(store: PlanStore) -> None:
    """The same plan re-serialised with other whitespace, with a matching sha256, is not
    the canonical form any more: refused, since the fingerprint approved must be the
    fingerprint of the canonical bytes."""
    record = submitted(store, plan_of())
    pretty = json.dumps(json.loads(record.plan), indent=2)
    edit_record(store, record.plan_id, plan=pretty, sha256=sha256_hex(pretty.encode()))
    with pytest.raises(TamperedPlan, match="no longer a valid canonical plan"):
        store.verified_plan(store.load(record.plan_id))


def test_verified_plan_detects_a_plan_that_no_longer_validates(store: PlanStore) -> None:
    """A consistent rewrite into something that is not a valid plan is refused too."""
    record = submitted(store, plan_of())
    bad = '{"goal":"x","steps":[]}'
    edit_record(store, record.plan_id, plan=bad, sha256=sha256_hex(bad.encode()))
    with pytest.raises(TamperedPlan, match="no longer a valid canonical plan"):
        store.verified_plan(store.load(record.plan_id))


def test_load_refuses_a_symlinked_plan_file(store: PlanStore, tmp_path: Path) -> None:
    """A plans/<id>.json that is a symlink (to a valid record, even) is refused as
    tampering, never followed."""
    record = submitted(store, plan_of())
    outside = tmp_path / "elsewhere.json"
    path = store.plans / f"{record.plan_id}.json"
    os.rename(path, outside)
    path.symlink_to(outside)
    with pytest.raises(TamperedPlan, match="is a symlink; refusing it"):
        store.load(record.plan_id)


@pytest.mark.parametrize(
    "plan_id", ["../x", "a/b", "../state/plans/x", "", "20261129-213500-1a2b3c4d/"]
)
def test_load_refuses_a_path_like_id(store: PlanStore, plan_id: str) -> None:
    """An id that is not a plan id (a path, say) is PlanNotFound before any file is
    opened, saying what ids look like."""
    with pytest.raises(PlanNotFound, match="is not a plan id"):
        store.load(plan_id)


def test_load_of_an_unknown_id_is_plan_not_found(store: PlanStore) -> None:
    """A well-formed id with no plan is PlanNotFound, with a hint to list plans."""
    with pytest.raises(PlanNotFound, match="no plan 20261129-213500-1a2b3c4d") as caught:
        store.load("20261129-213500-1a2b3c4d")
    assert "opsbot plans" in caught.value.hint


def test_a_record_that_names_another_plan_is_refused(store: PlanStore) -> None:
    """A plan file copied under another plan's name is caught: its plan_id disagrees."""
    record = submitted(store, plan_of())
    other = new_plan_id(NOW)
    (store.plans / f"{other}.json").write_bytes(
        (store.plans / f"{record.plan_id}.json").read_bytes()
    )
    with pytest.raises(TamperedPlan, match=f"holds plan {record.plan_id}, not {other}"):
        store.load(other)


def test_a_plan_record_appears_under_its_own_name_only(
    store: PlanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Storing a plan puts no other name in plans/ on the way (it is written unnamed,
    fsynced, then linked in): opsbot-rules.path and opsbot-notify.path, which watch the
    directory, are woken by the plan and not also by a temp file made, closed and
    removed; a killed daemon leaves nothing to sweep."""
    touched: list[str] = []
    for name in ("unlink", "rename"):
        real = getattr(os, name)
        monkeypatch.setattr(
            os,
            name,
            lambda *args, _real=real, **kw: (touched.append(str(args[0])), _real(*args, **kw))[1],
        )
    record = submitted(store, plan_of())
    assert touched == []
    assert os.listdir(store.plans) == [f"{record.plan_id}.json"]
    assert store.load(record.plan_id) == record


def test_where_no_unnamed_file_can_be_made_a_plan_is_written_through_a_temp_file(
    store: PlanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a file system that makes no unnamed file (O_TMPFILE refused), a plan is stored
    as before: a temp file, fsynced, linked in and removed."""
    real_open = os.open

    def no_tmpfile(path: object, flags: int, *args: object, **kw: object) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(errno.EOPNOTSUPP, "Operation not supported")
        return real_open(path, flags, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", no_tmpfile)
    record = submitted(store, plan_of())
    assert os.listdir(store.plans) == [f"{record.plan_id}.json"]
    assert store.load(record.plan_id) == record


def test_a_leftover_temp_file_is_never_a_plan_and_is_swept_when_old(store: PlanStore) -> None:
    """A daemon killed mid-write leaves a .tmp-* file: ids() never lists it, a young one
    is left alone (a writer may still own it), an old one is swept."""
    record = submitted(store, plan_of())
    young = store.plans / f".tmp-{new_plan_id(NOW)}.json.0a1b2c3d"
    old = store.status_dir / f".tmp-{record.plan_id}.json.deadbeef"
    for leftover in (young, old):
        leftover.write_bytes((store.plans / f"{record.plan_id}.json").read_bytes())
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert store.ids() == [record.plan_id]
    assert store.sweep_temp_files(older_than=60) == 1
    assert young.exists()
    assert not old.exists()
    assert store.load(record.plan_id) == record


def test_sweeping_goes_on_past_a_temp_entry_that_vanishes(store: PlanStore) -> None:
    """A temp entry that disappears while the sweep looks at it (another writer renamed
    it; here: a dangling symlink) does not stop the sweep of the others."""
    an_hour_ago = time.time() - 3600
    old = []
    for index in range(20):
        path = store.plans / f".tmp-{index:02d}.json.00000000"
        path.write_bytes(b"{}")
        os.utime(path, (an_hour_ago, an_hour_ago))
        old.append(path)
    (store.plans / ".tmp-gone.json.11111111").symlink_to(store.plans / "no-such-file")
    assert store.sweep_temp_files(older_than=60) == 20
    assert not any(path.exists() for path in old)


def test_an_approval_is_consumed_exactly_once(store: PlanStore) -> None:
    """consume() is True the first time and False every time after: a replayed approval
    authorises nothing."""
    plan_id = submitted(store, plan_of()).plan_id
    assert store.consume(plan_id, "a" * 64, "root", NOW)
    assert store.is_consumed(plan_id)
    assert not store.consume(plan_id, "a" * 64, "root", NOW)
    assert not store.consume(plan_id, "b" * 64, "alice", NOW)


def test_of_two_racing_consumers_exactly_one_wins(store: PlanStore) -> None:
    """Two applies that consume the same approval at the same instant: exactly one gets
    it, in every one of 50 rounds."""

    def consume(plan_id: str, barrier: threading.Barrier, results: list[bool]) -> None:
        racer = PlanStore(store.root)  # each apply process has its own store
        barrier.wait()
        results.append(racer.consume(plan_id, "a" * 64, "root", NOW))

    for _ in range(50):
        plan_id = new_plan_id(NOW)
        barrier = threading.Barrier(2)
        results: list[bool] = []
        threads = [
            threading.Thread(target=consume, args=(plan_id, barrier, results)) for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == [False, True], plan_id
    assert not [n for n in os.listdir(store.consumed) if n.startswith(".tmp-")]


@pytest.fixture
def tiny_state_dir(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs as the state directory, unmounted afterwards."""
    skip_unless(os.geteuid() == 0, "mounting a tmpfs needs root")
    mountpoint = tmp_path / "tiny"
    mountpoint.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0750", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
        check=False,
    )
    skip_unless(mount.returncode == 0, f"cannot mount a tmpfs here: {mount.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


def _fill(directory: Path) -> Path:
    """Write a file until the file system is full, to the last byte."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for size in (4096, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                continue
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_is_a_store_error_and_stored_plans_stay_intact(tiny_state_dir: Path) -> None:
    """On a full file system, add() fails with a StoreError that says "no space left",
    leaves no temp file, and every plan stored before is still there and loads; once
    there is space again, plans are stored again."""
    store = PlanStore(tiny_state_dir)
    store.ensure()
    before = submitted(store, plan_of())
    filler = _fill(tiny_state_dir)
    with pytest.raises(StoreError, match="no space left on device"):
        store.add(plan_of(step("restart_unit", "app.service")), DIAGNOSE, NOW)
    assert store.ids() == [before.plan_id]
    assert store.load(before.plan_id) == before
    assert store.verified_plan(store.load(before.plan_id)) == plan_of()
    assert not [n for n in os.listdir(store.plans) if n.startswith(".tmp-")]
    filler.unlink()
    plan_id, _, duplicate = store.add(plan_of(step("restart_unit", "app.service")), DIAGNOSE, NOW)
    assert not duplicate
    assert sorted(store.ids()) == sorted([before.plan_id, plan_id])


def test_the_same_plan_submitted_at_once_by_many_clients_is_stored_once(
    store: PlanStore,
) -> None:
    """Sixteen threads submit one plan at the same moment: exactly one record is written,
    and every caller gets its id (all but one with duplicate=True)."""
    plan = plan_of(step("restart_unit", "app.service"))
    barrier = threading.Barrier(16)
    results: list[tuple[str, str, bool]] = []
    lock = threading.Lock()

    def submit() -> None:
        barrier.wait()
        outcome = store.add(plan, DIAGNOSE, NOW)
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=submit) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({plan_id for plan_id, _, _ in results}) == 1
    assert sorted(duplicate for _, _, duplicate in results) == [False] + [True] * 15
    assert len(store.ids()) == 1


def test_different_plans_submitted_at_once_are_all_stored(store: PlanStore) -> None:
    """Sixteen different plans at the same moment: sixteen ids, sixteen records."""
    plans = [plan_of(step("restart_unit", f"app{i}.service")) for i in range(16)]
    barrier = threading.Barrier(16)
    ids: list[str] = []
    lock = threading.Lock()

    def submit(index: int) -> None:
        barrier.wait()
        plan_id, _, duplicate = store.add(plans[index], DIAGNOSE, NOW)
        assert not duplicate
        with lock:
            ids.append(plan_id)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 16 and sorted(store.ids()) == sorted(ids)


def test_a_reader_sees_the_old_or_the_whole_new_status_at_every_point_of_a_write(
    store: PlanStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A status rewrite goes through a temp file: while the new bytes are written and
    synced, the status a reader finds is still the old one, whole; and when the write
    fails between writing and renaming (a crash, a full disk), the old status stays, whole,
    and no temp file is left behind. A store that wrote in place would fail both."""
    record = submitted(store, plan_of())
    old = store.status(record.plan_id, record)
    store.save_status(old)
    old_bytes = (store.status_dir / f"{record.plan_id}.json").read_bytes()
    new = old.model_copy(update={"refusal": "x" * 5000})
    seen_during_write: list[StatusRecord] = []
    real_fsync = os.fsync

    def observing_fsync(fd: int) -> None:
        # Every point between the first byte written and the rename, as a reader sees it.
        seen_during_write.append(store.status(record.plan_id, record))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", observing_fsync)
    store.save_status(new)
    monkeypatch.setattr(os, "fsync", real_fsync)
    # The file's own fsync (written, not yet renamed) sees the old status; the directory's
    # (after the rename) the new one: at no point anything else.
    assert seen_during_write[0] == old and seen_during_write[-1] == new
    assert all(s in (old, new) for s in seen_during_write)
    assert store.status(record.plan_id, record) == new

    store.save_status(old)

    def crash(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(StoreError, match="Input/output error"):
        store.save_status(new)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert (store.status_dir / f"{record.plan_id}.json").read_bytes() == old_bytes
    assert [n for n in os.listdir(store.status_dir) if n.startswith(".tmp-")] == []
