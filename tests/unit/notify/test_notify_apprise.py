"""A channel of kind apprise, run for real: Apprise sends to a receiver on 127.0.0.1 the
test starts (its ``json://`` URL, the credential as an operator writes it), and what
arrives is the approver's message. Apprise is held as the other channels are: a redirect
is not followed, a proxy in the environment is not used, a plugin registered at run
time is refused, its own retries give way to opsbot's, a hanging receiver costs a
bounded try; a missing credential, a URL Apprise cannot use and a missing Apprise each
cost their channel only, said without quoting the URL. Importing opsbot-notify does not
import Apprise."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from notify_svc.channels.apprise import REQUIREMENT
from notify_svc.credentials import Credentials
from notify_svc.run import Summary, notify
from shared_schema import OpsbotConfig
from shared_schema.approver_socket import Notice
from testbed.readme import OPERATING, block
from testbed.skips import skip_unless
from tests.unit.notify.test_notify_support import (
    PLAN_ID,
    Sleeps,
    approver,
    config,
    credentials,
    fail_first,
    notice,
    plan_view,
    receiver,
    token,
)

ROOT = Path(__file__).resolve().parents[3]
BASE = "https://ops.example.com/opsbot"

pytestmark = [
    # Apprise's e-mail plugin imports imghdr, deprecated since Python 3.11.
    pytest.mark.filterwarnings("ignore:'imghdr' is deprecated:DeprecationWarning"),
]


@pytest.fixture(autouse=True)
def _apprise_installed() -> None:
    skip_unless(
        importlib.util.find_spec("apprise") is not None,
        "Apprise is not installed (pip install -e '.[test,apprise]')",
    )


def apprise_config(**notify_settings: Any) -> OpsbotConfig:
    """alice's one channel, ``phone``, of kind apprise, and the page's links."""
    return config(
        notify={
            "link_base": BASE,
            "channels": {"phone": {"kind": "apprise"}},
            "attempts": 1,
            **notify_settings,
        },
        approvers={"alice": {"notify": ["phone"]}},
    )


def run(
    tmp_path: Path,
    cfg: OpsbotConfig,
    creds: Credentials,
    notices: list[Notice],
    sleeps: Sleeps | None = None,
) -> Summary:
    with approver(tmp_path / "approver.sock", [notices]) as fake:
        return notify(cfg, socket_path=fake.path, credentials=creds, sleep=sleeps or Sleeps())


def json_url(url: str) -> bytes:
    """Apprise's JSON webhook URL for an http:// URL: json://127.0.0.1:PORT/path."""
    return ("json://" + url.removeprefix("http://")).encode()


@dataclass
class Redirector:
    """A receiver on 127.0.0.1 that answers every POST with 307 to ``location``; records
    the paths it was sent."""

    url: str
    paths: list[str]


@contextlib.contextmanager
def redirecting_to(location: str) -> Iterator[Redirector]:
    paths: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            paths.append(self.path)
            self.send_response(307)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield Redirector(f"http://127.0.0.1:{server.server_address[1]}/hook", paths)
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def dripping() -> Iterator[str]:
    """A receiver on 127.0.0.1 that starts its answer and then sends one header byte
    every 0.1 s, for 5 s or until the test ends; yields its URL."""
    done = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(50):
                if done.wait(0.1):
                    return
                try:
                    self.wfile.write(b"z")
                    self.wfile.flush()
                except OSError:
                    return

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        done.set()
        server.shutdown()
        server.server_close()


def test_an_apprise_channel_delivers_the_approvers_message(tmp_path: Path) -> None:
    """alice's channel is a JSON webhook through Apprise, its URL in her credential file:
    the receiver gets the message's subject as the title and the whole text, with her
    approve and reject links, as the body; the message counts as sent."""
    n = notice()
    with receiver() as hook:
        creds = credentials(tmp_path / "c", {"phone": json_url(hook.url("/opsbot")) + b"\n"})
        summary = run(tmp_path, apprise_config(), creds, [n])
    assert (summary.sent, summary.failed, summary.ok) == (1, 0, True)
    (request,) = hook.requests
    assert request.path == "/opsbot"
    body = json.loads(request.body)
    assert body["title"] == f"opsbot: plan {PLAN_ID} for app.service on web1 waits for approval"
    assert body["message"].startswith(body["title"] + "\n")
    assert f"Approve (alice): {BASE}/p/{token(n, 'alice', 'approve')}" in body["message"]
    assert f"Reject (alice):  {BASE}/p/{token(n, 'alice', 'reject')}" in body["message"]
    assert "sudo opsbot approve" in body["message"]


