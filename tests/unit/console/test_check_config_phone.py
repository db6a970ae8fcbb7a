"""`opsbot check-config` tells root what would keep an approver from being told or from
approving on the page, before the first plan waits."""

from __future__ import annotations

import tomllib
from pathlib import Path

from opsbot_cli.check_config import check_approval_path
from opsbot_cli.running_config import Running, running_configs
from shared_io.paths import Paths
from shared_schema import OpsbotConfig
from shared_schema.config_state import page_status

CONFIG = """
[notify]
link_base = "https://ops.example.com/opsbot"
[notify.channels.hook]
kind = "webhook"
url = "https://hooks.example.com/x"
[notify.channels.mail]
kind = "email"
host = "127.0.0.1"
sender = "opsbot@example.com"
to = ["alice@example.com"]
[approvers.alice]
notify = ["hook", "mail"]
"""


def _warnings(tmp_path: Path, text: str = CONFIG, as_root: bool = True) -> list[str]:
    (tmp_path / "totp").mkdir(exist_ok=True)
    (tmp_path / "notify").mkdir(exist_ok=True)
    config = OpsbotConfig.model_validate(tomllib.loads(text))
    return check_approval_path(
        config,
        tmp_path / "opsbot.toml",
        totp=tmp_path / "totp",
        secrets=tmp_path / "notify",
        as_root=as_root,
    )


def test_a_missing_totp_secret_and_a_missing_webhook_key_are_named(tmp_path: Path) -> None:
    """Approver alice has no TOTP secret and the webhook channel has no secret: both are
    named; the mail relay, which needs no login, is not."""
    said = _warnings(tmp_path)
    assert any("approver alice has no TOTP secret" in w for w in said), said
    assert any("channel hook (webhook) has no secret" in w for w in said), said
    # A mail relay without a user needs no secret.
    assert not any("channel mail" in w for w in said), said


def test_with_the_secrets_in_place_only_the_ip_filters_are_left(tmp_path: Path) -> None:
    """With alice's TOTP secret and the webhook's secret in place, the one warning left is
    to write the IP filters with `opsbot firewall --write`."""
    (tmp_path / "totp").mkdir()
    (tmp_path / "totp" / "alice").write_text("SECRET\n")
    (tmp_path / "notify").mkdir()
    (tmp_path / "notify" / "hook").write_text("key\n")
    said = _warnings(tmp_path)
    assert len(said) == 1 and "opsbot firewall --write" in said[0], said


def test_approvers_without_link_base_are_told_their_messages_have_no_links(
    tmp_path: Path,
) -> None:
    """Without link_base, the check warns that approvers' messages carry no links; run as
    someone other than root, it says nothing about TOTP secrets it cannot look at."""
    text = CONFIG.replace('link_base = "https://ops.example.com/opsbot"\n', "")
    said = _warnings(tmp_path, text, as_root=False)
    assert any("link_base is not" in w for w in said), said
    assert not any("TOTP" in w for w in said)  # only root can look


def test_a_config_that_trusts_a_proxy_by_address_is_refused_with_what_to_do() -> None:
    """``trusted_proxies = ["127.0.0.1"]`` let every local user be the proxy (a rotating
    X-Forwarded-For lifted the rate limits and forged the audited source): such a config
    is refused, saying how to reach the page on the proxy's socket instead."""
    import pydantic
    import pytest

    with pytest.raises(pydantic.ValidationError) as refused:
        OpsbotConfig.model_validate(tomllib.loads('[web]\ntrusted_proxies = ["127.0.0.1"]\n'))
    said = str(refused.value)
    assert "trusted_proxies" in said and 'listen = "unix"' in said, said
    assert "unix:/run/opsbot/web.sock" in said, said
    with pytest.raises(pydantic.ValidationError) as unnamed:
        OpsbotConfig.model_validate(tomllib.loads('[web]\nlisten = "unix"\n'))
    assert "proxy_group" in str(unnamed.value)


def test_listen_unix_moves_the_page_to_a_socket_only_the_proxy_group_opens(
    tmp_path: Path,
) -> None:
    """`opsbot firewall` writes opsbot-web.socket's listen drop-in from ``[web]``: with
    "unix", the Unix socket, mode 0660, the proxy's group; with "tcp", nothing replaced."""
    from opsbot_cli.firewall import LISTEN_DROPIN, UNIT_DIR, render

    where = str(UNIT_DIR / "opsbot-web.socket.d" / LISTEN_DROPIN)
    text = '[web]\nlisten = "unix"\nproxy_group = "www-data"\n'
    unix = render(OpsbotConfig.model_validate(tomllib.loads(text)), tmp_path / "opsbot.toml")
    lines = unix[where].splitlines()
    assert lines[lines.index("ListenStream=") + 1] == "ListenStream=/run/opsbot/web.sock"
    assert "SocketGroup=www-data" in lines and "SocketMode=0660" in lines
    tcp = render(OpsbotConfig(), tmp_path / "opsbot.toml")
    assert not [line for line in tcp[where].splitlines() if line.startswith("ListenStream")]


def test_a_teams_or_apprise_channel_without_its_url_is_named(tmp_path: Path) -> None:
    """Bob's Teams room and his Telegram through Apprise read their URL from
    /etc/opsbot/notify/NAME, as Slack does: without that file they send nothing, and the
    check names both; his ntfy topic, whose token is optional, is not named. Once the
    files are there, neither is named."""
    text = (
        CONFIG
        + """
[notify.channels.room]
kind = "teams"
[notify.channels.phone-tg]
kind = "apprise"
[notify.channels.topic]
kind = "ntfy"
url = "https://ntfy.example.com/opsbot"
[approvers.bob]
notify = ["room", "phone-tg", "topic"]
"""
    )
    said = _warnings(tmp_path, text)
    assert any("channel room (teams) has no secret" in w for w in said), said
    assert any("channel phone-tg (apprise) has no secret" in w for w in said), said
    assert not any("channel topic" in w for w in said), said
    (tmp_path / "notify" / "room").write_text("https://x.logic.azure.com/workflows/1\n")
    (tmp_path / "notify" / "phone-tg").write_text("tgram://BOT_TOKEN/CHAT_ID\n")
    said = _warnings(tmp_path, text)
    assert not any("channel room" in w or "channel phone-tg" in w for w in said), said


def test_check_config_reads_the_page_s_file_from_its_status(tmp_path: Path) -> None:
    """The page says in its systemd status which file it has in force (at start and after
    each reload): check-config counts it current after README's reload line took the
    edit, before any relay; older, with the reload to run, while it runs another file; and
    when the edit did not load, it says the page keeps the file read before."""
    paths = Paths.from_env({"OPSBOT_SOCKET": str(tmp_path / "executor.sock")})
    old, new = "a" * 64, "b" * 64

    def page(status: str) -> list[Running]:
        found = running_configs(
            paths, new, running=lambda unit: unit == "opsbot-web.service", status=lambda u: status
        )
        return [daemon for daemon in found if daemon.unit == "opsbot-web.service"]

    assert page(page_status(new)) == [Running("opsbot-web.service", "current")]
    [older] = page(page_status(old))
    assert older.status == "older" and old[:12] in older.detail
    assert older.action == "`sudo systemctl try-reload-or-restart opsbot-web.service`"
    [kept] = page(page_status(old, reload_failed=True))
    assert kept.status == "older" and "did not load" in kept.detail
    assert kept.action.startswith("fix the file")
    assert page("serving the approval page") == []  # an older page, no relay yet
