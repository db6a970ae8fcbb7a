"""The second factor's guards, as a guesser and an operator meet them on the approver's
real socket: how many tries a link has left, an address shut after ten wrong codes or
confirmations whoever they were for, a locked approver's lock naming her, lifting after
fifteen minutes to the second and holding against the addresses that guessed, the
window of codes accepted, and the TOTP credential read only where systemd put it, only
when it is a regular file of root's alone, and whole."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyotp
import pytest

from approver_svc import totp
from approver_svc.errors import Refusal
from plans import PlanStore, approval_path
from shared_schema import PlanState
from shared_schema.approver_socket import CONFIRM_ALPHABET, Decided, Link, Refused
from tests.unit.approver.bench import SECRETS, Bench, bench


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The servers notice their stop within 50 ms, not the daemon's half second."""
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


@pytest.fixture
def b(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(tmp_path, store, approvals_dir) as running:
        yield running


def refused(reply: object, kind: str) -> Refused:
    assert isinstance(reply, Refused), reply
    assert reply.kind == kind, reply
    return reply


def wrong(b: Bench, approver: str = "alice") -> str:
    """A code that is none of ``approver``'s around now."""
    return f"{(int(b.code(approver)) + 500000) % 1000000:06d}"


def not_its(link: Link) -> str:
    """A well-formed confirmation that is not the one beside ``link``."""
    return next(c * 4 for c in CONFIRM_ALPHABET if c * 4 != link.confirm)


def credential(b: Bench, approver: str = "alice") -> Path:
    """The bench's credential ``totp_<approver>``, as systemd would have written it."""
    assert b.service.credentials is not None
    return b.service.credentials / f"totp_{approver}"


def lock_alice(b: Bench) -> tuple[dict[tuple[str, str], Link], Refused]:
    """Ten wrong codes of alice's at one instant, each from its own address
    (198.51.100.0 to .9) and spread over three of her links (none burns): her lock, and
    the refusal the tenth got. Plan A's links, which saw wrong codes, are returned."""
    a, c = b.submit(), b.submit(unit="app.service")
    links_a, links_c = b.links(a.plan_id), b.links(c.plan_id)
    spread = [links_a[("alice", "approve")]] * 4 + [links_a[("alice", "reject")]] * 3
    spread += [links_c[("alice", "reject")]] * 3
    replies = [
        b.decide(link.token, wrong(b), source=f"198.51.100.{n}") for n, link in enumerate(spread)
    ]
    assert [r.kind for r in replies if isinstance(r, Refused)] == ["code"] * 9 + ["limit"]
    return links_a, refused(replies[-1], "limit")


# -- what a guesser is told, and where its guesses count ------------------------------


def test_a_wrong_code_says_how_many_tries_the_link_has_left(b: Bench) -> None:
    """Five wrong codes burn a link: after the first, the refusal says four are left,
    after the second three."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    first = refused(b.decide(link.token, wrong(b)), "code")
    assert "wrong code for alice (4 tries left with this link)" in first.reason
    second = refused(b.decide(link.token, wrong(b)), "code")
    assert "(3 tries left with this link)" in second.reason


def test_a_wrong_confirmation_says_how_many_tries_the_link_has_left(b: Bench) -> None:
    """alice's right code with a confirmation that is not her link's: the code is spent
    and the refusal says the link has four tries left."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    reply = refused(b.decide(link.token, b.code(), confirm=not_its(link)), "confirm")
    assert "the code is spent (4 tries left with this link)" in reply.reason


def test_the_tenth_wrong_code_from_one_address_shuts_it_though_no_approver_is_locked(
    b: Bench,
) -> None:
    """Ten wrong codes from one address, five on alice's links and five on bob's (no
    approver reaches her own limit, no link burns): the tenth is refused as ``limit``
    for the address, not as a wrong code."""
    a = b.submit()
    links = b.links(a.plan_id)
    attacker = "203.0.113.66"
    tries = [(name, decision) for name in ("alice", "bob") for decision in ("approve", "reject")]
    order = [tries[0], tries[2], tries[1], tries[3]] * 3
    replies = [b.decide(links[key].token, wrong(b, key[0]), source=attacker) for key in order[:10]]
    assert [r.kind for r in replies if isinstance(r, Refused)] == ["code"] * 9 + ["limit"]
    last = replies[-1]
    assert isinstance(last, Refused) and "too many wrong codes from this address" in last.reason


def test_wrong_confirmations_count_against_the_address_they_came_from(b: Bench) -> None:
    """A relay pairing alice's fresh codes with confirmations that are not the links'
    ten times from one address (no link burns): that address is then refused, even a
    right code with the right confirmation on a link no one guessed at; from alice's
    own address the same link approves."""
    a, c = b.submit(), b.submit(unit="app.service")
    links_a, links_c = b.links(a.plan_id), b.links(c.plan_id)
    spread = [links_a[("alice", "approve")]] * 4 + [links_a[("alice", "reject")]] * 3
    spread += [links_c[("alice", "reject")]] * 3
    relay = "203.0.113.66"
    kinds = []
    for link in spread:
        reply = b.decide(link.token, b.code(), confirm=not_its(link), source=relay)
        assert isinstance(reply, Refused), reply
        kinds.append(reply.kind)
        b.clock.advance(30)
    assert kinds == ["confirm"] * 9 + ["limit"]
    untouched = links_c[("alice", "approve")]
    shut = refused(b.decide(untouched.token, b.code(), source=relay), "limit")
    assert "from this address" in shut.reason
    assert not approval_path(b.approvals_dir, c.plan_id).exists()
    assert isinstance(b.decide(untouched.token, b.code(), source="192.0.2.7"), Decided)


# -- a locked approver ----------------------------------------------------------------


def test_a_lockout_names_the_approver_it_locks(b: Bench) -> None:
    """The tenth wrong code locks alice: that refusal, and the one her link that saw
    wrong codes gets next with her right code, both say the wrong codes were alice's."""
    links_a, tenth = lock_alice(b)
    assert "too many wrong codes for alice" in tenth.reason
    later = refused(b.decide(links_a[("alice", "approve")].token, b.code()), "limit")
    assert "too many wrong codes for alice" in later.reason


def test_the_approvers_lock_lifts_fifteen_minutes_after_the_wrong_codes_to_the_second(
    b: Bench,
) -> None:
    """alice is locked by ten wrong codes: a second before they are fifteen minutes old a
    link that saw them is still refused with her right code; at fifteen minutes it
    approves."""
    links_a, _ = lock_alice(b)
    link = links_a[("alice", "approve")]
    b.clock.advance(15 * 60 - 1)
    refused(b.decide(link.token, b.code(), source="192.0.2.7"), "limit")
    b.clock.advance(1)
    assert isinstance(b.decide(link.token, b.code(), source="192.0.2.7"), Decided)


def test_a_locked_approvers_fresh_link_is_refused_from_an_address_that_guessed(
    b: Bench,
) -> None:
    """alice is locked; a link of hers no one has used yet, with her right code, is
    refused from an address that gave one of the wrong codes (within the day), and the
    same link approves from an address that gave none."""
    lock_alice(b)
    fresh = b.submit(unit="worker@1.service")
    link = b.links(fresh.plan_id)[("alice", "approve")]
    reply = refused(b.decide(link.token, b.code(), source="198.51.100.3"), "limit")
    assert "too many wrong codes for alice" in reply.reason
    assert not approval_path(b.approvals_dir, fresh.plan_id).exists()
    assert isinstance(b.decide(link.token, b.code(), source="192.0.2.7"), Decided)


def test_a_code_two_steps_ahead_is_refused_and_one_step_ahead_accepted(b: Bench) -> None:
    """Clock drift is forgiven by one 30 s step, not two: alice's code of a minute from
    now is a wrong code (not a used one), and her code of the next step approves."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    early = b.code(ahead=2)
    assert early not in {b.code(ahead=k) for k in (-1, 0, 1)}
    reply = refused(b.decide(link.token, early), "code")
    assert reply.reason.startswith("wrong code for alice")
    assert b.store.status(a.plan_id).state is PlanState.PROPOSED
    assert isinstance(b.decide(link.token, b.code(ahead=1)), Decided)


# -- the credential ---------------------------------------------------------------------


def test_the_secrets_are_read_where_systemd_put_the_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """systemd names the credentials' directory in $CREDENTIALS_DIRECTORY: the approver
    reads alice's secret from ``totp_alice`` there, and her codes are its codes."""
    where = tmp_path / "credentials"
    where.mkdir(mode=0o700)
    (where / "totp_alice").write_text(SECRETS["alice"] + "\n")
    (where / "totp_alice").chmod(0o400)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(where))
    assert totp.credentials_dir() == where
    read = totp.read_secret(totp.credentials_dir(), "alice")
    assert read.at(0) == pyotp.TOTP(SECRETS["alice"]).at(0)


