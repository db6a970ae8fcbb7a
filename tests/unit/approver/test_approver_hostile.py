"""The approver under attacks its first tests did not try: a client that sends half a
line and waits (it must not hold the approver for everyone else), JSON nested deep
enough to crash a parser, a TOTP credential that is a symlink or that others can read,
a reject link used with a code already spent, a plan root approved, rejected or let
expire between the page's view and the click, a second announce, and a daemon killed
while it writes its state (a used link stays used after the restart)."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import plans
from approver_svc import tokens
from approver_svc.service import ApproverService
from approver_svc.state import ApproverState, StateFile
from plans import PlanStore, approval_path
from shared_io.framing import exchange
from shared_schema import PlanState
from shared_schema.approver_socket import (
    Decide,
    Decided,
    Refused,
    Viewed,
    parse_approver_reply,
)
from tests.unit.approver.bench import Bench, bench
from tests.unit.plans.helpers import NOW


@pytest.fixture(autouse=True)
def _quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shared_io.server.ACCEPT_POLL", 0.05)


@pytest.fixture
def b(tmp_path: Path, store: PlanStore, approvals_dir: Path) -> Iterator[Bench]:
    with bench(tmp_path, store, approvals_dir) as running:
        yield running


def refused(reply: object, kind: str) -> Refused:
    assert isinstance(reply, Refused), reply
    assert reply.kind == kind, reply
    return reply


def approval_of(b: Bench, plan_id: str) -> dict[str, object] | None:
    path = approval_path(b.approvals_dir, plan_id)
    return json.loads(path.read_text()) if path.exists() else None


def test_a_client_that_sends_half_a_line_does_not_hold_up_a_real_click(b: Bench) -> None:
    """A subverted page opens connections, sends half a request each and then nothing
    (and one that never reads its reply): the real approval on another connection is
    answered at once, not after their 5 s deadline, because the approver takes its lock
    only for a whole request."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    stalled = []
    for _ in range(4):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(str(b.web_socket))
        conn.sendall(b'{"v":1,"op":"decide","token":"')
        stalled.append(conn)
    try:
        started = time.monotonic()
        reply = b.decide(link.token, b.code())
        took = time.monotonic() - started
    finally:
        for conn in stalled:
            conn.close()
    assert isinstance(reply, Decided), reply
    assert took < 4.0, f"the click waited {took:.1f}s behind silent clients"


def test_json_nested_past_any_parser_depth_is_one_request_refusal(b: Bench) -> None:
    """A line of 8000 nested brackets (within the size cap): a ``request`` refusal on
    that connection, no crash, and the approver still answers the next request."""
    for opening, closing in ((b"[", b"]"), (b'{"a":', b"}")):
        depth = 8000 // len(opening)
        line = b'{"v":1,"op":"view","token":' + opening * depth + b"1" + closing * depth
        reply = parse_approver_reply(exchange(b.web_socket, line + b"}\n", limit=65536, timeout=10))
        refused(reply, "request")
    a = b.submit()
    assert isinstance(b.view(b.links(a.plan_id)[("alice", "approve")].token), Viewed)


