"""The one way opsbot runs a program: argv only, never a shell.

:func:`run` starts ``argv`` with stdin from /dev/null and an environment rebuilt from an
allow-list, in a session of its own, so that a timeout kills the whole process group; it
captures stdout and stderr (or both as one stream, in order, with ``merge_stderr``), cuts
each to ``output_limit`` characters with a marker, and logs the command line with
:func:`shlex.join` before it runs and with its exit status after. It never raises for the
program's outcome: a non-zero exit, a timeout or a program that cannot start is in the
:class:`RunResult`, and :meth:`RunResult.check` turns it into a :class:`CommandFailed`
where the caller wants one.

It logs through structlog where the process has it (every daemon, and every console
command that logs imports it before it runs anything), and stays silent where it does
not: a read-only console verb (``opsbot show`` reading a unit's live state) need not pay
50 ms to import a logger it would never configure.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shared_io.errors import CommandFailed

__all__ = ["RunResult", "run"]

#: Characters of stdout and of stderr kept by default.
OUTPUT_LIMIT = 2000
#: The child's environment: exactly this, plus the allow-listed variables below.
BASE_ENVIRONMENT: Mapping[str, str] = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LC_ALL": "C.UTF-8",
    "SYSTEMD_COLORS": "0",
    "SYSTEMD_PAGER": "cat",
    "SYSTEMD_LOG_COLOR": "0",
}
#: Variables passed through from our own environment when set.
PASSED_THROUGH = ("TZ",)


class _Log:
    """``opsbot.run``'s logger, where structlog is loaded (see the module docstring)."""

    def _emit(self, level: str, event: str, **fields: object) -> None:
        structlog = sys.modules.get("structlog")
        if structlog is not None:
            getattr(structlog.get_logger("opsbot.run"), level)(event, **fields)

    def debug(self, event: str, **fields: object) -> None:
        self._emit("debug", event, **fields)

    def warning(self, event: str, **fields: object) -> None:
        self._emit("warning", event, **fields)


log = _Log()


@dataclass(frozen=True)
class RunResult:
    """What one program did.

    ``exit_status`` is None when it timed out or could not start; ``error`` then says
    which. With ``merge_stderr`` both streams are in ``stdout`` and ``stderr`` is empty.
    """

    argv: tuple[str, ...]
    exit_status: int | None
    stdout: str
    stderr: str
    duration: float
    timed_out: bool = False
    error: str = ""
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_status == 0

    @property
    def output(self) -> str:
        """Everything it printed: stdout, then stderr."""
        return self.stdout + self.stderr

    def failure(self) -> str:
        """One line saying how the program failed ('' when it did not)."""
        if self.ok:
            return ""
        if self.exit_status is None:
            return f"{shlex.join(self.argv)}: {self.error}"
        said = (self.stderr.strip() or self.stdout.strip()).splitlines()
        detail = f": {said[-1][:300]}" if said else ""
        return f"{shlex.join(self.argv)} exited with status {self.exit_status}{detail}"

    def check(self) -> RunResult:
        """This result if the program succeeded; CommandFailed saying how it did not."""
        if self.ok:
            return self
        hint = None
        if self.exit_status is None and not self.timed_out:
            hint = f"is {self.argv[0]} installed, and on {BASE_ENVIRONMENT['PATH']}?"
        raise CommandFailed(self.failure(), hint=hint)


def environment() -> dict[str, str]:
    """The whole environment of a child: nothing else is inherited from ours."""
    env = dict(BASE_ENVIRONMENT)
    env.update({key: os.environ[key] for key in PASSED_THROUGH if key in os.environ})
    return env


def cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` if it fits in ``limit`` characters, else its start and a marker that
    together fit in ``limit``; and whether it was cut."""
    if len(text) <= limit:
        return text, False
    widest = f"\n[... {len(text)} characters cut]"  # no count is longer than this one
    keep = max(0, limit - len(widest))
    return text[:keep] + f"\n[... {len(text) - keep} characters cut]", True


def _stderr(through: bool) -> int | None:
    """Popen's ``stderr``: captured, or (None) the program writes to ours."""
    return None if through else subprocess.PIPE


def run(
    argv: Sequence[str],
    *,
    timeout: float,
    output_limit: int = OUTPUT_LIMIT,
    merge_stderr: bool = False,
    stderr_through: bool = False,
) -> RunResult:
    """Run ``argv`` and return what it did (see the module docstring).

    ``stderr_through``: the program's stderr is ours, not captured (a long program's
    progress lines reach the operator's terminal as they come; ``stderr`` is empty)."""
    if isinstance(argv, str | bytes) or not argv:
        raise TypeError("run() takes a non-empty argv list, never a command string")
    args = tuple(argv)
    line = shlex.join(args)
    log.debug("command.started", argv=line, timeout=timeout)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT if merge_stderr else _stderr(stderr_through),
            env=environment(),
            start_new_session=True,
        )
    except OSError as exc:
        result = RunResult(
            args,
            None,
            "",
            "",
            time.monotonic() - started,
            error=f"cannot run {args[0]}: {exc.strerror or exc}",
        )
        log.warning("command.unstartable", argv=line, error=result.error)
        return result
    timed_out = False
    with proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
    stdout, cut_out = cut(out.decode("utf-8", "replace"), output_limit)
    stderr, cut_err = cut((err or b"").decode("utf-8", "replace"), output_limit)
    result = RunResult(
        argv=args,
        exit_status=None if timed_out else proc.returncode,
        stdout=stdout,
        stderr=stderr,
        duration=time.monotonic() - started,
        timed_out=timed_out,
        error=f"timed out after {timeout:g}s" if timed_out else "",
        truncated=cut_out or cut_err,
    )
    log.debug(
        "command.finished",
        argv=line,
        exit_status=result.exit_status,
        timed_out=timed_out or None,
        duration_ms=round(result.duration * 1000),
    )
    return result


def page(argv: Sequence[str], text: str, env: Mapping[str, str]) -> bool:
    """Show ``text`` through the pager ``argv`` on this terminal (it inherits stdout,
    stderr and the session, as systemctl's pager does) and wait for it to quit; False
    if it could not start (the caller prints ``text`` instead). The one program opsbot
    starts that is not :func:`run`'s: a pager needs the terminal, not a capture."""
    try:
        pager = subprocess.Popen(list(argv), stdin=subprocess.PIPE, env=dict(env))
    except OSError:
        return False
    assert pager.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # q before the end: the rest is not wanted
        pager.stdin.write(text.encode("utf-8", "replace"))
    with contextlib.suppress(BrokenPipeError):
        pager.stdin.close()
    pager.wait()
    return True
