"""The one subprocess runner of every opsbot unit: argv only, no shell, stdin from
/dev/null, an allow-listed environment, bounded time and output, the whole process group
killed on timeout, the command line logged. It reports a program's failure; it never
raises for it, unless asked to with check()."""

from __future__ import annotations

import os
import sys
import time

import pytest
import structlog

from shared_io.errors import CommandFailed
from shared_io.run import OUTPUT_LIMIT, run


def test_output_and_exit_status_are_recorded() -> None:
    """stdout, stderr and the exit status are captured, each on its own."""
    result = run(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"], timeout=10)
    assert (result.stdout, result.stderr, result.exit_status) == ("out\n", "err\n", 3)
    assert result.output == "out\nerr\n"
    assert not result.ok and not result.timed_out and result.error == ""
    assert (
        result.failure() == "/bin/sh -c 'echo out; echo err >&2; exit 3' exited with status 3: err"
    )


def test_merged_streams_keep_their_order() -> None:
    """With merge_stderr, what the program wrote to both streams is one text, in order
    (what a plan step's record shows)."""
    result = run(["sh", "-c", "echo one; echo two >&2; echo three"], timeout=10, merge_stderr=True)
    assert (result.stdout, result.stderr) == ("one\ntwo\nthree\n", "")


def test_a_successful_program_is_ok_and_check_passes_it_through() -> None:
    """Exit status 0 is ok; check() returns the result itself."""
    result = run(["echo", "nginx.service restarted"], timeout=10)
    assert (result.ok, result.exit_status, result.stdout) == (True, 0, "nginx.service restarted\n")
    assert result.check() is result


def test_check_turns_a_failure_into_one_clear_line() -> None:
    """check() raises CommandFailed saying how the program failed."""
    with pytest.raises(CommandFailed, match=r"^false exited with status 1$"):
        run(["false"], timeout=10).check()


def test_arguments_are_never_interpreted_by_a_shell() -> None:
    """Shell syntax in an argument is passed through literally."""
    result = run(["echo", "$(id -u); rm -rf / ; `reboot`"], timeout=10)
    assert result.stdout == "$(id -u); rm -rf / ; `reboot`\n"


def test_stdin_is_dev_null() -> None:
    """A program that reads stdin gets end-of-file at once, rather than hanging on ours."""
    result = run(["cat"], timeout=5)
    assert (result.exit_status, result.stdout, result.timed_out) == (0, "", False)


def test_long_output_is_cut_to_the_limit_with_a_marker() -> None:
    """Output longer than 2000 characters (here 5001) is cut to 2000, ending in a marker
    that says how many characters were cut; output_limit raises the bound."""
    result = run([sys.executable, "-c", "print('x' * 5000)"], timeout=10)
    assert OUTPUT_LIMIT == 2000
    assert len(result.stdout) == OUTPUT_LIMIT and result.truncated
    assert result.stdout.startswith("x" * 1900)
    assert result.stdout.endswith("\n[... 3027 characters cut]")
    assert not run(["seq", "1", "2000"], timeout=10, output_limit=100_000).truncated


def test_output_at_the_limit_is_kept_whole() -> None:
    """Exactly 2000 characters are not touched."""
    result = run([sys.executable, "-c", "import sys; sys.stdout.write('y' * 2000)"], timeout=10)
    assert result.stdout == "y" * 2000 and not result.truncated


def test_a_program_that_runs_too_long_is_killed_with_its_children(tmp_path: object) -> None:
    """``sh -c 'sleep 30 & sleep 30'`` with a 0.3 s timeout: the result says it timed out,
    has no exit status, came back long before 30 s, and the child sleep in its process
    group is gone too (a timeout kills the whole group, not just the shell)."""
    started = time.monotonic()
    result = run(["sh", "-c", "sleep 30 & echo $!; wait"], timeout=0.3)
    assert result.timed_out and result.exit_status is None and not result.ok
    assert result.error == "timed out after 0.3s"
    assert time.monotonic() - started < 10
    child = int(result.stdout.split()[0])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the child {child} of the timed-out command is still running")
    with pytest.raises(CommandFailed, match="timed out after 0.3s"):
        result.check()


def test_a_missing_program_is_a_result_not_an_exception() -> None:
    """A binary that does not exist gives a result with an error line; check() makes it a
    CommandFailed with a hint."""
    result = run(["/nonexistent/opsbot-no-such-tool", "--version"], timeout=5)
    assert result.exit_status is None and not result.ok and not result.timed_out
    assert result.error.startswith("cannot run /nonexistent/opsbot-no-such-tool: ")
    assert "No such file or directory" in result.error
    with pytest.raises(CommandFailed) as caught:
        result.check()
    assert caught.value.hint is not None and "installed" in caught.value.hint


@pytest.mark.parametrize("argv", ["systemctl restart nginx.service", b"id", [], ()])
def test_a_command_string_or_an_empty_argv_is_a_type_error(argv: object) -> None:
    """A string (which would need a shell to split) or nothing to run is a programming
    error, raised at once."""
    with pytest.raises(TypeError, match="non-empty argv list, never a command string"):
        run(argv, timeout=5)  # type: ignore[arg-type]


def test_the_environment_is_rebuilt_from_an_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child sees a fixed PATH and locale, systemd's colour and pager switched off,
    and TZ passed through; nothing else from our environment (no HOME, no secrets)."""
    monkeypatch.setenv("OPSBOT_TEST_API_KEY", "sk-secret-do-not-leak")
    monkeypatch.setenv("HOME", "/root")
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")
    monkeypatch.setenv("TZ", "Europe/Berlin")
    result = run(["env"], timeout=5)
    env = dict(line.split("=", 1) for line in result.stdout.splitlines())
    assert env == {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LC_ALL": "C.UTF-8",
        "SYSTEMD_COLORS": "0",
        "SYSTEMD_PAGER": "cat",
        "SYSTEMD_LOG_COLOR": "0",
        "TZ": "Europe/Berlin",
    }


def test_argv_is_logged_with_shlex_join() -> None:
    """The command line is logged (shlex.join) before it runs, and with its exit status
    after."""
    with structlog.testing.capture_logs() as logs:
        run(["echo", "two words", "it's"], timeout=5)
    started, finished = (e for e in logs if e["event"].startswith("command."))
    assert started["event"] == "command.started"
    assert started["argv"] == "echo 'two words' 'it'\"'\"'s'"
    assert finished["event"] == "command.finished" and finished["exit_status"] == 0
