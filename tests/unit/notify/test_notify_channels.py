"""Each HTTP channel against a real receiver on 127.0.0.1 that the test starts: the
signed webhook (checked by the receiver with verify_signature, refused when the clock is
off), Slack and ntfy; retries with backoff on a receiver that fails twice, bounded tries
on one that always fails while the other channels are still sent, and a missing
credential that costs its channel only. No test sleeps: the sleep is injected."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from notify_svc.credentials import Credentials
from notify_svc.retry import backoff
from notify_svc.run import Summary, notify
from shared_schema.approver_socket import Notice
from shared_schema.config import OpsbotConfig
from tests.unit.notify.test_notify_support import (
    PLAN_ID,
    SHA256,
    Receiver,
    Sleeps,
    always,
    approver,
    config,
    credentials,
    fail_first,
    notice,
    receiver,
    signed_by,
    token,
)

KEY = b"webhook-key-0123456789"
BASE = "https://ops.example.com/opsbot"


def run(
    tmp_path: Path,
    cfg: OpsbotConfig,
    creds: Credentials,
    notices: list[Notice],
    sleeps: Sleeps | None = None,
    clock: float | None = None,
) -> Summary:
    with approver(tmp_path / "approver.sock", [notices]) as fake:
        return notify(
            cfg,
            socket_path=fake.path,
            credentials=creds,
            sleep=sleeps or Sleeps(),
            clock=time.time if clock is None else (lambda: clock),
        )


def webhook_config(hook: Receiver, **notify: object) -> OpsbotConfig:
    return config(
        notify={
            "link_base": BASE,
            "channels": {"ops-hook": {"kind": "webhook", "url": hook.url()}},
            **notify,
        },
        approvers={"alice": {"notify": ["ops-hook"]}},
    )


def test_the_webhook_posts_signed_json_that_the_receiver_accepts(tmp_path: Path) -> None:
    """The receiver checks X-Opsbot-Signature over the exact body with the shared key
    and the timestamp against its clock, and accepts; the body is the notice's JSON."""
    n = notice()
    with receiver(signed_by(KEY)) as hook:
        summary = run(
            tmp_path,
            webhook_config(hook),
            credentials(tmp_path / "c", {"ops-hook": KEY + b"\n"}),
            [n],
        )
    assert (summary.sent, summary.failed, summary.ok) == (1, 0, True)
    assert hook.statuses == [204]
    (request,) = hook.requests
    assert request.path == "/hook"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-opsbot-signature"].startswith("sha256=")
    assert abs(int(request.headers["x-opsbot-timestamp"]) - time.time()) < 60
    body = json.loads(request.body)
    assert body["plan_id"] == PLAN_ID and body["sha256"] == SHA256
    assert body["steps"][0]["argv"] == ["systemctl", "restart", "--no-block", "app.service"]
    assert body["approve_url"] == f"{BASE}/p/{token(n, 'alice', 'approve')}"
    assert body["reject_url"] == f"{BASE}/p/{token(n, 'alice', 'reject')}"
    assert len(body["delivery"]) == 32


def test_the_receiver_refuses_a_webhook_signed_with_a_skewed_clock(tmp_path: Path) -> None:
    """Sent with a clock 10 minutes behind, the signature is right but the timestamp too
    old: the receiver answers 401, which is not worth retrying (one try), and the
    failure is logged with the channel and the reason."""
    with receiver(signed_by(KEY)) as hook, capture_logs() as logs:
        summary = run(
            tmp_path,
            webhook_config(hook),
            credentials(tmp_path / "c", {"ops-hook": KEY}),
            [notice()],
            clock=time.time() - 600,
        )
    assert hook.statuses == [401]
    assert (summary.sent, summary.failed) == (0, 1)
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert failed["channel"] == "ops-hook" and failed["reason"].startswith("HTTP 401")
    assert failed["tries"] == 1 and failed["permanent"] is True
    assert failed["plan_id"] == PLAN_ID


def test_the_receiver_refuses_a_webhook_signed_with_another_key(tmp_path: Path) -> None:
    """A key that is not the receiver's: 401, the message counted as failed."""
    with receiver(signed_by(KEY)) as hook:
        summary = run(
            tmp_path,
            webhook_config(hook),
            credentials(tmp_path / "c", {"ops-hook": b"not the key"}),
            [notice()],
        )
    assert hook.statuses == [401]
    assert summary.failed == 1


