"""``opsbot-notify --test [CHANNEL]`` (what ``opsbot notify test`` runs in the unit's
sandbox): a test message on one channel or on each, to real receivers on 127.0.0.1, and
what each answered, in words or as JSON; the exit status says whether every channel
delivered. It asks root's approver nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog

from notify_svc.main import main
from tests.unit.notify.test_notify_support import always, credentials, receiver, signed_by

KEY = b"the-webhook-key"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The unit's environment: the config, the credentials, no journal, and an approver
    socket that is not there (a test never asks it)."""
    monkeypatch.setenv("OPSBOT_APPROVER_SOCKET", str(tmp_path / "approver.sock"))
    monkeypatch.setenv("OPSBOT_CONFIG", str(tmp_path / "opsbot.toml"))
    monkeypatch.setenv("OPSBOT_NO_JOURNAL", "1")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path / "creds"))
    credentials(tmp_path / "creds", {"ops-hook": KEY, "gone": KEY})
    yield tmp_path
    structlog.reset_defaults()


def write_config(tmp_path: Path, hook_url: str, gone_url: str) -> None:
    (tmp_path / "opsbot.toml").write_text(
        "[notify]\nattempts = 3\n"
        f'[notify.channels.ops-hook]\nkind = "webhook"\nurl = "{hook_url}"\n'
        f'[notify.channels.gone]\nkind = "webhook"\nurl = "{gone_url}"\n'
        '[notify.channels.no-key]\nkind = "webhook"\nurl = "http://127.0.0.1:9/x"\n'
    )


def test_each_channel_gets_a_test_message_and_its_answer_is_said(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every channel of the config: the signed webhook delivers (its receiver checks the
    signature as the manual says), one answers 404 (said as it answered, tried once: no
    retry hides it), one has no credential (said, nothing sent); exit 1, a line each and
    the count. The receiver's body is the test event, with no link and no plan."""
    with receiver(signed_by(KEY)) as hook, receiver(always(404)) as gone:
        write_config(env, hook.url(), gone.url())
        assert main(["--test"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "ops-hook (webhook): delivered"
    assert out[1] == "gone (webhook): HTTP 404 Not Found"
    assert out[2].startswith(
        "no-key (webhook): channel 'no-key' needs the credential notify_no-key"
    )
    assert out[3] == "2 of 3 channels failed"
    assert hook.statuses == [204] and gone.statuses == [404]
    [body] = [json.loads(r.body) for r in hook.requests]
    assert body["event"] == "test" and body["channel"] == "ops-hook"
    assert "approve_url" not in body and "plan_id" not in body
    assert "test message to channel ops-hook" in body["text"]


def test_one_named_channel_as_json_exits_0_when_it_delivers(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--test ops-hook --json``: only that channel is sent to, the answer is a JSON
    list, exit 0."""
    with receiver(signed_by(KEY)) as hook, receiver(always(404)) as gone:
        write_config(env, hook.url(), gone.url())
        assert main(["--test", "ops-hook", "--json"]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said == [
        {"channel": "ops-hook", "kind": "webhook", "delivered": True, "said": "delivered"}
    ]
    assert len(hook.requests) == 1 and gone.requests == []


def test_a_channel_the_config_does_not_name_is_a_usage_error(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt channel: exit 2, the channels there are named, nothing sent; a config
    without channels says what to add."""
    with receiver() as hook:
        write_config(env, hook.url(), hook.url())
        assert main(["--test", "ops-hok"]) == 2
        err = capsys.readouterr().err
        assert "no channel 'ops-hok' in [notify.channels] (channels: ops-hook, gone, no-key)" in err
        (env / "opsbot.toml").write_text("")
        assert main(["--test"]) == 2
        assert "add [notify.channels.NAME]" in capsys.readouterr().err
    assert hook.requests == []
