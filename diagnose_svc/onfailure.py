"""``opsbot-onfailure@UNIT``: a unit failed; have it diagnosed, as ``opsbot-diagnose run``.

    python -m diagnose_svc.onfailure [--symptom TEXT] UNIT

Loading the diagnosis (the runbook, the read tools, the models) cost each failure about
half a second before its first read. The diagnosis service is already loaded where a
failure came less than its idle timeout after the last (and socket-activated where not):
so this process, which runs as the same user in the same sandbox, only asks it over
/run/opsbot/diagnose.sock and writes what it streams to its own journal: one line per
event, then the verdict's words. It imports no model and no policy. The service answers a
request of its own user as a unit's failure (diagnose_svc.server): as ``run`` does,
whatever the scope says.

Where the service cannot be reached, or refuses (busy: the runs it takes at once; a
broken config), the diagnosis runs here, as ``opsbot-diagnose run`` (a failure is never
left undiagnosed because the service is away). The exit status is ``run``'s: 69 when the
policy or the executor failed the diagnosis.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from diagnose_svc.unit_names import unit_arg
from shared_io.errors import OpsbotError
from shared_io.framing import stream
from shared_schema.messages import MAX_MESSAGE_BYTES, decode_json_object

__all__ = ["EX_UNAVAILABLE", "SYMPTOM", "ask_service", "main"]

SYMPTOM = "systemd marked the unit failed"
EX_UNAVAILABLE = 69
#: Endings that mean something outside diagnosis is broken (as ``run`` exits on them).
FAILED_ENDINGS = frozenset({"policy_error", "executor_error"})
#: Seconds the service may be silent between two lines of one diagnosis.
LINE_TIMEOUT = 300.0
DEFAULT_SOCKET = "/run/opsbot/diagnose.sock"


class NotAnswered(Exception):
    """The service gave no verdict; the diagnosis runs here instead. ``said``: why."""

    def __init__(self, said: str) -> None:
        super().__init__(said)
        self.said = said


def _words(fields: dict[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in fields.items() if value not in (None, ""))


def verdict_lines(verdict: dict[str, Any]) -> list[str]:
    """The verdict in words, as ``opsbot-diagnose run`` prints it."""
    lines = [
        f"diagnosis {verdict.get('run_id')} of {verdict.get('unit')}: "
        f"{verdict.get('steps_used')} steps"
    ]
    plan = verdict.get("plan")
    if verdict.get("kind") == "plan" and isinstance(plan, dict):
        lines.append(
            f"plan {verdict.get('plan_id')} proposed (sha256 {verdict.get('sha256')}): "
            f"{plan.get('goal')}"
        )
        lines.append(f"review and approve it with: sudo opsbot approve {verdict.get('plan_id')}")
    else:
        lines.append(str(verdict.get("text", "")))
    return lines


def ask_service(
    unit: str, symptom: str, socket_path: str | Path, lines: Iterable[bytes] | None = None
) -> tuple[list[str], int]:
    """The service's diagnosis of ``unit``: what to print, and the exit status; NotAnswered
    where there is no verdict. ``lines`` stands in for the socket's replies (a test)."""
    request = {"v": 1, "op": "diagnose", "unit": unit, "symptom": symptom}
    message = (json.dumps(request) + "\n").encode()
    printed: list[str] = []
    try:
        replies = (
            lines
            if lines is not None
            else stream(socket_path, message, limit=MAX_MESSAGE_BYTES, timeout=LINE_TIMEOUT)
        )
        for line in replies:
            item = decode_json_object(line)
            event = str(item.pop("event", ""))
            if event == "diagnose.verdict":
                verdict = item.get("verdict")
                if not isinstance(verdict, dict):
                    raise NotAnswered("the service sent a verdict that is not one")
                printed.extend(verdict_lines(verdict))
                status = EX_UNAVAILABLE if verdict.get("ended_by") in FAILED_ENDINGS else 0
                return printed, status
            if event == "diagnose.error":
                raise NotAnswered(f"the diagnosis service refused: {item.get('message', '')}")
            printed.append(f"{event} {_words(item)}"[:2000])
    except (OpsbotError, OSError, ValueError) as exc:
        raise NotAnswered(f"the diagnosis service is unreachable: {exc}") from exc
    raise NotAnswered("the diagnosis service closed the connection before its verdict")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m diagnose_svc.onfailure",
        description="Have a failed unit diagnosed by opsbot-diagnose.service (here, where it "
        "cannot be asked): what opsbot-onfailure@.service runs.",
    )
    parser.add_argument("unit", help="the unit that failed (a name without a type: a service)")
    parser.add_argument("--symptom", default=SYMPTOM, help="what was observed, in words")
    args = parser.parse_args(argv)
    name = args.unit
    unit = unit_arg(name)
    socket_path = os.environ.get("OPSBOT_DIAGNOSE_SOCKET") or DEFAULT_SOCKET
    try:
        printed, status = ask_service(unit, args.symptom, socket_path)
    except NotAnswered as exc:
        print(f"opsbot-onfailure: {exc.said}; diagnosing here", file=sys.stderr, flush=True)
        from diagnose_svc.daemon import main as diagnose_main

        return diagnose_main(["run", "--symptom", args.symptom, name])
    print("\n".join(printed), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
