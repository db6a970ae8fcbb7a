"""A subverted diagnose process flooding the executor with plans, run inside the
container as the diagnose user:

    python plan_flood.py SOCKET COUNT UNIT [PAUSE]

Submits COUNT valid plans, each with a goal of its own (so none is a duplicate), one
connection each, as fast as the executor answers (or PAUSE seconds apart: a burst that
lasts). Prints one JSON object: how many were accepted and rejected, the first
rejection's reason, the ids of the plans accepted, and the seconds it took.
"""

from __future__ import annotations

import json
import secrets
import sys
import time

from shared_io.framing import exchange

REPLY_LIMIT = 1024 * 1024


def main() -> int:
    path, count, unit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    pause = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    verdicts: dict[str, int] = {}
    accepted: list[str] = []
    first_reject = ""
    started = time.monotonic()
    for number in range(count):
        if number and pause:
            time.sleep(pause)
        step = {"tool": "restart_unit", "args": {"unit": unit}, "reason": "flood"}
        goal = f"flood {number} {secrets.token_hex(4)}"
        message = {"v": 1, "op": "submit", "plan": {"goal": goal, "steps": [step]}}
        line = exchange(path, json.dumps(message).encode() + b"\n", limit=REPLY_LIMIT, timeout=30)
        reply = json.loads(line)
        verdict = str(reply.get("verdict") or reply.get("op"))
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        if verdict == "ACCEPT":
            accepted.append(str(reply.get("plan_id")))
        if verdict == "REJECT" and not first_reject:
            first_reject = str(reply.get("reason", ""))
    said = {
        "verdicts": verdicts,
        "first_reject": first_reject,
        "plan_ids": accepted,
        "seconds": round(time.monotonic() - started, 2),
    }
    json.dump(said, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
