"""What docs/operating.md's "Approving from your phone" and "Apply windows" tell an
operator to write is a config opsbot takes, and the reverse proxy it shows points at the
page's socket as installed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from opsbot_cli import firewall
from shared_schema import OpsbotConfig
from shared_schema.config import WEB_SOCKET
from testbed.readme import OPERATING, block


def test_the_phone_config_in_the_manual_is_valid() -> None:
    """Channels of each kind, an approver naming two of them, the page's proxy: valid as
    written, and every channel kind appears."""
    config = OpsbotConfig.model_validate(tomllib.loads(block("phone-config", doc=OPERATING)))
    assert {c.kind for c in config.notify.channels.values()} == {
        "webhook",
        "slack",
        "ntfy",
        "email",
    }
    assert config.approvers["alice"].notify == ["phone", "mail"]


def test_the_window_config_in_the_manual_is_valid() -> None:
    """The two apply windows shown are a valid config, lasting 2 h and 1 h as their
    comments say."""
    config = OpsbotConfig.model_validate(tomllib.loads(block("window-config", doc=OPERATING)))
    assert [w.seconds for w in config.executor.apply_window] == [7200, 3600]


def test_the_proxy_in_the_manual_points_at_the_page_socket() -> None:
    """The manual's config puts the page on the proxy's Unix socket, and its nginx
    location passes to exactly the socket `opsbot firewall --write` makes
    opsbot-web.socket listen on, with the limits answering 429 as the page does."""
    config = OpsbotConfig.model_validate(tomllib.loads(block("phone-config", doc=OPERATING)))
    assert config.web.listen == "unix" and config.web.proxy_group == "www-data"
    dropin = firewall.render(config, Path("/etc/opsbot/opsbot.toml"))
    text = dropin[str(firewall.UNIT_DIR / "opsbot-web.socket.d" / firewall.LISTEN_DROPIN)]
    listen = re.findall(r"^ListenStream=(\S+)$", text, re.M)
    assert listen == [WEB_SOCKET]
    nginx = block("phone-nginx", doc=OPERATING)
    assert f"proxy_pass http://unix:{WEB_SOCKET}:/;" in nginx
    assert "limit_req_status 429;" in nginx and "limit_conn_status 429;" in nginx


def window_words(start: str, seconds: float) -> str:
    """``from HH:MM to HH:MM`` of a daily window (``*-*-* HH:MM``) lasting ``seconds``."""
    match = re.fullmatch(r"\*-\*-\* (\d\d):(\d\d)", start)
    assert match, f"not a daily window: {start}"
    begins = int(match[1]) * 60 + int(match[2])
    ends = (begins + int(seconds) // 60) % (24 * 60)
    return f"from {begins // 60:02}:{begins % 60:02} to {ends // 60:02}:{ends % 60:02}"


def test_the_standing_rule_examples_say_their_window_in_their_first_line() -> None:
    """The manual's standing rule, and its fleet twin, approve only within their windows:
    copied by day, a rule limited to the night approves nothing, so the first line of
    each says when it approves (from its windows), and how to drop the limit."""
    (rule,) = OpsbotConfig.model_validate(
        tomllib.loads(block("standing-rule", doc=OPERATING))
    ).approve.rule
    assert rule.windows, "the example shows a window"
    said = [window_words(w.start, w.seconds) for w in rule.windows]
    for name in ("standing-rule", "fleet-rules"):
        first = block(name, doc=OPERATING).splitlines()[0]
        assert all(words in first for words in said), (name, first, said)
        assert "any hour" in first, (name, first)