def test_a_goal_with_markup_reaches_an_html_channel_escaped(tmp_path: Path) -> None:
    """A goal a model wrote from the journal carries HTML; on a channel that reads HTML
    (``format=html``), it arrives as text, escaped, not as markup."""
    n = notice(plan_view(goal='fix it <a href="http://evil">the approve page</a>'))
    with receiver() as hook:
        url = json_url(hook.url("/opsbot")) + b"?format=html"
        run(tmp_path, apprise_config(), credentials(tmp_path / "c", {"phone": url}), [n])
    (request,) = hook.requests
    message = json.loads(request.body)["message"]
    assert "&lt;" in message and "<a" not in message and "<\u200ba" not in message


@pytest.mark.parametrize("url_says", ["", "?redirect=yes"])
def test_a_redirect_is_not_followed(tmp_path: Path, url_says: str) -> None:
    """A receiver that answers 307 to another host: the message is not sent there, not
    even when the URL asks Apprise to follow redirects; it counts as failed, with the
    status in the reason."""
    with receiver() as elsewhere, redirecting_to(elsewhere.url("/stolen")) as redirector:
        url = json_url(redirector.url) + url_says.encode()
        with capture_logs() as logs:
            summary = run(
                tmp_path, apprise_config(), credentials(tmp_path / "c", {"phone": url}), [notice()]
            )
    assert redirector.paths == ["/hook"]
    assert elsewhere.requests == []
    assert (summary.sent, summary.failed) == (0, 1)
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert failed["kind"] == "apprise" and "307" in failed["reason"]


def test_a_proxy_in_the_environment_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With http_proxy and HTTP_PROXY pointing at a proxy (as a DefaultEnvironment= could
    set them), the message still goes straight to the receiver, the proxy sees nothing,
    and the variables are back once the run is over."""
    for name in ("no_proxy", "NO_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with receiver() as hook, receiver() as proxy:
        monkeypatch.setenv("http_proxy", proxy.url(""))
        monkeypatch.setenv("HTTP_PROXY", proxy.url(""))
        creds = credentials(tmp_path / "c", {"phone": json_url(hook.url("/opsbot"))})
        summary = run(tmp_path, apprise_config(), creds, [notice()])
    assert proxy.requests == []
    assert len(hook.requests) == 1 and summary.ok
    assert os.environ["HTTP_PROXY"] == os.environ["http_proxy"] == proxy.url("")


def test_opsbots_retries_replace_apprises(tmp_path: Path) -> None:
    """A receiver that answers 503 once: Apprise does not retry by itself, even when the
    URL asks for three retries; opsbot tries again after its 1 s backoff, logs the
    retry with Apprise's reason, and the second try is sent."""
    sleeps = Sleeps()
    with receiver(fail_first(1)) as hook, capture_logs() as logs:
        url = json_url(hook.url("/opsbot")) + b"?retry=3"
        summary = run(
            tmp_path,
            apprise_config(attempts=4),
            credentials(tmp_path / "c", {"phone": url}),
            [notice()],
            sleeps,
        )
    assert hook.statuses == [503, 204]
    assert sleeps.delays == [1.0]
    assert summary.ok and summary.sent == 1
    (retry,) = [e for e in logs if e["event"] == "notify.retry"]
    assert retry["reason"].startswith("JSON: ") and "503" in retry["reason"]


