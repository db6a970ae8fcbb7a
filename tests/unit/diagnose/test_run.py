"""The one subprocess runner: argv only, clean environment, bounded output, logged."""

from __future__ import annotations

import pytest
import structlog

from diagnose_svc.errors import CommandFailed
from diagnose_svc.run import ENVIRONMENT, run


def test_output_and_exit_status_are_recorded() -> None:
    """stdout, stderr and the exit status of a command are captured."""
    result = run(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.stdout, result.stderr, result.returncode) == ("out\n", "err\n", 3)
    assert not result.ok and not result.timed_out
    assert (
        result.failure() == "/bin/sh -c 'echo out; echo err >&2; exit 3' exited with status 3: err"
    )


def test_check_raises_one_clear_line() -> None:
    """check() passes a success through and turns a failure into CommandFailed."""
    assert run(["true"]).check().ok
    with pytest.raises(CommandFailed, match=r"^false exited with status 1$"):
        run(["false"]).check()


def test_environment_is_rebuilt_from_the_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child sees exactly the allow-listed environment, nothing inherited."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    result = run(["env"])
    seen = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert seen == ENVIRONMENT
    assert seen["PATH"] == "/usr/sbin:/usr/bin:/sbin:/bin"
    assert (seen["SYSTEMD_COLORS"], seen["SYSTEMD_PAGER"], seen["LANG"]) == ("0", "cat", "C.UTF-8")


def test_stdin_is_dev_null() -> None:
    """A command reading stdin gets end-of-file at once."""
    result = run(["cat"], timeout=5)
    assert result.ok and result.stdout == ""


def test_timeout_kills_the_command() -> None:
    """A command that outlives its timeout is killed and recorded as timed out."""
    result = run(["sleep", "30"], timeout=0.2)
    assert result.timed_out and result.returncode is None
    assert result.duration_seconds < 5
    assert result.failure() == f"sleep 30 timed out after {result.duration_seconds:.1f}s"


def test_output_is_cut_at_2000_characters() -> None:
    """Captured output is cut to 2000 characters by default, and marked as cut."""
    result = run(["seq", "1", "2000"])
    assert result.truncated
    assert result.stdout.startswith("1\n2\n")
    assert result.stdout.endswith("more characters cut]")
    assert len(result.stdout) < 2100
    assert not run(["seq", "1", "2000"], output_limit=100_000).truncated


def test_argv_is_logged_with_shlex_join() -> None:
    """The command line is logged (shlex.join) before it runs and with its status after."""
    with structlog.testing.capture_logs() as logs:
        run(["echo", "two words", "it's"])
    started, finished = (e for e in logs if e["event"].startswith("command."))
    assert started["event"] == "command.started"
    assert started["argv"] == "echo 'two words' 'it'\"'\"'s'"
    assert finished["event"] == "command.finished" and finished["status"] == 0


def test_a_string_is_not_an_argv() -> None:
    """A command line as one string is refused: argv lists only, never a shell."""
    with pytest.raises(TypeError):
        run("echo hello")  # type: ignore[arg-type]


def test_missing_program_is_a_command_failed() -> None:
    """A program that does not exist is a CommandFailed with a hint, not an OSError."""
    with pytest.raises(CommandFailed) as caught:
        run(["no-such-program-opsbot"])
    assert caught.value.message.startswith("cannot run 'no-such-program-opsbot'")
    assert caught.value.hint is not None
