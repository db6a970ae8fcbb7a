"""An executor socket that answers with canned bytes: for what a real executor never
sends (a malformed reply), and for a console started as a process that must find an
answer without a store behind it (the console's tests, bench/console_startup.py). And
the models' replies (PlanDetail, PlanList), built as executor_svc/service.py builds
them."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from plans import step_argv
from shared_schema import (
    Plan,
    PlanDetail,
    PlanList,
    PlanState,
    PlanSummary,
    StepRecord,
    Verification,
    encode_message,
)

PLAN_ID = "20261201-152001-0a1b2c3d"
AT = datetime(2026, 12, 1, 15, 20, 1, tzinfo=UTC)


def summary_of(
    plan: Plan,
    state: PlanState = PlanState.PROPOSED,
    plan_id: str = PLAN_ID,
    at: datetime = AT,
    **extra: Any,
) -> PlanSummary:
    return PlanSummary(
        plan_id=plan_id,
        state=state,
        sha256=plan.fingerprint(),
        goal=plan.goal,
        units=plan.units(),
        submitted_at=at,
        submitted_by="opsbot-diagnose",
        **extra,
    )


def detail_of(
    plan: Plan,
    state: PlanState = PlanState.PROPOSED,
    steps: list[StepRecord] | None = None,
    verification: Verification | None = None,
    history: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> PlanDetail:
    """The executor's PLAN reply for ``plan`` (service.py builds it the same way)."""
    return PlanDetail(
        summary=summary_of(plan, state, verification=verification, **extra),
        plan=plan,
        argv=step_argv(plan),
        history=history or [{"at": "2026-12-01T15:20:01Z", "state": "PROPOSED", "by": "x"}],
        steps=steps or [],
    )


def listing_of(*summaries: PlanSummary) -> PlanList:
    return PlanList(plans=list(summaries))


@contextmanager
def canned_executor(path: Path, reply: bytes | PlanDetail | PlanList) -> Iterator[list[bytes]]:
    """Serve ``reply`` to every connection on ``path``; yields the requests received."""
    line = reply if isinstance(reply, bytes) else encode_message(reply)
    received: list[bytes] = []
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                received.append(data)
                conn.sendall(line)

    thread = threading.Thread(target=serve, name="canned-executor", daemon=True)
    thread.start()
    try:
        yield received
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()
        path.unlink(missing_ok=True)
