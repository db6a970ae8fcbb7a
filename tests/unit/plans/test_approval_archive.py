"""Root's archive reads approvals without a model (plans.approval_archive): it may skip the
``--now`` checks of plans.grants only for a file the model itself would not call an
``--now`` approval, whatever the file holds; and it still sees every real one."""

import json
import os
import stat
from pathlib import Path

import pytest

from plans import PlanRecord, PlanStore, approval_path, maybe_now, write_approval
from plans.approval_archive import archive_used, used_dir
from plans.grants import _approval
from tests.unit.plans.helpers import NOW, plan_of, submitted


@pytest.fixture
def record(store: PlanStore) -> PlanRecord:
    return submitted(store, plan_of())


def _rewrite(path: Path, edit: object) -> None:
    """Root's file with its JSON edited (``edit`` a dict of fields, or raw bytes)."""
    if isinstance(edit, bytes):
        path.write_bytes(edit)
        return
    said = json.loads(path.read_bytes())
    assert isinstance(edit, dict)
    for key, value in edit.items():
        if value is ...:
            said.pop(key, None)
        else:
            said[key] = value
    path.write_text(json.dumps(said))


@pytest.mark.parametrize(
    ("now", "edit", "expected"),
    [
        (False, {}, False),  # `opsbot approve`
        (True, {}, True),  # `opsbot approve --now`
        (False, {"override_window": ...}, False),  # the model's default
        (True, {"override_window": "true"}, True),  # what a lax model might read as true
        (True, {"override_window": 1}, True),
        (True, {"override_window": None}, True),
        (True, b"[1, 2]", True),
        (True, b"{not json", True),
    ],
)
def test_only_a_file_the_model_calls_no_now_approval_skips_the_grant_checks(
    store: PlanStore,
    approvals_dir: Path,
    record: PlanRecord,
    now: bool,
    edit: object,
    expected: bool,
) -> None:
    """Whatever root's approval file holds, the archive's cheap look says "not --now" only
    where the model's own reading (plans.grants) finds no --now approval there; where it
    cannot tell, the model decides. A real --now approval is always seen."""
    write_approval(approvals_dir, record, "root", NOW, 600, override_window=now)
    _rewrite(approval_path(approvals_dir, record.plan_id), edit)
    said = maybe_now(approvals_dir, record.plan_id)
    assert said is expected
    model = _approval(approvals_dir, record.plan_id)
    if not said:
        assert model is None or not model.override_window
    if model is not None and model.override_window:
        assert said


def test_a_file_that_is_not_plain_takes_the_models_road(
    store: PlanStore, approvals_dir: Path, record: PlanRecord
) -> None:
    """A symlink or a FIFO at an approval's name is not read as one (no hang on a FIFO):
    the model's road refuses it; no file at all is no --now approval."""
    assert not maybe_now(approvals_dir, record.plan_id)
    elsewhere = approvals_dir.parent / "elsewhere.approval"
    write_approval(approvals_dir, record, "root", NOW, 600, override_window=True)
    os.rename(approval_path(approvals_dir, record.plan_id), elsewhere)
    os.symlink(elsewhere, approval_path(approvals_dir, record.plan_id))
    assert maybe_now(approvals_dir, record.plan_id)
    os.unlink(approval_path(approvals_dir, record.plan_id))
    os.mkfifo(approval_path(approvals_dir, record.plan_id))
    assert maybe_now(approvals_dir, record.plan_id)


def test_the_used_directory_is_closed_to_the_apply_from_the_moment_it_exists(
    store: PlanStore, approvals_dir: Path, record: PlanRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root's first archive makes ``used/``: it is 0700 from the moment it exists, not
    made open (the umask's 0755, in a directory the apply may enter) and closed after,
    so the apply never holds it open to list the approvals moved there later."""
    write_approval(approvals_dir, record, "root", NOW, 600)
    seen: list[int] = []
    lstat = os.lstat

    def watched(path: object, *args: object, **kwargs: object) -> os.stat_result:
        st = lstat(path, *args, **kwargs)  # type: ignore[arg-type]
        if Path(str(path)) == used_dir(approvals_dir):
            seen.append(stat.S_IMODE(st.st_mode))
        return st

    umask = os.umask(0o022)
    try:
        monkeypatch.setattr(os, "lstat", watched)
        assert archive_used(approvals_dir, lambda plan_id: True) == [record.plan_id]
    finally:
        monkeypatch.undo()
        os.umask(umask)
    assert seen and seen[0] == 0o700
    assert stat.S_IMODE(used_dir(approvals_dir).stat().st_mode) == 0o700