def test_a_totp_credential_that_is_a_symlink_or_readable_by_others_is_refused(
    b: Bench, tmp_path: Path
) -> None:
    """systemd hands the daemon its own copies of the secrets, root's and 0400. A
    credential that is a symlink (to a file anyone may have written) or that group or
    others can read is not one of them: ``internal``, and the code is not checked with
    it, so nothing is approved."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    credential = tmp_path / "credentials" / "totp_alice"
    secret = credential.read_text()
    planted = tmp_path / "planted"
    planted.write_text(secret)
    credential.unlink()
    credential.symlink_to(planted)
    refused(b.decide(link.token, b.code()), "internal")
    credential.unlink()
    credential.write_text(secret)
    credential.chmod(0o640)
    reply = refused(b.decide(link.token, b.code()), "internal")
    assert "totp_alice" in reply.reason
    assert approval_of(b, a.plan_id) is None
    credential.chmod(0o400)
    assert isinstance(b.decide(link.token, b.code()), Decided)


def test_a_reject_link_with_a_code_spent_already_rejects_nothing(b: Bench) -> None:
    """alice's code approved plan A; the same code on her reject link for plan C is
    refused as used (a code works once, for either decision) and C still waits."""
    a, c = b.submit(), b.submit(unit="app.service")
    approve_a = b.links(a.plan_id)[("alice", "approve")]
    reject_c = b.links(c.plan_id)[("alice", "reject")]
    code = b.code()
    assert isinstance(b.decide(approve_a.token, code), Decided)
    assert "used already" in refused(b.decide(reject_c.token, code), "code").reason
    assert b.store.status(c.plan_id).state is PlanState.PROPOSED


def root_approves(b: Bench, plan_id: str, *, now: bool = False) -> None:
    record = b.store.load(plan_id)
    plans.approve(
        b.store,
        b.approvals_dir,
        plan_id,
        sha256_prefix=record.sha256[:12],
        accepted=b.witness(plan_id),
        approver="root",
        now=b.clock(),
        ttl_seconds=600,
        override_window=now,
    )


def test_a_plan_root_approved_meanwhile_is_not_approved_again_from_the_page(b: Bench) -> None:
    """alice opened her link; before she clicks, root approves the plan on the host for
    10 minutes. Her click must not rewrite root's approval (its approver, its expiry):
    ``plan``, the approval file still root's, and her link's sibling (reject) still
    works, since stopping an approved plan is always allowed."""
    a = b.submit()
    links = b.links(a.plan_id)
    root_approves(b, a.plan_id)
    before = approval_path(b.approvals_dir, a.plan_id).read_bytes()
    reply = refused(b.decide(links[("alice", "approve")].token, b.code()), "plan")
    assert "approved already" in reply.reason
    assert approval_path(b.approvals_dir, a.plan_id).read_bytes() == before
    assert b.applies_started == []
    b.clock.advance(30)
    assert isinstance(b.decide(links[("bob", "reject")].token, b.code("bob")), Decided)
    assert b.store.status(a.plan_id).state is PlanState.REJECTED
    assert approval_of(b, a.plan_id) is None


def test_a_plan_root_rejected_meanwhile_is_not_approved(b: Bench) -> None:
    """Root rejects the plan between alice's view and her click: ``plan``, no approval
    file, the plan stays REJECTED."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    assert isinstance(b.view(link.token), Viewed)
    plans.reject(b.store, b.approvals_dir, a.plan_id, by="root", now=b.clock(), reason="no")
    reply = refused(b.decide(link.token, b.code()), "plan")
    assert "rejected" in reply.reason.lower()
    assert approval_of(b, a.plan_id) is None
    assert b.store.status(a.plan_id).state is PlanState.REJECTED


def test_a_plan_that_expired_while_its_link_lives_is_not_approved(
    tmp_path: Path, store: PlanStore, approvals_dir: Path
) -> None:
    """The link was minted while the plan had a day to live; root then shortens
    plan_ttl_seconds to 10 minutes and the approver starts again with it. Twenty
    minutes later the link itself has not expired (an hour), but its plan has: ``plan``
    or ``token``, and no approval."""
    with bench(tmp_path, store, approvals_dir) as b:
        a = b.submit()
        link = b.links(a.plan_id)[("alice", "approve")]
        policy = b.service.config.executor.model_copy(update={"plan_ttl_seconds": 600})
        b.service.config = b.service.config.model_copy(update={"executor": policy})
        b.clock.advance(20 * 60)
        reply = b.decide(link.token, b.code())
        assert isinstance(reply, Refused) and reply.kind in ("plan", "token"), reply
        assert approval_of(b, a.plan_id) is None


def test_a_second_announce_mints_nothing_for_plans_announced(b: Bench) -> None:
    """notify asks twice (a retry after a timeout, or a subverted notify minting links
    for itself): the second answer has no notice for the plan, and the state holds the
    same tokens as after the first."""
    a = b.submit()
    first = b.announce()
    assert [n.plan.plan_id for n in first.notices] == [a.plan_id]
    tokens_before = set(json.loads(b.state_bytes())["tokens"])
    assert b.announce().notices == []
    assert set(json.loads(b.state_bytes())["tokens"]) == tokens_before


class Killed(BaseException):
    """The daemon dies (SIGKILL, power loss) in the middle of a write: no handler runs."""