def test_a_receiver_that_does_not_answer_costs_a_bounded_try(tmp_path: Path) -> None:
    """A receiver that takes the request and never answers, with timeout_seconds = 0.3:
    each of the two tries ends within a second (Apprise's own wait is 4 s a request),
    and the message counts as failed."""
    sleeps = Sleeps()
    with receiver(hang=True) as hook, capture_logs() as logs:
        creds = credentials(tmp_path / "c", {"phone": json_url(hook.url("/opsbot"))})
        started = time.monotonic()
        summary = run(
            tmp_path, apprise_config(attempts=2, timeout_seconds=0.3), creds, [notice()], sleeps
        )
        elapsed = time.monotonic() - started
    assert len(hook.requests) == 2 and sleeps.delays == [1.0]
    assert elapsed < 3, elapsed
    assert summary.failed == 1
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert failed["reason"].startswith("JSON: ")  # each request's own timeout ended it


def test_a_receiver_that_drips_its_answer_costs_a_bounded_try(tmp_path: Path) -> None:
    """A receiver that answers one byte every 0.1 s, for ever: no single read waits the
    0.3 s timeout, yet the try ends at three times it, said so, and the run goes on."""
    with dripping() as url, capture_logs() as logs:
        creds = credentials(tmp_path / "c", {"phone": json_url(url)})
        started = time.monotonic()
        summary = run(tmp_path, apprise_config(timeout_seconds=0.3), creds, [notice()])
        elapsed = time.monotonic() - started
    assert elapsed < 3, elapsed
    assert summary.failed == 1
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert failed["reason"] == "no answer within the try's 0.9 s"


def test_a_failure_reason_does_not_quote_the_url(tmp_path: Path) -> None:
    """Nothing listens where the URL points: the reason says Apprise's connection error
    without the URL's host, port, path or password."""
    with receiver() as gone:
        url = gone.url("/s3cret-path")
    port = url.split(":")[2].split("/")[0]
    secret = f"json://opsbot:hunter2-pass@127.0.0.1:{port}/s3cret-path".encode()
    with capture_logs() as logs:
        summary = run(
            tmp_path, apprise_config(), credentials(tmp_path / "c", {"phone": secret}), [notice()]
        )
    assert summary.failed == 1
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert failed["reason"].startswith("JSON: ")
    for part in ("127.0.0.1", port, "s3cret-path", "hunter2-pass"):
        assert part not in repr(logs)


def test_a_missing_credential_costs_the_apprise_channel_only(tmp_path: Path) -> None:
    """No /etc/opsbot/notify/phone: one notify.channel_unusable naming the credential
    notify_phone, alice's message on it counted as failed; her ntfy channel still gets
    its message."""
    with receiver() as topic, capture_logs() as logs:
        cfg = config(
            notify={
                "channels": {
                    "phone": {"kind": "apprise"},
                    "topic": {"kind": "ntfy", "url": topic.url("/opsbot")},
                }
            },
            approvers={"alice": {"notify": ["phone", "topic"]}},
        )
        summary = run(tmp_path, cfg, credentials(tmp_path / "c", {}), [notice()])
    assert len(topic.requests) == 1
    assert (summary.sent, summary.failed) == (1, 1)
    assert summary.failures == [(PLAN_ID, "alice", "phone")]
    (unusable,) = [e for e in logs if e["event"] == "notify.channel_unusable"]
    assert unusable["channel"] == "phone" and unusable["kind"] == "apprise"
    assert "notify_phone" in unusable["reason"]


def test_a_url_apprise_cannot_use_is_refused_without_quoting_it(tmp_path: Path) -> None:
    """A Telegram URL with a malformed bot token: the channel is unusable, the log names
    the credential and the schema, never the token."""
    creds = credentials(tmp_path / "c", {"phone": b"tgram://not-a-b0t-token/1234"})
    with capture_logs() as logs:
        summary = run(tmp_path, apprise_config(), creds, [notice()])
    assert summary.failed == 1
    (unusable,) = [e for e in logs if e["event"] == "notify.channel_unusable"]
    assert "notify_phone" in unusable["reason"] and "tgram://" in unusable["reason"]
    assert "not-a-b0t-token" not in repr(logs)


