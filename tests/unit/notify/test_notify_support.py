"""What the opsbot-notify tests run against, all real and all started by the test: a
stand-in for root's opsbot-approver on a Unix socket that answers ``announce`` with real
``Announced`` lines (plans that wait, plans a standing rule approved, and how plans that
ran turned out), HTTP receivers
on 127.0.0.1 (a webhook that checks the signature as docs/operating.md tells receivers
to, a Slack or ntfy endpoint, receivers that fail), a credentials directory as systemd
makes it, and a sleep that only records.

The other test_notify_* modules import it; its own test pins that the stand-in's reply
is one the approver protocol accepts."""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from notify_svc import verify_signature
from notify_svc.credentials import Credentials
from shared_io.framing import LineReader
from shared_schema.approver_socket import (
    CONFIRM_ALPHABET,
    Announced,
    Link,
    Notice,
    OutcomeNotice,
    PlanBrief,
    PlanView,
    RuleNotice,
    StepView,
    parse_approver_reply,
    parse_approver_request,
)
from shared_schema.config import OpsbotConfig
from shared_schema.messages import encode_message

NOW = datetime(2026, 12, 1, 18, 35, tzinfo=UTC)
PLAN_ID = "20261201-183500-1a2b3c4d"
SHA256 = hashlib.sha256(b"the plan").hexdigest()


def plan_view(plan_id: str = PLAN_ID, **changes: Any) -> PlanView:
    """A plan as the approver shows it: one restart, with a precondition and evidence."""
    fields: dict[str, Any] = {
        "plan_id": plan_id,
        "sha256": SHA256,
        "host": "web1",
        "state": "PROPOSED",
        "goal": "restart app.service, which crashed on a full disk",
        "units": ["app.service"],
        "steps": [
            StepView(
                unit="app.service",
                argv=["systemctl", "restart", "--no-block", "app.service"],
                precondition=["app.service is failed"],
                live="failed (failed)",
            )
        ],
        "evidence": [
            "app.service failed with result 'exit-code'",
            "journal: No space left on device",
        ],
        "submitted_at": NOW,
        "plan_expires_at": NOW + timedelta(days=1),
        "approval_expires_at": NOW + timedelta(hours=1),
        "runs": "at once",
    }
    fields.update(changes)
    return PlanView(**fields)


def notice(plan: PlanView | None = None, approvers: tuple[str, ...] = ("alice",)) -> Notice:
    """The notice of ``plan`` with a fresh approve and reject token per approver."""
    plan = plan_view() if plan is None else plan
    links = [
        Link(
            approver=name,
            decision=decision,
            token=secrets.token_urlsafe(16),
            confirm="".join(secrets.choice(CONFIRM_ALPHABET) for _ in range(4)),
            expires_at=NOW + timedelta(minutes=59),
        )
        for name in approvers
        for decision in ("approve", "reject")
    ]
    return Notice(plan=plan, links=links)


RULE_SHA256 = hashlib.sha256(b"the rule").hexdigest()


def plan_brief(plan_id: str = PLAN_ID, **changes: Any) -> PlanBrief:
    """A plan as a rule notice names it: one start, each step as its argv."""
    fields: dict[str, Any] = {
        "plan_id": plan_id,
        "sha256": SHA256,
        "host": "web1",
        "goal": "start app.service, killed by SIGKILL",
        "units": ["app.service"],
        "argv": [["systemctl", "start", "--no-block", "app.service"]],
    }
    fields.update(changes)
    return PlanBrief(**fields)


def rule_notice(
    plan: PlanBrief | None = None, approvers: tuple[str, ...] = ("alice",), **changes: Any
) -> RuleNotice:
    """What the approver tells of a plan the rule night-restarts approved, to run at once."""
    fields: dict[str, Any] = {
        "plan": plan_brief() if plan is None else plan,
        "rule": "night-restarts",
        "rule_sha256": RULE_SHA256,
        "why": [
            "app.service failed with result 'signal'",
            "journal: Main process exited, code=killed, status=9/KILL",
        ],
        "approved_at": NOW,
        "runs": "",
        "approvers": list(approvers),
    }
    fields.update(changes)
    return RuleNotice(**fields)


#: A status link's token (``<link_base>/p/WATCH/status``), as the approver mints one.
WATCH = "W4tchT0ken-readonly_xy"


def outcome_notice(
    kind: str = "unresolved",
    plan: PlanBrief | None = None,
    approvers: tuple[str, ...] = ("alice",),
    **changes: Any,
) -> OutcomeNotice:
    """What the approver tells of the rule's plan once it ran: ``unresolved`` (opsbot-verify
    saw app.service fail again, a follow-up diagnosis may come), or ``ended`` (VERIFIED,
    the incident is over); no status link unless ``watch`` is given."""
    unresolved = kind == "unresolved"
    fields: dict[str, Any] = {
        "kind": kind,
        "plan": plan_brief() if plan is None else plan,
        "state": "UNRESOLVED" if unresolved else "VERIFIED",
        "at": NOW + timedelta(minutes=6),
        "reason": "app.service failed again" if unresolved else "app.service held 5 min",
        "verification": (
            [
                "app.service is failed (signal)",
                "journal: Main process exited, code=killed, status=9/KILL",
            ]
            if unresolved
            else ["app.service is active (running) since 18:36 UTC"]
        ),
        "incident": PLAN_ID,
        "plans": 1,
        "started_at": NOW,
        "approved_by": "rule night-restarts",
        "next": (
            "a follow-up diagnosis may propose another plan (its link comes as any plan's)"
            if unresolved
            else ""
        ),
        "approvers": list(approvers),
    }
    fields.update(changes)
    return OutcomeNotice(**fields)