@pytest.mark.parametrize("environment", [None, ""], ids=["unset", "empty"])
def test_without_a_credentials_directory_no_secret_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environment: str | None
) -> None:
    """Started without $CREDENTIALS_DIRECTORY (or with it empty), the approver has no
    credentials: a secret is refused as ``internal`` naming LoadCredential=, and no
    ``totp_alice`` of the working directory is ever read instead."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "totp_alice").write_text(SECRETS["alice"])
    (tmp_path / "totp_alice").chmod(0o400)
    if environment is None:
        monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    else:
        monkeypatch.setenv("CREDENTIALS_DIRECTORY", environment)
    assert totp.credentials_dir() is None
    with pytest.raises(Refusal) as refusal:
        totp.read_secret(totp.credentials_dir(), "alice")
    assert refusal.value.kind == "internal"
    assert "$CREDENTIALS_DIRECTORY" in refusal.value.message


def test_a_credential_symlinked_to_a_well_formed_secret_is_refused(
    b: Bench, tmp_path: Path
) -> None:
    """``totp_alice`` is a symlink to a file that looks exactly like a credential (root's,
    0400, alice's real secret): systemd's copies are never links, so it is refused as
    ``internal`` and nothing is approved with it."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    planted = tmp_path / "planted"
    planted.write_text(SECRETS["alice"] + "\n")
    planted.chmod(0o400)
    credential(b).unlink()
    credential(b).symlink_to(planted)
    reply = refused(b.decide(link.token, b.code()), "internal")
    assert "cannot be opened as the credential" in reply.reason
    assert not approval_path(b.approvals_dir, a.plan_id).exists()


def test_a_credential_that_is_a_fifo_is_refused_at_once(b: Bench) -> None:
    """``totp_alice`` is a named pipe of root's, 0600, that no one writes: the approver
    neither waits for a writer nor reads an empty secret from it; the click is refused
    at once as ``internal`` (not a credential), and once the real credential is back
    the same code approves."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    path = credential(b)
    path.unlink()
    os.mkfifo(path, 0o600)
    answered, released = threading.Event(), threading.Event()

    def release_a_blocked_reader() -> None:
        """Were the approver stuck opening the pipe, let it go (and say so)."""
        if answered.wait(5):
            return
        released.set()
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as exc:
            assert exc.errno == errno.ENXIO

    watchdog = threading.Thread(target=release_a_blocked_reader)
    watchdog.start()
    try:
        reply = b.decide(link.token, b.code())
    finally:
        answered.set()
        watchdog.join()
    assert not released.is_set(), "the approver waited for a writer of the pipe"
    assert "is not a credential only uid 0 can read" in refused(reply, "internal").reason
    path.unlink()
    path.write_text(SECRETS["alice"] + "\n")
    path.chmod(0o400)
    assert isinstance(b.decide(link.token, b.code()), Decided)


def test_a_credential_of_another_uid_is_refused_though_only_it_may_read_it(b: Bench) -> None:
    """``totp_alice`` holds alice's real secret, mode 0400, but belongs to nobody (uid
    65534), not the approver's uid: systemd did not write it, so it is refused as
    ``internal`` and nothing is approved."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    os.chown(credential(b), 65534, 65534)
    reply = refused(b.decide(link.token, b.code()), "internal")
    assert "of uid 65534" in reply.reason
    assert not approval_path(b.approvals_dir, a.plan_id).exists()