def test_a_receiver_that_fails_twice_gets_the_message_on_the_third_try(tmp_path: Path) -> None:
    """503, 503, then 204: three tries, 1 s and then 2 s of (injected) backoff between
    them, each try signed afresh and the same delivery id; counted as sent."""
    sleeps = Sleeps()
    with receiver(fail_first(2)) as hook, capture_logs() as logs:
        summary = run(
            tmp_path,
            webhook_config(hook),
            credentials(tmp_path / "c", {"ops-hook": KEY}),
            [notice()],
            sleeps,
        )
    assert hook.statuses == [503, 503, 204]
    assert sleeps.delays == [1.0, 2.0]
    assert summary.ok and summary.sent == 1
    retries = [e for e in logs if e["event"] == "notify.retry"]
    assert [(e["tries"], e["delay"], e["reason"]) for e in retries] == [
        (1, 1.0, "HTTP 503 Service Unavailable"),
        (2, 2.0, "HTTP 503 Service Unavailable"),
    ]
    assert [e["tries"] for e in logs if e["event"] == "notify.sent"] == [3]
    deliveries = {json.loads(r.body)["delivery"] for r in hook.requests}
    assert len(deliveries) == 1


def test_a_receiver_that_always_fails_gets_bounded_tries_and_the_others_still_get_theirs(
    tmp_path: Path,
) -> None:
    """attempts = 4 against a receiver that always answers 500: exactly 4 tries with
    1, 2, 4 s of backoff, one notify.failed naming the channel and the reason, and the
    Slack channel after it still gets its message; the run is not ok."""
    sleeps = Sleeps()
    with receiver(always(500)) as hook, receiver() as slack, capture_logs() as logs:
        cfg = config(
            notify={
                "link_base": BASE,
                "attempts": 4,
                "channels": {
                    "ops-hook": {"kind": "webhook", "url": hook.url()},
                    "team": {"kind": "slack"},
                },
            },
            approvers={"alice": {"notify": ["ops-hook", "team"]}},
        )
        creds = credentials(
            tmp_path / "c", {"ops-hook": KEY, "team": slack.url("/services/T0/B0/x").encode()}
        )
        summary = run(tmp_path, cfg, creds, [notice()], sleeps)
    assert hook.statuses == [500] * 4
    assert sleeps.delays == [1.0, 2.0, 4.0]
    assert len(slack.requests) == 1
    assert (summary.sent, summary.failed, summary.ok) == (1, 1, False)
    assert summary.failures == [(PLAN_ID, "alice", "ops-hook")]
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert failed["channel"] == "ops-hook" and failed["kind"] == "webhook"
    assert failed["reason"] == "HTTP 500 Internal Server Error" and failed["tries"] == 4
    assert failed["log_level"] == "error"


def test_a_client_error_is_not_retried(tmp_path: Path) -> None:
    """404 (a wrong URL) would be the same on every try: one try, failed at once."""
    sleeps = Sleeps()
    with receiver(always(404)) as hook:
        summary = run(
            tmp_path,
            webhook_config(hook),
            credentials(tmp_path / "c", {"ops-hook": KEY}),
            [notice()],
            sleeps,
        )
    assert hook.statuses == [404]
    assert sleeps.delays == [] and summary.failed == 1


def test_a_receiver_that_does_not_answer_times_out_each_try(tmp_path: Path) -> None:
    """A receiver that takes the request and never answers: each try ends at
    timeout_seconds, the reason says so, and the tries stay bounded."""
    sleeps = Sleeps()
    with receiver(hang=True) as hook, capture_logs() as logs:
        cfg = webhook_config(hook, attempts=2, timeout_seconds=0.3)
        summary = run(
            tmp_path, cfg, credentials(tmp_path / "c", {"ops-hook": KEY}), [notice()], sleeps
        )
    assert len(hook.requests) == 2 and sleeps.delays == [1.0]
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert failed["reason"] == "no answer within the timeout"
    assert not summary.ok


def test_a_receiver_that_is_not_there_is_a_logged_failure(tmp_path: Path) -> None:
    """Nothing listens on the port: each try fails with a connection error, logged,
    nothing raised."""
    with receiver() as gone:
        url = gone.url()
    cfg = config(
        notify={"channels": {"ops-hook": {"kind": "webhook", "url": url}}, "attempts": 2},
        approvers={"alice": {"notify": ["ops-hook"]}},
    )
    with capture_logs() as logs:
        summary = run(tmp_path, cfg, credentials(tmp_path / "c", {"ops-hook": KEY}), [notice()])
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert failed["reason"].startswith("ConnectError")
    assert summary.failed == 1


