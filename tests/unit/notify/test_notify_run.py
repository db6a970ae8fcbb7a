"""``opsbot-notify`` as its unit runs it: the config from $OPSBOT_CONFIG, the approver
at $OPSBOT_APPROVER_SOCKET, the secrets in $CREDENTIALS_DIRECTORY. It exits 0 when every
message went out, 1 when one did not or the approver cannot be asked, 78 for a bad
config; one line on stderr, never a traceback. It asks the approver again for plans
stored while it was sending, and stops when there are none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from notify_svc.main import main
from notify_svc.run import MAX_ROUNDS, notify
from tests.unit.notify.test_notify_support import (
    PLAN_ID,
    Sleeps,
    always,
    approver,
    config,
    credentials,
    notice,
    plan_view,
    receiver,
    signed_by,
)

KEY = b"the-webhook-key"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The unit's environment: the approver socket, the credentials, no journal; and
    structlog as it was before main() configured it."""
    monkeypatch.setenv("OPSBOT_APPROVER_SOCKET", str(tmp_path / "approver.sock"))
    monkeypatch.setenv("OPSBOT_CONFIG", str(tmp_path / "opsbot.toml"))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path / "creds"))
    credentials(tmp_path / "creds", {"ops-hook": KEY, "broken": KEY})
    yield tmp_path
    structlog.reset_defaults()


def write_config(tmp_path: Path, hook_url: str, broken_url: str | None = None) -> None:
    channels = f'[notify.channels.ops-hook]\nkind = "webhook"\nurl = "{hook_url}"\n'
    names = '"ops-hook"'
    if broken_url:
        channels += f'[notify.channels.broken]\nkind = "webhook"\nurl = "{broken_url}"\n'
        names += ', "broken"'
    (tmp_path / "opsbot.toml").write_text(
        "[notify]\n"
        'link_base = "https://ops.example.com/opsbot"\n'
        "attempts = 1\n"
        f"{channels}"
        f"[approvers.alice]\nnotify = [{names}]\n"
    )


