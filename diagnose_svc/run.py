"""The one subprocess runner of the diagnosis service.

Every program this service runs goes through :func:`run`: an argv list (never a shell),
stdin from /dev/null, an environment rebuilt from an allow-list, a timeout after which the
whole process group is killed, stdout and stderr captured and cut to a bound, and the
command line logged with :func:`shlex.join` before it runs and with its exit status after.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from diagnose_svc.errors import CommandFailed
from diagnose_svc.limits import COMMAND_OUTPUT_LIMIT, COMMAND_TIMEOUT_SECONDS

log = structlog.get_logger(__name__)

#: The whole environment of a child: nothing is inherited from ours.
ENVIRONMENT: dict[str, str] = {
    "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "SYSTEMD_COLORS": "0",
    "SYSTEMD_PAGER": "cat",
}


@dataclass(frozen=True)
class RunResult:
    """What one command did: its exit status (None if it was killed on timeout) and output."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_seconds: float
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def failure(self) -> str:
        """One line saying how the command failed ('' when it did not)."""
        if self.timed_out:
            return f"{shlex.join(self.argv)} timed out after {self.duration_seconds:.1f}s"
        if self.returncode == 0:
            return ""
        said = (self.stderr.strip() or self.stdout.strip()).splitlines()
        detail = f": {said[-1][:300]}" if said else ""
        return f"{shlex.join(self.argv)} exited with status {self.returncode}{detail}"

    def check(self) -> RunResult:
        """Return self if the command succeeded; raise CommandFailed saying how it did not."""
        if not self.ok:
            raise CommandFailed(self.failure())
        return self


def _cut(data: bytes, limit: int) -> tuple[str, bool]:
    text = data.decode("utf-8", errors="replace")
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n[... {len(text) - limit} more characters cut]", True


def run(
    argv: Sequence[str],
    *,
    timeout: float = COMMAND_TIMEOUT_SECONDS,
    output_limit: int = COMMAND_OUTPUT_LIMIT,
) -> RunResult:
    """Run ``argv`` and return what it did; raise CommandFailed only if it cannot start.

    A non-zero exit or a timeout is recorded in the result, not raised: callers decide,
    usually with :meth:`RunResult.check`.
    """
    if isinstance(argv, str | bytes):
        raise TypeError("argv must be a sequence of strings, not a string")
    args = tuple(argv)
    line = shlex.join(args)
    log.debug("command.started", argv=line)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(ENVIRONMENT),
            start_new_session=True,
        )
    except OSError as exc:
        log.warning("command.unstartable", argv=line, error=str(exc))
        raise CommandFailed(
            f"cannot run {args[0]!r}: {exc.strerror or exc}",
            hint="is it installed, and in /usr/sbin:/usr/bin:/sbin:/bin?",
        ) from exc
    timed_out = False
    with proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
    duration = time.monotonic() - started
    stdout, cut_out = _cut(out, output_limit)
    stderr, cut_err = _cut(err, output_limit)
    result = RunResult(
        argv=args,
        returncode=None if timed_out else proc.returncode,
        stdout=stdout,
        stderr=stderr,
        timed_out=timed_out,
        duration_seconds=duration,
        truncated=cut_out or cut_err,
    )
    log.info(
        "command.finished",
        argv=line,
        status=result.returncode,
        timed_out=timed_out,
        duration_ms=round(duration * 1000),
    )
    return result
