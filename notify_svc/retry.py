"""Each message on each channel: up to ``[notify] attempts`` tries, waiting 1 s, 2 s,
4 s ... (at most :data:`MAX_DELAY_SECONDS`) between them; a permanent failure (an HTTP
4xx, an SMTP 5xx) ends the tries at once, and so does the end of the run's time (the
run stops trying before systemd's TimeoutStartSec= would kill it, so that every message
it could not send is logged as such). The sleep and the clock are injected, so tests do
not wait.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from notify_svc.errors import DeliveryFailed

MAX_DELAY_SECONDS = 30.0

log = structlog.get_logger("opsbot.notify")


def backoff(failed_tries: int, cap: float = MAX_DELAY_SECONDS) -> float:
    """The wait after the ``failed_tries``-th failed try: 1, 2, 4, ... capped."""
    return float(min(cap, 2.0 ** (failed_tries - 1)))


@dataclass(frozen=True)
class Delivery:
    ok: bool
    tries: int
    reason: str = ""


def deliver(
    send: Callable[[], None],
    *,
    attempts: int,
    sleep: Callable[[float], None],
    channel: str,
    kind: str,
    approver: str,
    plan_id: str,
    time_left: Callable[[], float] = lambda: math.inf,
) -> Delivery:
    """Try ``send`` up to ``attempts`` times, while ``time_left()`` (seconds of the
    run's budget) allows; never raises. Logs ``notify.sent``, each ``notify.retry``, or
    ``notify.failed`` with the channel and the last reason."""
    fields = {"plan_id": plan_id, "channel": channel, "kind": kind, "approver": approver}
    reason = ""
    for attempt in range(1, attempts + 1):
        if time_left() <= 0:
            reason = (reason + "; " if reason else "") + "the run's time is up"
            log.error("notify.failed", tries=attempt - 1, reason=reason, permanent=False, **fields)
            return Delivery(False, attempt - 1, reason)
        try:
            send()
        except DeliveryFailed as exc:
            reason, permanent = exc.reason, exc.permanent
        except Exception as exc:  # a bug in a channel costs its message, not the run
            reason, permanent = f"internal error: {type(exc).__name__}: {exc}"[:300], True
        else:
            log.info("notify.sent", tries=attempt, **fields)
            return Delivery(True, attempt)
        if permanent or attempt == attempts:
            log.error("notify.failed", tries=attempt, reason=reason, permanent=permanent, **fields)
            return Delivery(False, attempt, reason)
        delay = backoff(attempt)
        if delay >= time_left():
            reason += "; no time left for another try"
            log.error("notify.failed", tries=attempt, reason=reason, permanent=False, **fields)
            return Delivery(False, attempt, reason)
        log.warning("notify.retry", tries=attempt, reason=reason, delay=delay, **fields)
        sleep(delay)
    raise AssertionError("unreachable: attempts >= 1")  # pragma: no cover
