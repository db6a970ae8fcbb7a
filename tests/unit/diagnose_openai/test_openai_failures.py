"""When the model server misbehaves: retries, backoff, ModelUnavailable, and the API key
staying out of every message, repr and log event."""

import socket
import time
import traceback

import pytest
from structlog.testing import capture_logs

from diagnose_svc.actions import FinalNote, Transcript
from diagnose_svc.policies import ModelUnavailable
from testbed.scripted_openai import HttpError, Raw, ScriptedOpenAI, Text, ToolCall
from tests.unit.diagnose_openai.conftest import API_KEY, MakePolicy, Sleeps


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_429_is_retried_after_retry_after_seconds(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, sleeps: Sleeps
) -> None:
    """HTTP 429 with a numeric Retry-After is retried after that many seconds, and the
    next reply is used."""
    server.add(HttpError(429, retry_after="2"), Text("recovered"))

    action = make_policy(server.base_url).propose(transcript, []).action

    assert action == FinalNote(text="recovered")
    assert sleeps == [2.0]
    assert len(server.chat_requests) == 2


def test_retry_after_in_seconds_or_as_a_date_is_honoured_and_capped(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, sleeps: Sleeps
) -> None:
    """Retry-After is honoured as seconds and as an HTTP date (RFC 9110 allows both; OpenAI
    sends seconds, proxies in front of vLLM or Ollama may send dates), and capped at
    retry_max_delay: an hour and a date in 2037 wait 5 s, a date already past none, a value
    that is neither falls back to the exponential backoff."""
    server.add(
        HttpError(429, retry_after="3600"),
        HttpError(503, retry_after="Wed, 21 Oct 2037 07:28:00 GMT"),
        HttpError(503, retry_after="Wed, 21 Oct 2015 07:28:00 GMT"),
        HttpError(429, retry_after="soon"),
        Text("ok"),
    )
    policy = make_policy(server.base_url, retry_base_delay=0.25, retry_max_delay=5.0, max_retries=4)

    policy.propose(transcript, [])

    assert sleeps == [5.0, 5.0, 0.0, 2.0]


def test_5xx_retries_exhaust_into_model_unavailable(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, sleeps: Sleeps
) -> None:
    """HTTP 500 on every attempt is tried max_retries + 1 times with doubling delays, then
    raises ModelUnavailable naming the endpoint, the status and the number of attempts."""
    server.add(*[HttpError(500)] * 3)
    policy = make_policy(server.base_url, max_retries=2, retry_base_delay=0.1)

    with pytest.raises(ModelUnavailable) as raised:
        policy.propose(transcript, [])

    assert len(server.chat_requests) == 3
    assert sleeps == [0.1, 0.2]
    assert raised.value.status == 500
    assert f"{server.base_url}/chat/completions" in raised.value.message
    assert "HTTP 500 3 times" in raised.value.message