def test_a_credential_longer_than_the_limit_approves_nothing(b: Bench) -> None:
    """A ``totp_alice`` of 2048 base32 characters (past MAX_SECRET_BYTES): the approver
    does not take it, nor any part of it, as alice's secret: the click is ``internal``,
    no code is checked and nothing is approved."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    before = b.state_bytes()
    path = credential(b)
    path.chmod(0o600)
    path.write_text(pyotp.random_base32(2 * totp.MAX_SECRET_BYTES))
    path.chmod(0o400)
    refused(b.decide(link.token, b.code()), "internal")
    assert b.state_bytes() == before
    assert not approval_path(b.approvals_dir, a.plan_id).exists()


def test_a_huge_credential_is_refused_having_read_no_more_than_the_limit(
    b: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``totp_alice`` of 1 GiB (sparse): refused for its length having read at most
    MAX_SECRET_BYTES + 1 bytes of it, never the whole file into the approver's memory."""
    path = credential(b)
    path.chmod(0o600)
    with open(path, "wb") as handle:
        handle.truncate(1 << 30)
    path.chmod(0o400)
    asked: list[int | None] = []
    real_fdopen = os.fdopen

    class Counted:
        def __init__(self, handle: Any) -> None:
            self.handle = handle

        def __enter__(self) -> Counted:
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

        def fileno(self) -> int:
            return int(self.handle.fileno())

        def read(self, size: int | None = -1) -> bytes:
            asked.append(size)
            return bytes(self.handle.read(size))

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: Counted(real_fdopen(fd, *a, **k)))
    with pytest.raises(Refusal, match=f"longer than {totp.MAX_SECRET_BYTES} bytes"):
        totp.read_secret(path.parent, "alice")
    assert asked == [totp.MAX_SECRET_BYTES + 1]