def test_a_missing_credential_costs_its_channel_only(tmp_path: Path) -> None:
    """No notify_ops-hook credential: one error for that channel (naming the credential,
    not a secret), its messages failed; the ntfy channel is still sent."""
    with receiver() as hook, receiver() as topic, capture_logs() as logs:
        cfg = config(
            notify={
                "channels": {
                    "ops-hook": {"kind": "webhook", "url": hook.url()},
                    "phone": {"kind": "ntfy", "url": topic.url("/opsbot")},
                }
            },
            approvers={"alice": {"notify": ["ops-hook", "phone"]}, "bob": {"notify": ["ops-hook"]}},
        )
        summary = run(
            tmp_path, cfg, credentials(tmp_path / "c", {}), [notice(approvers=("alice", "bob"))]
        )
    assert hook.requests == [] and len(topic.requests) == 1
    assert (summary.sent, summary.failed) == (1, 2)
    (unusable,) = [e for e in logs if e["event"] == "notify.channel_unusable"]
    assert unusable["channel"] == "ops-hook"
    assert "notify_ops-hook" in unusable["reason"]


def test_slack_gets_the_text_at_the_url_of_its_credential_with_markup_escaped(
    tmp_path: Path,
) -> None:
    """The Slack incoming webhook's URL comes from the credential (it is the secret);
    the body is {"text": ..., "blocks": ...}, the text with the approver's links (the
    blocks: test_notify_chat_cards), and a goal holding Slack markup
    (<!channel>, <url|label>) arrives escaped, so it cannot ping or disguise a link."""
    n = notice(_plan_with_goal("fix it <!channel> <http://evil|the approve page> & more"))
    with receiver() as slack:
        cfg = config(
            notify={"link_base": BASE, "channels": {"team": {"kind": "slack"}}},
            approvers={"alice": {"notify": ["team"]}},
        )
        url = slack.url("/services/T000/B000/XXXX")
        summary = run(tmp_path, cfg, credentials(tmp_path / "c", {"team": url.encode()}), [n])
    assert summary.ok
    (request,) = slack.requests
    assert request.path == "/services/T000/B000/XXXX"
    text = json.loads(request.body)["text"]
    assert list(json.loads(request.body)) == ["text", "blocks"]
    assert f"{BASE}/p/{token(n, 'alice', 'approve')}" in text
    assert "&lt;!channel&gt; &lt;http://evil|the approve page&gt; &amp; more" in text
    assert "<!channel>" not in text


def test_a_slack_credential_that_is_not_a_url_is_refused_without_quoting_it(
    tmp_path: Path,
) -> None:
    """A credential holding something else (a token pasted in the wrong file): the
    channel is unusable, and the log says so without the value."""
    cfg = config(
        notify={"channels": {"team": {"kind": "slack"}}}, approvers={"alice": {"notify": ["team"]}}
    )
    with capture_logs() as logs:
        summary = run(
            tmp_path, cfg, credentials(tmp_path / "c", {"team": b"xoxb-secret"}), [notice()]
        )
    assert summary.failed == 1
    assert "xoxb-secret" not in repr(logs)


@pytest.mark.parametrize("with_token", [True, False])
def test_ntfy_gets_the_text_a_title_and_approve_and_reject_actions(
    tmp_path: Path, with_token: bool
) -> None:
    """ntfy: the plain text as the body, Title the subject, Click the approve page,
    Actions an Approve and a Reject button; Authorization: Bearer only when the
    credential holds a token."""
    n = notice()
    with receiver() as topic:
        cfg = config(
            notify={
                "link_base": BASE,
                "channels": {"phone": {"kind": "ntfy", "url": topic.url("/opsbot")}},
            },
            approvers={"alice": {"notify": ["phone"]}},
        )
        creds = credentials(tmp_path / "c", {"phone": b"tk_abc123\n"} if with_token else {})
        summary = run(tmp_path, cfg, creds, [n])
    assert summary.ok
    (request,) = topic.requests
    approve = f"{BASE}/p/{token(n, 'alice', 'approve')}"
    reject = f"{BASE}/p/{token(n, 'alice', 'reject')}"
    assert request.path == "/opsbot"
    assert (
        request.headers["title"]
        == f"opsbot: plan {PLAN_ID} for app.service on web1 waits for approval"
    )
    assert "opsbot" in request.headers["tags"]
    assert request.headers["click"] == approve
    assert request.headers["actions"] == f"view, Approve, {approve}; view, Reject, {reject}"
    assert request.body.decode().startswith("opsbot: plan ")
    assert f"Approve (alice): {approve}" in request.body.decode()
    if with_token:
        assert request.headers["authorization"] == "Bearer tk_abc123"
    else:
        assert "authorization" not in request.headers