def test_backoff_really_sleeps_with_a_short_base_delay(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """With the real time.sleep and a small base delay, two 502s then a reply take at
    least base + 2 * base seconds and end in the reply."""
    server.add(HttpError(502), HttpError(502), Text("ok"))
    policy = make_policy(server.base_url, sleep=time.sleep, retry_base_delay=0.05)

    started = time.monotonic()
    action = policy.propose(transcript, []).action

    assert action == FinalNote(text="ok")
    assert time.monotonic() - started >= 0.15


def test_other_4xx_is_not_retried(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, sleeps: Sleeps
) -> None:
    """A 400 (say, an unknown model) is not retried: one request, ModelUnavailable with
    the status and the start of the server's error body."""
    server.add(HttpError(400, body='{"error": {"message": "model test-model not found"}}'))

    with pytest.raises(ModelUnavailable) as raised:
        make_policy(server.base_url).propose(transcript, [])

    assert len(server.chat_requests) == 1 and sleeps == []
    assert raised.value.status == 400
    assert "model test-model not found" in raised.value.message


def test_unreachable_endpoint_fails_fast_with_a_clear_message(
    make_policy: MakePolicy, transcript: Transcript, sleeps: Sleeps
) -> None:
    """A closed port raises ModelUnavailable at once (no retries), naming the URL."""
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    policy = make_policy(url, api_key=API_KEY)

    started = time.monotonic()
    with pytest.raises(ModelUnavailable) as raised:
        policy.propose(transcript, [])

    assert time.monotonic() - started < 2.0
    assert sleeps == []
    assert raised.value.message.startswith(f"model test-model at {url}/chat/completions")
    assert "cannot be reached" in raised.value.message
    assert raised.value.hint


def test_timeout_raises_model_unavailable(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript, sleeps: Sleeps
) -> None:
    """A server slower than timeout_seconds raises ModelUnavailable saying so; a timeout
    is not retried (each attempt would take as long again)."""
    server.add(ToolCall("journal", {}, delay=3.0))
    policy = make_policy(server.base_url, timeout_seconds=0.2)

    started = time.monotonic()
    with pytest.raises(ModelUnavailable) as raised:
        policy.propose(transcript, [])

    assert time.monotonic() - started < 2.0
    assert "did not answer within 0.2 s" in raised.value.message
    assert sleeps == []


def test_non_json_reply_raises_model_unavailable(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A 200 reply that is not JSON (a web page at the wrong URL) raises ModelUnavailable
    quoting its start and hinting at api_url."""
    server.add(Raw("<html><body>Welcome to nginx!</body></html>", "text/html"))

    with pytest.raises(ModelUnavailable) as raised:
        make_policy(server.base_url).propose(transcript, [])

    assert "not JSON" in raised.value.message
    assert "Welcome to nginx!" in raised.value.message
    assert "api_url" in str(raised.value)


def test_json_that_is_not_a_completion_raises_model_unavailable(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """JSON without choices[0].message is not a chat completion: ModelUnavailable."""
    server.add(Raw('{"object": "list", "data": []}', "application/json"))

    with pytest.raises(ModelUnavailable, match=r"without choices\[0\]\.message"):
        make_policy(server.base_url).propose(transcript, [])


def test_api_key_never_appears_in_errors_reprs_or_logs(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A 401 whose body echoes the key (as some APIs do) is reported with the key masked:
    not in the exception's str, repr or traceback, the policy's repr, or any log event."""
    echo = f'{{"error": {{"message": "Incorrect API key provided: {API_KEY}."}}}}'
    server.add(HttpError(503, body=echo), HttpError(401, body=echo))
    policy = make_policy(server.base_url, api_key=API_KEY)

    with capture_logs() as logs, pytest.raises(ModelUnavailable) as raised:
        policy.propose(transcript, [])

    exc = raised.value
    assert server.chat_requests[0].headers["authorization"] == f"Bearer {API_KEY}"
    assert "Incorrect API key provided: [key]" in exc.message
    shown = [
        str(exc),
        repr(exc),
        "".join(traceback.format_exception(exc)),
        repr(policy),
        repr(policy.settings),
        repr(logs),
    ]
    assert all(API_KEY not in text for text in shown)
    assert [e["event"] for e in logs] == ["model.retrying", "model.unavailable"]


def test_long_key_cut_by_the_snippet_limit_is_masked_too(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A key longer than the quoted part of an error body (a JWT, say) is masked before
    the body is cut, so not even its head is shown."""
    long_key = "eyJhbGciOiJIUzI1NiJ9." + "Qk9HVVMta2V5" * 30
    server.add(HttpError(401, body=f"bad key {long_key} for {long_key}"))

    with pytest.raises(ModelUnavailable) as raised:
        make_policy(server.base_url, api_key=long_key).propose(transcript, [])

    assert "HTTP 401: bad key [key] for [key]" in raised.value.message
    assert long_key[:12] not in str(raised.value)


def test_unreachable_error_and_logs_hold_no_key(
    make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A connection failure with a key set: the key is in no message, traceback or log."""
    policy = make_policy(f"http://127.0.0.1:{_closed_port()}/v1", api_key=API_KEY)

    with capture_logs() as logs, pytest.raises(ModelUnavailable) as raised:
        policy.propose(transcript, [])

    text = "".join(traceback.format_exception(raised.value)) + repr(logs)
    assert API_KEY not in text
    assert logs and logs[-1]["event"] == "model.unavailable"


def test_successful_turn_is_logged_without_the_key(
    server: ScriptedOpenAI, make_policy: MakePolicy, transcript: Transcript
) -> None:
    """A reply is logged as model.replied with the action kind and token counts, and no
    key."""
    server.add(ToolCall("journal", {"unit": "web.service"}))

    with capture_logs() as logs:
        proposal = make_policy(server.base_url, api_key=API_KEY).propose(transcript, [])

    assert logs == [
        {
            "event": "model.replied",
            "log_level": "info",
            "action": "call_tool",
            "tool": "journal",
            "prompt_tokens": proposal.prompt_tokens,
            "completion_tokens": proposal.completion_tokens,
        }
    ]
    assert API_KEY not in repr(logs)