def test_a_secret_as_long_as_the_limit_works(b: Bench) -> None:
    """root enrolled alice with a secret of exactly MAX_SECRET_BYTES base32 characters:
    the whole of it is her secret, and her code approves."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    secret = pyotp.random_base32(totp.MAX_SECRET_BYTES)
    path = credential(b)
    path.chmod(0o600)
    path.write_text(secret)
    path.chmod(0o400)
    reply = b.decide(link.token, pyotp.TOTP(secret).at(b.clock()))
    assert isinstance(reply, Decided), reply
    assert approval_path(b.approvals_dir, a.plan_id).exists()


def test_a_credential_longer_than_the_limit_is_said_to_be(b: Bench) -> None:
    """A ``totp_alice`` of MAX_SECRET_BYTES base32 characters, a newline and more: no part
    of it is taken for alice's secret, and the journal's refusal says why (too long),
    with what root must do."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    path = credential(b)
    path.chmod(0o600)
    path.write_text(pyotp.random_base32(totp.MAX_SECRET_BYTES) + "\nAAAA\n")
    path.chmod(0o400)
    with pytest.raises(Refusal, match="longer than 1024 bytes") as refused_:
        totp.read_secret(path.parent, "alice")
    assert "opsbot approvers add alice" in str(refused_.value.hint)
    refused(b.decide(link.token, b.code()), "internal")
    assert not approval_path(b.approvals_dir, a.plan_id).exists()


@pytest.mark.parametrize("secret", ["not-base32!", "", "AAAA"], ids=["symbols", "empty", "short"])
def test_a_secret_that_is_no_base32_secret_is_refused_with_what_root_must_do(
    b: Bench, secret: str
) -> None:
    """A credential that pyotp refuses (not base32, empty, too short): the refusal says
    the secret is not base32 and that root enrols the approver again; no traceback."""
    path = credential(b)
    path.chmod(0o600)
    path.write_text(secret + "\n")
    path.chmod(0o400)
    with pytest.raises(Refusal, match="alice's TOTP secret is not base32") as refused_:
        totp.read_secret(path.parent, "alice")
    assert refused_.value.kind == "internal"
    assert "opsbot approvers add alice" in str(refused_.value.hint)


def test_a_secret_that_is_not_ascii_is_refused_as_not_base32(b: Bench) -> None:
    """A credential with bytes that are not ASCII (a secret pasted through the wrong
    tool): refused as not base32, with what root must do; never a traceback."""
    path = credential(b)
    path.chmod(0o600)
    path.write_bytes("JBSWY3DPEHPK3PXPÄÖ\n".encode())
    path.chmod(0o400)
    with pytest.raises(Refusal, match="alice's TOTP secret is not base32"):
        totp.read_secret(path.parent, "alice")