def test_ntfy_without_the_page_sends_no_buttons(tmp_path: Path) -> None:
    """Without link_base there is nothing to click: no Click, no Actions; the text gives
    the shell command."""
    with receiver() as topic:
        cfg = config(
            notify={"channels": {"phone": {"kind": "ntfy", "url": topic.url("/opsbot")}}},
            approvers={"alice": {"notify": ["phone"]}},
        )
        run(tmp_path, cfg, credentials(tmp_path / "c", {}), [notice()])
    (request,) = topic.requests
    assert "click" not in request.headers and "actions" not in request.headers
    assert b"sudo opsbot approve" in request.body


def test_the_tries_stop_when_the_runs_time_is_up(tmp_path: Path) -> None:
    """With 5 s of the run's budget left and a receiver that always answers 503, the
    tries stop before a backoff would outlast the budget (1 s, 2 s slept; 4 s would not
    fit): 3 tries of the 8 allowed, logged as failed with why."""
    sleeps = Sleeps()
    with receiver(always(503)) as hook, capture_logs() as logs:
        with approver(tmp_path / "approver.sock", [[notice()]]) as fake:
            summary = notify(
                webhook_config(hook, attempts=8),
                socket_path=fake.path,
                credentials=credentials(tmp_path / "c", {"ops-hook": KEY}),
                sleep=sleeps,
                monotonic=sleeps.monotonic,
                budget_seconds=5,
            )
    assert len(hook.requests) == 3 and sleeps.delays == [1.0, 2.0]
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert failed["reason"] == "HTTP 503 Service Unavailable; no time left for another try"
    assert not summary.ok


def test_after_the_runs_time_no_try_is_made_and_no_plan_announced(tmp_path: Path) -> None:
    """The budget spent while alice's message went out (the clock a minute later at each
    look): bob's message is failed without a try, and the approver is not asked for
    more plans (it would make links nobody receives)."""
    sleeps = Sleeps()

    def slow_clock() -> float:  # each look at the clock: a minute later
        sleeps.now += 60
        return sleeps.now

    with receiver() as hook, capture_logs() as logs:
        cfg = config(
            notify={"channels": {"ops-hook": {"kind": "webhook", "url": hook.url()}}},
            approvers={"alice": {"notify": ["ops-hook"]}, "bob": {"notify": ["ops-hook"]}},
        )
        with approver(tmp_path / "approver.sock", [[notice(approvers=("alice", "bob"))]]) as fake:
            summary = notify(
                cfg,
                socket_path=fake.path,
                credentials=credentials(tmp_path / "c", {"ops-hook": KEY}),
                sleep=sleeps,
                monotonic=slow_clock,
                budget_seconds=150,
            )
    assert [json.loads(r.body)["approver"] for r in hook.requests] == ["alice"]
    assert len(fake.requests) == 1
    (failed,) = [e for e in logs if e["event"] == "notify.failed"]
    assert (failed["approver"], failed["tries"]) == ("bob", 0)
    assert failed["reason"] == "the run's time is up"
    assert (summary.sent, summary.failed) == (1, 1)


@pytest.mark.parametrize("there", [True, False])
def test_no_log_holds_the_slack_url_or_the_webhook_key(tmp_path: Path, there: bool) -> None:
    """Slack's URL is its secret: whether the receiver fails (500) or is not there, the
    log says why without the URL; nor does any event hold the webhook's key."""
    secret_path = "/services/T0SECRET/B0SECRET/xyzSECRET"
    with receiver(always(500)) as slack, receiver(always(500)) as hook:
        url = slack.url(secret_path)
        hook_url = hook.url()
        cfg = config(
            notify={
                "attempts": 2,
                "channels": {
                    "team": {"kind": "slack"},
                    "ops-hook": {"kind": "webhook", "url": hook_url},
                },
            },
            approvers={"alice": {"notify": ["team", "ops-hook"]}},
        )
        creds = credentials(tmp_path / "c", {"team": url.encode(), "ops-hook": KEY})
        if there:
            with capture_logs() as logs:
                summary = run(tmp_path, cfg, creds, [notice()])
    if not there:
        with capture_logs() as logs:
            summary = run(tmp_path, cfg, creds, [notice()])
    assert summary.failed == 2
    assert [e["channel"] for e in logs if e["event"] == "notify.failed"] == ["team", "ops-hook"]
    assert "SECRET" not in repr(logs) and KEY.decode() not in repr(logs)


def test_the_backoff_doubles_from_one_second_and_is_capped() -> None:
    """1, 2, 4, 8, 16, then 30 s at most."""
    assert [backoff(n) for n in range(1, 8)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def _plan_with_goal(goal: str):  # type: ignore[no-untyped-def]
    from tests.unit.notify.test_notify_support import plan_view

    return plan_view(goal=goal)