def token(n: Notice, approver: str, decision: str) -> str:
    return next(k.token for k in n.links if k.approver == approver and k.decision == decision)


def config(**document: Any) -> OpsbotConfig:
    return OpsbotConfig.model_validate(document)


def credentials(directory: Path, secrets_by_channel: dict[str, bytes]) -> Credentials:
    """A credentials directory as systemd makes it: notify_<channel>, mode 0400."""
    directory.mkdir(exist_ok=True)
    for name, value in secrets_by_channel.items():
        path = directory / f"notify_{name}"
        path.write_bytes(value)
        path.chmod(0o400)
    return Credentials(directory)


@dataclass
class Sleeps:
    """An injected sleep: records each delay, waits for none, and moves its own
    monotonic clock (:meth:`monotonic`) on by it."""

    delays: list[float] = field(default_factory=list)
    now: float = 1000.0

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


# -- the approver -----------------------------------------------------------------------


class FakeApprover:
    """Answers each connection's request with the next of ``replies`` (raw lines, an
    Announced, or notices lists made into one), then with ``Announced(notices=[])``;
    records every request line as it arrived."""

    def __init__(self, path: Path, replies: list[list[Notice] | Announced | bytes]) -> None:
        self.path = path
        self.replies = list(replies)
        self.requests: list[bytes] = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                line = LineReader(conn, 65536).readline(5)
                if line is None:
                    continue
                self.requests.append(line)
                parse_approver_request(line)  # what notify sends is a valid request
                reply = self.replies.pop(0) if self.replies else []
                if isinstance(reply, list):
                    reply = Announced(notices=reply)
                if isinstance(reply, Announced):
                    reply = encode_message(reply)
                conn.sendall(reply)

    def close(self) -> None:
        self.listener.close()


@contextlib.contextmanager
def approver(path: Path, replies: list[list[Notice] | Announced | bytes]) -> Iterator[FakeApprover]:
    server = FakeApprover(path, replies)
    try:
        yield server
    finally:
        server.close()


# -- HTTP receivers ---------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


#: Decides a receiver's status for each request (the requests so far, this one).
Policy = Callable[[list[Received], Received], int]


def accept(requests: list[Received], request: Received) -> int:
    return 204


def fail_first(n: int, status: int = 503) -> Policy:
    """Answers ``status`` to the first ``n`` requests, then 204."""
    return lambda requests, request: status if len(requests) <= n else 204


def always(status: int) -> Policy:
    return lambda requests, request: status


def signed_by(key: bytes, clock: Callable[[], float] = time.time) -> Policy:
    """A webhook receiver as docs/operating.md says to write one: 204 when the signature over
    the raw body matches ``key`` and the timestamp is within 5 minutes, else 401."""

    def policy(requests: list[Received], request: Received) -> int:
        ok = verify_signature(
            key,
            request.headers.get("x-opsbot-timestamp", ""),
            request.body,
            request.headers.get("x-opsbot-signature", ""),
            now=clock(),
        )
        return 204 if ok else 401

    return policy


class Receiver:
    """An HTTP server on 127.0.0.1 that records each POST and answers by ``policy``;
    with ``hang``, it answers nothing until the test ends (a receiver that times out)."""

    def __init__(self, policy: Policy = accept, hang: bool = False) -> None:
        self.requests: list[Received] = []
        self.statuses: list[int] = []
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                request = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                receiver.requests.append(request)
                if hang:
                    receiver.release.wait(10)
                    return
                status = policy(receiver.requests, request)
                receiver.statuses.append(status)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def receiver(policy: Policy = accept, hang: bool = False) -> Iterator[Receiver]:
    server = Receiver(policy, hang)
    try:
        yield server
    finally:
        server.close()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_the_stand_in_approver_answers_with_a_real_announced_line(tmp_path: Path) -> None:
    """The stand-in's reply is a line the approver protocol parses as Announced, with
    the notice it was given, and it records the request it was sent."""
    n = notice(approvers=("alice", "bob"))
    with approver(tmp_path / "a.sock", [[n]]) as fake:
        from notify_svc.approver import announce

        assert announce(fake.path) == Announced(notices=[n])
        assert announce(fake.path) == Announced(notices=[])
    assert [parse_approver_request(r).op for r in fake.requests] == ["announce", "announce"]
    reply = parse_approver_reply(encode_message(Announced(notices=[n])).rstrip(b"\n"))
    assert isinstance(reply, Announced)
    assert len(token(n, "bob", "reject")) == 22