def test_a_daemon_killed_while_writing_its_state_keeps_a_used_link_used(
    b: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice's link approved plan A. Then the daemon is killed halfway through writing
    its state for another click (the new bytes half on disk, never renamed): the
    approver that starts next reads the whole old state, so alice's link is still used
    up, and the state directory is still usable."""
    a = b.submit()
    c = b.submit(unit="app.service")
    links_a, links_c = b.links(a.plan_id), b.links(c.plan_id)
    assert isinstance(b.decide(links_a[("alice", "approve")].token, b.code()), Decided)
    saved = b.state_bytes()
    real_write = os.write

    def dies_halfway(fd: int, data: memoryview | bytes) -> int:
        real_write(fd, bytes(data[: len(data) // 2]))
        raise Killed

    monkeypatch.setattr("shared_io.files.os.write", dies_halfway)
    b.clock.advance(30)
    with pytest.raises(Killed):
        b.service.decide(
            Decide(
                token=links_c[("bob", "approve")].token,
                code=b.code("bob"),
                confirm=links_c[("bob", "approve")].confirm,
            )
        )
    monkeypatch.undo()
    assert b.state_bytes() == saved
    restarted = ApproverService(
        config=b.service.config,
        store=b.store,
        approvals_dir=b.approvals_dir,
        state=StateFile(b.state_dir),
        credentials=b.service.credentials,
        start_apply=b.service.start_apply,
        window_apply=b.service.window_apply,
        now=b.clock,
        witness=b.witness,
        apply_busy=lambda: False,
        read_state=b.service.read_state,
        host="testhost",
        analyze=b.service.analyze,
    )
    b.service.__dict__.update(restarted.__dict__)  # the sockets now reach the new one
    b.clock.advance(30)
    again = refused(b.decide(links_a[("alice", "approve")].token, b.code()), "token")
    assert "used already" in again.reason
    assert isinstance(b.decide(links_c[("bob", "approve")].token, b.code("bob")), Decided)
    assert b.store.status(c.plan_id).state is PlanState.APPROVED


def test_a_decide_after_the_plan_expired_leaves_no_link_alive(b: Bench) -> None:
    """The token never outlives its plan: minted a minute before the plan's expiry, it
    expires with the plan, not an hour later."""
    b.clock.advance(0)
    record = b.submit()
    b.clock.advance(86400 - 60)
    link = b.links(record.plan_id)[("alice", "approve")]
    assert link.expires_at == record.submitted_at + timedelta(seconds=86400)
    b.clock.advance(60)
    refused(b.decide(link.token, b.code()), "token")
    assert approval_of(b, record.plan_id) is None


def test_a_symlinked_state_file_or_directory_is_refused_and_left_alone(
    b: Bench, tmp_path: Path
) -> None:
    """Someone points the approver's state at a file of theirs (state.json a symlink, or
    the state directory one): every request is ``internal``, the file pointed to is not
    read as tokens nor written, and once the real state is back the link works."""
    a = b.submit()
    link = b.links(a.plan_id)[("alice", "approve")]
    state = b.state_dir / "state.json"
    real = state.read_bytes()
    planted = tmp_path / "planted.json"
    planted.write_bytes(real)
    state.unlink()
    state.symlink_to(planted)
    refused(b.view(link.token), "internal")
    refused(b.decide(link.token, b.code()), "internal")
    assert planted.read_bytes() == real
    state.unlink()
    state.write_bytes(real)
    moved = tmp_path / "moved-state"
    b.state_dir.rename(moved)
    b.state_dir.symlink_to(moved)
    refused(b.decide(link.token, b.code()), "internal")
    b.state_dir.unlink()
    moved.rename(b.state_dir)
    assert approval_of(b, a.plan_id) is None
    assert isinstance(b.decide(link.token, b.code()), Decided)


def test_an_approver_name_cannot_walk_out_of_the_credentials(tmp_path: Path) -> None:
    """``[approvers."../x"]`` is not a config, a state whose token names such an approver
    is not a state, and the credential lookup itself refuses such a name: no path outside
    $CREDENTIALS_DIRECTORY is ever opened as a secret."""
    from pydantic import ValidationError

    from approver_svc import totp
    from approver_svc.errors import Refusal
    from approver_svc.state import ApproverState
    from shared_schema import OpsbotConfig

    for name in ("../root", "a/../../b", ".", "alice/..", "Alice"):
        with pytest.raises(ValidationError):
            OpsbotConfig.model_validate({"approvers": {name: {}}})
    token = {
        "plan_id": "20261129-213500-3f1e46b0",
        "sha256": "a" * 64,
        "approver": "../x",
        "decision": "approve",
        "expires_at": "2026-11-29T22:35:00Z",
    }
    with pytest.raises(ValidationError):
        ApproverState.model_validate({"tokens": {"b" * 64: token}})
    credentials = tmp_path / "credentials"
    (credentials / "totp_a").mkdir(parents=True)
    outside = tmp_path / "totp_x"  # credentials/totp_a/../../totp_x
    outside.write_text("JBSWY3DPEHPK3PXP")
    outside.chmod(0o400)
    with pytest.raises(Refusal) as refusal:
        totp.read_secret(credentials, "a/../../totp_x")
    assert refusal.value.kind == "internal" and "not an approver name" in refusal.value.message


def test_an_unknown_token_reads_neither_the_store_nor_a_secret(
    b: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token is checked before any other work: for one the approver never made, no
    plan is read and no credential opened (so the time it takes says nothing about
    plans or approvers), and the reply is the one every unknown token gets."""
    import secrets as random

    from approver_svc import tokens, totp

    a = b.submit()
    b.links(a.plan_id)
    touched: list[str] = []
    monkeypatch.setattr(b.store, "load", lambda *args: touched.append("store") or None)
    real_read = totp.read_secret
    monkeypatch.setattr(
        "approver_svc.totp.read_secret",
        lambda *args: touched.append("secret") or real_read(*args),
    )
    forged = random.token_urlsafe(16)
    assert refused(b.view(forged), "token").reason.startswith(tokens.UNKNOWN)
    assert refused(b.decide(forged, b.code()), "token").reason.startswith(tokens.UNKNOWN)
    assert touched == []