def test_every_message_sent_exits_0(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two plans, each told to alice on the signed webhook: exit 0, nothing on stderr;
    the approver was asked with exactly the announce request, then again (empty)."""
    with receiver(signed_by(KEY)) as hook:
        write_config(env, hook.url())
        plans = [notice(), notice(plan_view("20261201-183501-2b3c4d5e"))]
        with approver(env / "approver.sock", [plans]) as fake:
            assert main([]) == 0
    assert hook.statuses == [204, 204]
    assert [json.loads(r.body)["plan_id"] for r in hook.requests] == [
        PLAN_ID,
        "20261201-183501-2b3c4d5e",
    ]
    assert [json.loads(r) for r in fake.requests] == [{"op": "announce", "v": 1}] * 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_failed_channel_exits_1_and_the_others_still_go(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One channel answers 500: exit 1, one stderr line pointing at the journal, the
    other channel still got its message."""
    with receiver(signed_by(KEY)) as hook, receiver(always(500)) as broken:
        write_config(env, hook.url(), broken.url())
        with approver(env / "approver.sock", [[notice()]]):
            assert main([]) == 1
    assert hook.statuses == [204] and broken.statuses == [500]
    err = capsys.readouterr().err
    assert "opsbot-notify: 1 of 2 messages did not go out (journalctl -u opsbot-notify" in err
    assert "Traceback" not in err


def test_nothing_to_announce_exits_0(env: Path) -> None:
    """No new plan (a timer run, or a plan already announced): exit 0, nothing sent."""
    with receiver() as hook:
        write_config(env, hook.url())
        with approver(env / "approver.sock", []) as fake:
            assert main([]) == 0
    assert hook.requests == [] and len(fake.requests) == 1


def test_a_bad_config_exits_78_with_one_line(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown channel kind: exit 78 (EX_CONFIG, not worth restarting), the file, the
    line and the key named on stderr, no traceback; the approver is not asked (no tokens
    made)."""
    (env / "opsbot.toml").write_text('[notify.channels.x]\nkind = "pager"\n')
    with approver(env / "approver.sock", [[notice()]]) as fake:
        assert main([]) == 78
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(
        f"opsbot-notify: {env / 'opsbot.toml'}:1: notify.channels.x"
    )
    assert "Traceback" not in err
    assert fake.requests == []


def test_without_approvers_the_approver_is_not_asked(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A host where no one approves from afar (no [approvers.NAME]): each plan stored and
    each verdict starts opsbot-notify, which ends at once, exit 0, without starting root's
    approver (its socket is not even there)."""
    (env / "opsbot.toml").write_text("")
    assert main([]) == 0
    err = capsys.readouterr().err
    assert "notify.no_approvers" in err and "cannot ask the approver" not in err
    assert not (env / "approver.sock").exists()


def test_an_approver_that_is_not_there_exits_1(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No approver socket: exit 1 and a line naming the socket."""
    (env / "opsbot.toml").write_text("[approvers.alice]\n")
    assert main([]) == 1
    err = capsys.readouterr().err
    assert f"cannot ask the approver: {env / 'approver.sock'}: does not exist" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "reply",
    [
        b'{"v":1,"op":"refused","kind":"request","reason":"announce is for opsbot-notify"}\n',
        b'{"v":1,"op":"announced","notices":"nope"}\n',
        b'{"v":1,"op":"viewed"}\n',
        b"not json\n",
    ],
)
def test_a_refusal_or_a_broken_reply_exits_1(
    env: Path, reply: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    """The approver refuses (notify runs as the wrong user) or answers something that
    is no Announced: exit 1, one line, no traceback."""
    (env / "opsbot.toml").write_text("[approvers.alice]\n")
    with approver(env / "approver.sock", [reply]):
        assert main([]) == 1
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("opsbot-notify: cannot ask the approver: ")
    assert "Traceback" not in err


def test_plans_stored_while_sending_are_announced_in_the_same_run(tmp_path: Path) -> None:
    """The approver has one plan, then (asked again) another, then none: both are sent
    in one run, and the approver is asked three times."""
    with receiver() as hook:
        cfg = config(
            notify={"channels": {"ops-hook": {"kind": "webhook", "url": hook.url()}}},
            approvers={"alice": {"notify": ["ops-hook"]}},
        )
        second = notice(plan_view("20261201-183501-2b3c4d5e"))
        with approver(tmp_path / "a.sock", [[notice()], [second]]) as fake:
            creds = credentials(tmp_path / "c", {"ops-hook": KEY})
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    assert (summary.plans, summary.sent) == (2, 2)
    assert len(fake.requests) == 3


def test_the_rounds_are_bounded(tmp_path: Path) -> None:
    """An approver that always has a new plan cannot keep the run going: it is asked
    MAX_ROUNDS times."""
    with receiver() as hook:
        cfg = config(
            notify={"channels": {"ops-hook": {"kind": "webhook", "url": hook.url()}}},
            approvers={"alice": {"notify": ["ops-hook"]}},
        )
        replies: list[list[object] | bytes] = [[notice()] for _ in range(MAX_ROUNDS + 3)]
        with approver(tmp_path / "a.sock", replies) as fake:  # type: ignore[arg-type]
            creds = credentials(tmp_path / "c", {"ops-hook": KEY})
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    assert len(fake.requests) == MAX_ROUNDS and summary.sent == MAX_ROUNDS


def test_an_approver_without_channels_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    """bob has links but no channel in the config (he approves on the host): a warning
    naming him; alice's message goes out and the run is ok."""
    with receiver() as hook, capture_logs() as logs:
        cfg = config(
            notify={"channels": {"ops-hook": {"kind": "webhook", "url": hook.url()}}},
            approvers={"alice": {"notify": ["ops-hook"]}, "bob": {}},
        )
        with approver(tmp_path / "a.sock", [[notice(approvers=("alice", "bob"))]]) as fake:
            creds = credentials(tmp_path / "c", {"ops-hook": KEY})
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    assert summary.ok and summary.sent == 1 and len(hook.requests) == 1
    warnings = [e for e in logs if e["event"] == "notify.no_channels"]
    assert [(e["approver"], e["plan_id"]) for e in warnings] == [("bob", PLAN_ID)]


def test_one_channel_shared_by_two_approvers_carries_each_their_own_message(
    tmp_path: Path,
) -> None:
    """alice and bob both on the team webhook: two messages, each with its approver's
    own links."""
    with receiver() as hook:
        cfg = config(
            notify={
                "link_base": "https://ops.example.com",
                "channels": {"team": {"kind": "webhook", "url": hook.url()}},
            },
            approvers={"alice": {"notify": ["team"]}, "bob": {"notify": ["team"]}},
        )
        n = notice(approvers=("alice", "bob"))
        with approver(tmp_path / "a.sock", [[n]]) as fake:
            creds = credentials(tmp_path / "c", {"team": KEY})
            notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    bodies = [json.loads(r.body) for r in hook.requests]
    assert [b["approver"] for b in bodies] == ["alice", "bob"]
    assert bodies[0]["approve_url"] != bodies[1]["approve_url"]


def test_the_public_names_are_exported() -> None:
    """What receivers and the other units import from notify_svc is there."""
    import notify_svc

    for name in notify_svc.__all__:
        assert getattr(notify_svc, name) is not None
    assert {"verify_signature", "sign", "notify", "render"} <= set(notify_svc.__all__)


def test_a_burst_of_plans_is_one_digest_per_approver_not_a_message_each(tmp_path: Path) -> None:
    """Twenty plans in one announce (a diagnosis gone wrong, or approvers just set up):
    alice gets one digest on her channel, listing every plan with its links and their
    confirmations, not twenty messages; three plans still go one message each."""
    burst = [notice(plan_view(f"20261201-1835{n:02d}-2b3c4d5e")) for n in range(20)]
    few = [notice(plan_view(f"20261201-1840{n:02d}-2b3c4d5e")) for n in range(3)]
    with receiver() as hook:
        cfg = config(
            notify={
                "link_base": "https://ops.example.com/opsbot",
                "channels": {"ops-hook": {"kind": "webhook", "url": hook.url()}},
            },
            approvers={"alice": {"notify": ["ops-hook"]}},
        )
        with approver(tmp_path / "a.sock", [burst, few]) as fake:  # type: ignore[list-item]
            creds = credentials(tmp_path / "c", {"ops-hook": KEY})
            summary = notify(cfg, socket_path=fake.path, credentials=creds, sleep=Sleeps())
    assert (summary.plans, summary.sent) == (23, 4)
    digest = json.loads(hook.requests[0].body)
    assert digest["event"] == "plans.proposed"
    assert [p["plan_id"] for p in digest["plans"]] == [n.plan.plan_id for n in burst]
    for item, sent in zip(digest["plans"], burst, strict=True):
        confirm = next(k.confirm for k in sent.links if k.decision == "approve")
        assert item["approve_confirm"] == confirm
        assert f"{item['approve_url']}  confirm {confirm}" in digest["text"]
    assert [json.loads(r.body)["event"] for r in hook.requests[1:]] == ["plan.proposed"] * 3
