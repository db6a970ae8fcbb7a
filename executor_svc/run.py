"""The one way this service runs a program: argv only, no shell, bounded in time and output.

stdin is /dev/null, the environment is rebuilt from an allow-list, the argv is logged
with ``shlex.join`` before it runs, and the result records exit status, duration and
output truncated to ``OUTPUT_LIMIT`` characters.
"""

import os
import shlex
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

OUTPUT_LIMIT = 2000
_ENV_ALLOWED = ("LANG", "TZ")
_BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LC_ALL": "C.UTF-8",
    "SYSTEMD_COLORS": "0",
    "SYSTEMD_PAGER": "cat",
    "SYSTEMD_LOG_COLOR": "0",
}

log = structlog.get_logger("opsbot.executor.run")


@dataclass(frozen=True)
class RunResult:
    argv: tuple[str, ...]
    exit_status: int | None  # None when it timed out or could not start
    output: str
    duration: float
    timed_out: bool = False
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


def truncate(text: str, limit: int = OUTPUT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    marker = f"\n[... {len(text) - limit} characters cut]"
    return text[: max(0, limit - len(marker))] + marker


def _env() -> dict[str, str]:
    env = dict(_BASE_ENV)
    env.update({key: os.environ[key] for key in _ENV_ALLOWED if key in os.environ})
    return env


def run(argv: Sequence[str], *, timeout: float) -> RunResult:
    """Run ``argv`` with stdout and stderr captured together; never raises for its outcome."""
    if isinstance(argv, str) or not argv:
        raise TypeError("run() takes a non-empty argv list, never a command string")
    args = tuple(argv)
    log.debug("run.started", argv=shlex.join(args), timeout=timeout)
    started = time.monotonic()
    try:
        proc = subprocess.run(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=_env(),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.output.decode("utf-8", "replace") if isinstance(exc.output, bytes) else ""
        result = RunResult(
            args,
            None,
            truncate(output),
            time.monotonic() - started,
            True,
            f"timed out after {timeout:g}s",
        )
    except OSError as exc:
        result = RunResult(
            args, None, "", time.monotonic() - started, False, f"cannot run {args[0]}: {exc}"
        )
    else:
        result = RunResult(
            args,
            proc.returncode,
            truncate(proc.stdout.decode("utf-8", "replace")),
            time.monotonic() - started,
        )
    log.debug(
        "run.finished",
        argv=shlex.join(args),
        exit_status=result.exit_status,
        duration=round(result.duration, 3),
        error=result.error,
    )
    return result