def test_an_approver_removed_from_the_config_cannot_use_a_link_sent_before(b: Bench) -> None:
    """alice leaves the team; root deletes ``[approvers.alice]`` (her secret may still be
    on disk). A link she was sent before, with her right code: ``token``, nothing
    approved; bob's link for the same plan still works."""
    a = b.submit()
    links = b.links(a.plan_id)
    b.service.config = b.service.config.model_copy(
        update={"approvers": {"bob": b.service.config.approvers["bob"]}}
    )
    reply = refused(b.decide(links[("alice", "approve")].token, b.code()), "token")
    assert "no longer an approver" in reply.reason
    assert approval_of(b, a.plan_id) is None
    assert isinstance(b.decide(links[("bob", "approve")].token, b.code("bob")), Decided)


def test_a_flood_of_plans_mints_a_bounded_set_of_links_and_alices_still_works(
    tmp_path: Path, store: PlanStore, approvals_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """alice's link is sent; then the diagnose user floods (here 60 plans against a
    bound of 40 live links): announces mint links for the newest plans only until the
    bound, say why in the journal, the state file stays small, and alice's link still
    approves her plan."""
    monkeypatch.setattr("approver_svc.service.MAX_LIVE_TOKENS", 40)
    with bench(tmp_path, store, approvals_dir) as b:
        mine = b.submit()
        link = b.links(mine.plan_id)[("alice", "approve")]
        for number in range(60):
            b.submit(unit=f"flood{number}.service")
        with capture_logs() as logs:
            minted = sum(len(b.announce().notices) for _ in range(4))
        assert minted == 9  # 4 links a plan: 4 + 9 * 4 = 40
        assert any(e["event"] == "announce.backlog" for e in logs)
        assert len(b.state_bytes()) < 64 * 1024
        assert isinstance(b.decide(link.token, b.code()), Decided)


def test_the_state_sheds_links_rather_than_pass_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """However many tokens it holds, the state written is under MAX_STATE_BYTES (used
    links and the soonest to expire are forgotten first, logged), so the next load
    always reads it: the approver never answers 503 for its own state's size."""
    monkeypatch.setattr("approver_svc.state.MAX_STATE_BYTES", 20_000)
    directory = tmp_path / "state"
    directory.mkdir(mode=0o700)
    state_file = StateFile(directory)
    state = ApproverState()
    keep = ""
    for number in range(200):
        token, _ = tokens.mint(
            state,
            plan_id="20261129-213500-d4b85b2d",
            sha256="0" * 64,
            approver="alice",
            decision="approve",
            expires_at=NOW + timedelta(minutes=number + 1),
        )
        keep = token
    with capture_logs() as logs:
        state_file.save(state)
    assert (directory / "state.json").stat().st_size <= 20_000
    loaded = state_file.load()
    assert tokens.digest(keep) in loaded.tokens  # the last to expire is kept
    assert any(e["event"] == "state.shed" for e in logs)