def test_a_plugin_registered_at_run_time_is_refused(tmp_path: Path) -> None:
    """Code in the process registers its own Apprise schema (Apprise's @notify): a URL
    of that schema is refused, and the plugin is never called with the message."""
    from apprise.decorators import notify as apprise_notify
    from apprise.manager_plugins import NotificationManager

    called: list[str] = []

    @apprise_notify(on="opsbottest")
    def grab(body: str, *args: Any, **kwargs: Any) -> bool:
        called.append(body)
        return True

    try:
        with capture_logs() as logs:
            summary = run(
                tmp_path,
                apprise_config(),
                credentials(tmp_path / "c", {"phone": b"opsbottest://somewhere/"}),
                [notice()],
            )
    finally:
        NotificationManager().remove("opsbottest")
    assert called == []
    assert summary.failed == 1
    (unusable,) = [e for e in logs if e["event"] == "notify.channel_unusable"]
    assert "not shipped with Apprise" in unusable["reason"]


def test_without_apprise_the_channel_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a host without the extra, the channel is unusable, and the log says which pip
    line installs Apprise into opsbot's venv; the message counts as failed."""
    monkeypatch.setitem(sys.modules, "apprise", None)  # `import apprise` raises ImportError
    creds = credentials(tmp_path / "c", {"phone": b"json://127.0.0.1:9/x"})
    with capture_logs() as logs:
        summary = run(tmp_path, apprise_config(), creds, [notice()])
    assert summary.failed == 1
    (unusable,) = [e for e in logs if e["event"] == "notify.channel_unusable"]
    assert "Apprise is not installed" in unusable["reason"]
    assert f"pip install '{REQUIREMENT}'" in unusable["reason"]


def test_opsbot_notify_does_not_import_apprise_until_a_channel_needs_it() -> None:
    """Apprise is imported by the apprise channel only: a fresh interpreter that loads
    opsbot-notify, its channels and its run holds no apprise module."""
    code = (
        "import sys, notify_svc.main, notify_svc.channels, notify_svc.run\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'apprise'))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_extra_is_what_the_hint_names_and_setup_installs() -> None:
    """pyproject's extra opsbot[apprise] is the requirement the channel's hint gives, and
    scripts/setup installs it for the tests."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["apprise"] == [REQUIREMENT]
    setup = (ROOT / "scripts" / "setup").read_text()
    (line,) = [x for x in setup.splitlines() if "pip install --quiet -e" in x]
    assert "apprise" in line.split("[")[1].split("]")[0].split(",")


def test_the_apprise_config_in_the_manual_is_valid() -> None:
    """The manual's Apprise example is a config opsbot takes: three channels of kind
    apprise, and an ip_allow with Telegram's, Discord's and a Gotify server's addresses."""
    cfg = OpsbotConfig.model_validate(tomllib.loads(block("apprise-config", doc=OPERATING)))
    assert {c.kind for c in cfg.notify.channels.values()} == {"apprise"}
    assert len(cfg.notify.channels) == 3
    assert "149.154.160.0/20" in cfg.notify.ip_allow and "localhost" in cfg.notify.ip_allow


def test_on_discord_a_mention_or_a_disguised_link_from_the_journal_does_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A goal a model wrote from the journal says "@everyone [Review and approve](evil)":
    Discord draws plain text as Markdown, and Apprise's Discord plugin turns any @name into
    a ping. What Discord gets pings no one (no allow_mentions, no @everyone) and draws no
    link but the page's own. Discord itself cannot run here: its HTTP POST is caught."""
    import requests

    posted: list[dict[str, Any]] = []

    def caught(url: str, *args: Any, **kwargs: Any) -> requests.Response:
        posted.append(json.loads(kwargs.get("data") or "{}"))
        answer = requests.Response()
        answer.status_code = 204
        answer._content = b""
        return answer

    monkeypatch.setattr(requests, "post", caught)
    goal = "@everyone <@&42> [Review and approve](https://evil.example/p/x) now"
    n = notice(plan_view(goal=goal))
    url = b"discord://1234567890/abcdefghijklmnopqrstuvwxyz?format=text"
    summary = run(tmp_path, apprise_config(), credentials(tmp_path / "c", {"phone": url}), [n])
    assert summary.ok, summary
    (payload,) = posted
    content = json.dumps(payload, ensure_ascii=False)
    assert "allow_mentions" not in payload, payload
    assert "@everyone" not in content and "<@&42>" not in content
    assert "](https://evil.example" not in content
    assert f"{BASE}/p/" in content  # the page's own link, whole
