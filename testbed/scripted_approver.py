"""An approver socket that answers ``view``, ``decide`` and ``follow`` per
shared_schema.approver_socket from tokens it holds in a dict, and records every
request: the stand-in for root's opsbot-approver when the page (opsbot-web) is tested
on the real wire. It checks nothing a real approver must (no peer uid, no plan file);
its one code is ``code``; a token works once; ``attempts`` wrong codes lock a token; a
token that decided follows its plan, whose state a test sets in ``Issued.state``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from shared_io.framing import LineReader, send_line
from shared_schema.approver_socket import (
    MAX_APPROVER_MESSAGE_BYTES,
    Decide,
    Decided,
    Decision,
    Follow,
    Followed,
    PlanBrief,
    PlanView,
    Refused,
    StepView,
    View,
    Viewed,
    parse_approver_request,
)
from shared_schema.messages import encode_message
from shared_schema.states import PlanState

PLAN_ID = "20261201-152001-0a1b2c3d"
SHA256 = "5f" * 32
AT = datetime(2026, 12, 1, 15, 20, 1, tzinfo=UTC)


def plan_view(goal: str = "bring app.service back", **changes: object) -> PlanView:
    """A plan as the approver describes it: one restart of app.service."""
    plan = PlanView(
        plan_id=PLAN_ID,
        sha256=SHA256,
        host="web1",
        state="PROPOSED",
        goal=goal,
        units=["app.service"],
        steps=[
            StepView(
                unit="app.service",
                argv=["systemctl", "restart", "--", "app.service"],
                precondition=["app.service is failed"],
                live="failed (failed)",
                reason="the service exited 1 after its config moved",
            )
        ],
        evidence=["app.service: Main process exited, status=1/FAILURE", "port 8080 refused"],
        submitted_at=AT,
        plan_expires_at=AT + timedelta(hours=1),
        approval_expires_at=AT + timedelta(minutes=30),
        runs="at once",
    )
    return plan.model_copy(update=changes)


@dataclass
class Issued:
    plan: PlanView
    decision: Decision
    approver: str = "alice"
    expires_at: datetime = AT + timedelta(minutes=30)
    used: bool = False
    wrong: int = 0
    #: When it decided its plan (None: it did not), and the plan's state since.
    decided_at: datetime | None = None
    state: PlanState = PlanState.APPROVED
    reason: str = ""
    verification: list[str] = field(default_factory=list)


def brief_of(plan: PlanView) -> PlanBrief:
    return PlanBrief(
        plan_id=plan.plan_id,
        sha256=plan.sha256,
        host=plan.host,
        goal=plan.goal,
        units=plan.units,
        argv=[step.argv for step in plan.steps],
    )


@dataclass
class ScriptedApprover:
    path: Path
    code: str = "123456"
    attempts: int = 3
    tokens: dict[str, Issued] = field(default_factory=dict)
    #: What a used or unknown token is told.
    refusal: str = "this link was used, expired or never issued"
    #: Every request, in the order they came.
    requests: list[View | Decide | Follow] = field(default_factory=list)
    #: Status links a news message carried: token -> what ``follow`` answers (``view``
    #: and ``decide`` do not know them, as root's approver does not).
    watches: dict[str, Followed] = field(default_factory=dict)

    def issue(self, token: str, decision: Decision, plan: PlanView | None = None) -> str:
        self.tokens[token] = Issued(plan or plan_view(), decision)
        return token

    @property
    def decides(self) -> list[Decide]:
        return [r for r in self.requests if isinstance(r, Decide)]

    def answer(self, request: View | Decide | Follow) -> Viewed | Decided | Followed | Refused:
        issued = self.tokens.get(request.token)
        if isinstance(request, Follow):
            if request.token in self.watches:
                return self.watches[request.token]
            return self.follow(issued)
        if issued is None or issued.used:
            return Refused(kind="token", reason=self.refusal)
        if isinstance(request, View):
            return Viewed(
                plan=issued.plan,
                approver=issued.approver,
                decision=issued.decision,
                expires_at=issued.expires_at,
            )
        if issued.wrong >= self.attempts:
            return Refused(kind="limit", reason=f"{self.attempts} wrong codes for this link")
        if request.code != self.code:
            issued.wrong += 1
            return Refused(kind="code", reason="wrong code")
        issued.used = True
        issued.decided_at = datetime.now(UTC)
        approve = issued.decision == "approve"
        issued.state = PlanState.APPROVED if approve else PlanState.REJECTED
        return Decided(
            decision=issued.decision,
            plan_id=issued.plan.plan_id,
            sha256=issued.plan.sha256,
            approver=issued.approver,
            approval_expires_at=issued.plan.approval_expires_at if approve else None,
            applies="opsbot-apply.service, at once" if approve else "",
            plan=brief_of(issued.plan) if approve else None,
        )

    def follow(self, issued: Issued | None) -> Followed | Refused:
        if issued is None or issued.decided_at is None:
            return Refused(kind="token", reason="this link decided nothing")
        return Followed(
            plan=brief_of(issued.plan),
            decision=issued.decision,
            approver=issued.approver,
            decided_at=issued.decided_at,
            state=issued.state,
            since=issued.decided_at,
            reason=issued.reason,
            verification=issued.verification,
        )

    def serve_one(self, conn: socket.socket) -> None:
        with conn:
            line = LineReader(conn, MAX_APPROVER_MESSAGE_BYTES).readline(5.0)
            if line is None:
                return
            request = parse_approver_request(line)
            if not isinstance(request, View | Decide | Follow):
                reply: Viewed | Decided | Followed | Refused = Refused(
                    kind="request", reason="not yours"
                )
            else:
                self.requests.append(request)
                reply = self.answer(request)
            send_line(conn, encode_message(reply), 5.0)

    @contextlib.contextmanager
    def running(self) -> Iterator[ScriptedApprover]:
        """Listen at ``path`` until the block ends (one thread per connection)."""
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        listener.listen(64)
        stop = threading.Event()

        def accept() -> None:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                threading.Thread(target=self.serve_one, args=(conn,), daemon=True).start()

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
            thread.join(5)
