"""The Submitter over the executor's Unix socket (/run/opsbot/executor.sock).

One connection per submission: send one ``submit`` request (canonical JSON and a
newline), read one reply line of at most 64 KiB, close (shared_io.framing). Anything that
keeps the executor from answering is an ExecutorUnavailable naming the socket path; an
answer that is not a reply to a submission is an ExecutorProtocolError.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    Recorded,
    Reject,
    ReplyModel,
    ReportVerification,
    Revise,
    WireError,
    encode_message,
    parse_reply,
)
from shared_schema import SubmitPlan as SubmitPlanRequest
from shared_schema._model import Model

log = structlog.get_logger(__name__)

DEFAULT_SOCKET_PATH = Path(DEFAULTS["OPSBOT_SOCKET"])
DEFAULT_TIMEOUT_SECONDS = 10.0
HINT = "is opsbot-executor.service running? (systemctl status opsbot-executor)"


class ExecutorClient:
    """Submits plans to the executor over its Unix socket; implements Submitter."""

    def __init__(
        self,
        socket_path: Path = DEFAULT_SOCKET_PATH,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    ) -> None:
        self.socket_path = socket_path
        self.timeout_seconds = timeout_seconds

    def _exchange(self, request: Model) -> ReplyModel:
        try:
            line = framing.exchange(
                self.socket_path,
                encode_message(request),
                limit=REPLY_READ_LIMIT,
                timeout=self.timeout_seconds,
            )
        except PeerProtocolError as exc:
            raise ExecutorProtocolError(f"executor socket {exc.message}") from exc
        except SocketUnavailable as exc:
            raise ExecutorUnavailable(f"executor socket {exc.message}", hint=HINT) from exc
        try:
            return parse_reply(line)
        except WireError as exc:
            raise ExecutorProtocolError(
                f"the executor at {self.socket_path} sent a reply opsbot cannot read: {exc.message}"
            ) from exc

    def _unexpected(self, what: str, reply: ReplyModel) -> ExecutorProtocolError:
        detail = f": {reply.reason}" if isinstance(reply, Reject) else ""
        return ExecutorProtocolError(
            f"the executor at {self.socket_path} answered {what} with {reply.verdict}{detail}"
        )

    def submit(self, plan: dict[str, Any], run_id: str, symptom: str) -> SubmitReply:
        request = SubmitPlanRequest(
            plan=plan, run_id=run_id, symptom=symptom[:SYMPTOM_LIMIT] or None
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
        reply = self._exchange(report)
        if not isinstance(reply, Recorded):
            raise self._unexpected(f"the verification of {report.plan_id}", reply)
        return reply
