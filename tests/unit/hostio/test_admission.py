"""Who may hold one more connection (shared_io.admission): a cap per user, a reserve the
other users cannot take, and a total; decided from the uid alone."""

from __future__ import annotations

import pytest

from shared_io.admission import Admission, Admitted, Refusal

OLIVIA, OSCAR, DIAGNOSE, ROOT = 1001, 1002, 990, 0


def executor_like(per_uid: int = 16) -> Admission:
    """The executor's numbers: 128 in all, 32 kept for the diagnose user and root."""
    return Admission(
        total=128, per_uid=per_uid, reserved=32, privileged=lambda uid: uid in (DIAGNOSE, ROOT)
    )


def fill(admission: Admission, uid: int, count: int) -> list[Admitted]:
    held = []
    for _ in range(count):
        admitted = admission.admit(uid)
        assert isinstance(admitted, Admitted), admitted
        held.append(admitted)
    return held


def test_one_operator_gets_its_cap_and_not_one_more() -> None:
    """An operator opening 140 connections holds 16; the 17th and every one after are
    refused by the per-user limit, which names the number; another operator still gets
    in."""
    admission = executor_like()
    fill(admission, OLIVIA, 16)
    refusals = [admission.admit(OLIVIA) for _ in range(124)]
    assert set(refusals) == {Refusal("per_uid", OLIVIA, 16)}
    assert admission.held(OLIVIA) == 16
    assert isinstance(admission.admit(OSCAR), Admitted)


def test_operators_together_cannot_take_the_reserve() -> None:
    """Six operators at their cap hold the 96 shared connections; a seventh is refused
    ("shared", 96), while the diagnose user still gets all 32 reserved ones, and root
    shares them."""
    admission = executor_like()
    for uid in range(2000, 2006):
        fill(admission, uid, 16)
    assert admission.admit(2006) == Refusal("shared", 2006, 96)
    fill(admission, DIAGNOSE, 31)
    assert isinstance(admission.admit(ROOT), Admitted)
    assert admission.admit(DIAGNOSE) == Refusal("total", DIAGNOSE, 128)
    assert admission.active == 128


def test_privileged_uids_have_no_cap_of_their_own_but_the_total() -> None:
    """The diagnose user may hold more than an operator's 16 (all 128 if nobody else
    connects); the 129th connection is refused by the total."""
    admission = executor_like()
    fill(admission, DIAGNOSE, 128)
    assert admission.admit(DIAGNOSE) == Refusal("total", DIAGNOSE, 128)
    assert admission.admit(OLIVIA) == Refusal("total", OLIVIA, 128)


def test_a_connection_that_ends_gives_its_room_back() -> None:
    """Releasing a connection lets its user open another; the shared room is given back
    with it, and counts never go below zero."""
    admission = Admission(total=4, per_uid=2, reserved=1)
    first, _second = fill(admission, OLIVIA, 2)
    assert admission.admit(OLIVIA) == Refusal("per_uid", OLIVIA, 2)
    fill(admission, OSCAR, 1)
    assert admission.admit(OSCAR) == Refusal("shared", OSCAR, 3)
    admission.release(first)
    assert isinstance(admission.admit(OSCAR), Admitted)
    assert admission.held(OLIVIA) == 1 and admission.held(OSCAR) == 2
    with pytest.raises(RuntimeError, match="does not hold"):
        admission.release(Admitted(4242, False))


def test_privilege_is_decided_once_per_connection() -> None:
    """A connection admitted as privileged is released as such, even if the uid's
    standing changed meanwhile (a user renamed): the shared count stays right."""
    privileged = {DIAGNOSE}
    admission = Admission(total=3, per_uid=1, reserved=1, privileged=lambda u: u in privileged)
    held = fill(admission, DIAGNOSE, 2)
    privileged.clear()
    for admitted in held:
        admission.release(admitted)
    fill(admission, OLIVIA, 1)
    fill(admission, OSCAR, 1)
    assert admission.admit(1003) == Refusal("shared", 1003, 2)


def test_a_reserve_must_leave_room_for_the_others() -> None:
    """A reserve as large as the total is a configuration error, said at once."""
    with pytest.raises(ValueError, match="less than 4"):
        Admission(total=4, per_uid=1, reserved=4)
