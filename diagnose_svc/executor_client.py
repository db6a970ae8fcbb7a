"""The Submitter over the executor's Unix socket (/run/opsbot/executor.sock).

One connection per submission: send one ``submit`` request (canonical JSON and a
newline), read one reply line of at most 64 KiB, close (shared_io.framing). An executor
that is busy (its REJECT starts "executor busy"), refuses the connection or does not
answer in time is asked again after a growing pause (:class:`Retry`: at most
``attempts`` tries within ``budget_seconds``, each retry logged as ``executor.retry``);
a request that may not be sent twice (a verification report) is retried only when the
executor cannot have read it. What still keeps the executor from answering is an
ExecutorUnavailable naming the socket path; an answer that is not a reply to a
submission is an ExecutorProtocolError.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from diagnose_svc.errors import ExecutorProtocolError, ExecutorUnavailable
from diagnose_svc.limits import REPLY_READ_LIMIT, SYMPTOM_LIMIT
from diagnose_svc.submitter import SubmitReply
from shared_io import framing
from shared_io.errors import PeerProtocolError, SocketUnavailable
from shared_io.paths import DEFAULTS
from shared_schema import (
    Accept,
    Pending,
    PendingVerification,
    Plan,
    Recorded,
    Reject,
    ReplyModel,
    ReportVerification,
    Revise,
    SubmitPlan as SubmitPlanRequest,
    WireError,
    encode_message,
    parse_reply,
)
from shared_schema._model import Model

__all__ = ["ExecutorClient"]

#: What the wire takes of a run's evidence (SubmitPlan.evidence): two lines of 300 characters.
EVIDENCE_LINES, EVIDENCE_CHARS = 2, 300

log = structlog.get_logger(__name__)

DEFAULT_SOCKET_PATH = Path(DEFAULTS["OPSBOT_SOCKET"])
DEFAULT_TIMEOUT_SECONDS = 10.0
HINT = "is opsbot-executor.service running? (systemctl status opsbot-executor)"
#: How every busy refusal of the executor begins (executor_svc.daemon.BUSY).
BUSY_PREFIX = "executor busy"
#: Failures to reach the executor worth another try; "timeout" only for a request that
#: may be sent twice (a connection refused or a busy answer were never read).
TRANSIENT = frozenset({"refused", "busy"})


@dataclass(frozen=True)
class Retry:
    """How often, and for how long, to ask a busy or absent executor again: pauses of
    ``first_delay`` seconds doubling up to ``max_delay``, at most ``attempts`` tries, and
    no try that would start after ``budget_seconds``."""

    attempts: int = 6
    first_delay: float = 0.1
    max_delay: float = 2.0
    budget_seconds: float = 30.0

    def delay(self, retry: int) -> float:
        """The pause before retry number ``retry`` (1 for the first)."""
        return min(self.max_delay, self.first_delay * 2.0 ** (retry - 1))


NO_RETRY = Retry(attempts=1)


class _Busy(Exception):
    def __init__(self, reply: Reject) -> None:
        super().__init__(reply.reason)
        self.reply = reply


class ExecutorClient:
    """Submits plans to the executor over its Unix socket; implements Submitter."""

    def __init__(
        self,
        socket_path: Path = DEFAULT_SOCKET_PATH,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        *,
        retry: Retry = Retry(),
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.socket_path = socket_path
        self.timeout_seconds = timeout_seconds
        self.retry = retry
        self.sleep = sleep
        self.clock = clock

    def _once(self, request: Model) -> ReplyModel:
        line = framing.exchange(
            self.socket_path,
            encode_message(request),
            limit=REPLY_READ_LIMIT,
            timeout=self.timeout_seconds,
        )
        try:
            reply = parse_reply(line)
        except WireError as exc:
            raise ExecutorProtocolError(
                f"the executor at {self.socket_path} sent a reply opsbot cannot read: {exc.message}"
            ) from exc
        if isinstance(reply, Reject) and reply.reason.startswith(BUSY_PREFIX):
            raise _Busy(reply)
        return reply

    def _exchange(self, request: Model, *, idempotent: bool = True) -> ReplyModel:
        """One request, one reply; asked again while the executor is busy or away."""
        transient = TRANSIENT | {"timeout"} if idempotent else TRANSIENT
        started = self.clock()
        attempt = 1
        while True:
            try:
                return self._once(request)
            except PeerProtocolError as exc:
                raise ExecutorProtocolError(f"executor socket {exc.message}") from exc
            except _Busy as exc:
                failure: _Busy | SocketUnavailable = exc
                reason = "busy"
            except SocketUnavailable as exc:
                failure = exc
                reason = exc.reason
            delay = self.retry.delay(attempt)
            elapsed = self.clock() - started
            if (
                reason not in transient
                or attempt >= self.retry.attempts
                or elapsed + delay > self.retry.budget_seconds
            ):
                if attempt > 1:
                    log.error(
                        "executor.gave_up",
                        attempts=attempt,
                        seconds=round(elapsed, 2),
                        reason=reason,
                        op=getattr(request, "op", None),
                    )
                if isinstance(failure, _Busy):
                    return failure.reply
                raise ExecutorUnavailable(
                    f"executor socket {failure.message}", hint=HINT
                ) from failure
            log.warning(
                "executor.retry",
                attempt=attempt,
                reason=reason,
                delay_seconds=delay,
                op=getattr(request, "op", None),
            )
            self.sleep(delay)
            attempt += 1

    def _unexpected(self, what: str, reply: ReplyModel) -> ExecutorProtocolError:
        detail = f": {reply.reason}" if isinstance(reply, Reject) else ""
        return ExecutorProtocolError(
            f"the executor at {self.socket_path} answered {what} with {reply.verdict}{detail}"
        )

    def submit(
        self, plan: Plan, run_id: str, symptom: str, evidence: Sequence[str] = ()
    ) -> SubmitReply:
        """``plan`` written on the wire once, in its canonical form (what the executor
        stores and fingerprints)."""
        request = SubmitPlanRequest(
            plan=plan.model_dump(mode="json", exclude_none=True),
            run_id=run_id,
            symptom=symptom[:SYMPTOM_LIMIT] or None,
            evidence=[line[:EVIDENCE_CHARS] for line in evidence[:EVIDENCE_LINES]],
        )
        reply = self._exchange(request)
        if not isinstance(reply, Accept | Revise | Reject):
            raise self._unexpected("a submission", reply)
        log.info("diagnose.submitted", run_id=run_id, verdict=reply.verdict)
        return reply

    def pending(self) -> Pending:
        """The applied plans that wait for verification (opsbot-verify)."""
        reply = self._exchange(PendingVerification())
        if not isinstance(reply, Pending):
            raise self._unexpected("pending", reply)
        return reply

    def report(self, report: ReportVerification) -> Recorded:
        """Report whether an applied plan's service came back."""
        reply = self._exchange(report, idempotent=False)
        if not isinstance(reply, Recorded):
            raise self._unexpected(f"the verification of {report.plan_id}", reply)
        return reply
