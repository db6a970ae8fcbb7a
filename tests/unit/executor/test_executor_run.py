"""The one subprocess runner: argv only, no shell, stdin from /dev/null, an allow-listed
environment, bounded time and output. It reports a program's failure; it never raises
for it."""

import sys

import pytest

from executor_svc.run import OUTPUT_LIMIT, run


def test_an_argv_runs_and_its_output_and_status_are_captured() -> None:
    """stdout and stderr come back together, with the exit status."""
    result = run(["sh", "-c", 'echo "to stdout"; echo "to stderr" >&2; exit 3'], timeout=10)
    assert result.argv == ("sh", "-c", 'echo "to stdout"; echo "to stderr" >&2; exit 3')
    assert result.exit_status == 3
    assert not result.ok
    assert result.output == "to stdout\nto stderr\n"
    assert not result.timed_out
    assert result.error == ""


def test_a_successful_program_is_ok() -> None:
    """Exit status 0 is ok."""
    result = run(["echo", "nginx.service restarted"], timeout=10)
    assert (result.ok, result.exit_status, result.output) == (True, 0, "nginx.service restarted\n")


def test_arguments_are_never_interpreted_by_a_shell() -> None:
    """Shell syntax in an argument is passed through literally."""
    result = run(["echo", "$(id -u); rm -rf / ; `reboot`"], timeout=10)
    assert result.output == "$(id -u); rm -rf / ; `reboot`\n"


def test_stdin_is_dev_null() -> None:
    """A program that reads stdin gets end-of-file at once, rather than hanging on the
    executor's own stdin."""
    result = run(["cat"], timeout=5)
    assert (result.exit_status, result.output, result.timed_out) == (0, "", False)


def test_long_output_is_truncated_to_the_limit_with_a_marker() -> None:
    """Output longer than 2000 characters is cut to 2000, ending in a marker that says
    characters were cut."""
    result = run([sys.executable, "-c", "print('x' * 5000)"], timeout=10)
    assert OUTPUT_LIMIT == 2000
    assert len(result.output) == OUTPUT_LIMIT
    assert result.output.startswith("x" * 1900)
    assert result.output.endswith(" characters cut]")
    assert "\n[... " in result.output


def test_output_at_the_limit_is_kept_whole() -> None:
    """Exactly 2000 characters are not touched."""
    result = run([sys.executable, "-c", "import sys; sys.stdout.write('y' * 2000)"], timeout=10)
    assert result.output == "y" * 2000


def test_a_program_that_runs_too_long_is_stopped_and_recorded_as_timed_out() -> None:
    """``sleep 5`` with a 0.2 s timeout is killed; the result says it timed out, has no
    exit status, and came back long before 5 s."""
    result = run(["sleep", "5"], timeout=0.2)
    assert result.timed_out
    assert result.exit_status is None
    assert not result.ok
    assert result.error == "timed out after 0.2s"
    assert result.duration < 3


def test_a_missing_program_is_an_error_not_an_exception() -> None:
    """A binary that does not exist gives a result with an error line, not a crash."""
    result = run(["/nonexistent/opsbot-no-such-tool", "--version"], timeout=5)
    assert result.exit_status is None
    assert not result.ok
    assert result.error.startswith("cannot run /nonexistent/opsbot-no-such-tool: ")
    assert "No such file or directory" in result.error


@pytest.mark.parametrize("argv", ["systemctl restart nginx.service", [], ()])
def test_a_command_string_or_an_empty_argv_is_a_type_error(argv: object) -> None:
    """A string (which would need a shell to split) or nothing to run is a programming
    error, raised at once."""
    with pytest.raises(TypeError, match="non-empty argv list, never a command string"):
        run(argv, timeout=5)  # type: ignore[arg-type]


def test_the_environment_is_rebuilt_from_an_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child sees a fixed PATH and locale, systemd's colour and pager switched off,
    and LANG/TZ passed through; nothing else from the executor's environment (no HOME,
    no secrets)."""
    monkeypatch.setenv("OPSBOT_TEST_API_KEY", "sk-secret-do-not-leak")
    monkeypatch.setenv("HOME", "/root")
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")
    monkeypatch.setenv("TZ", "Europe/Berlin")
    monkeypatch.delenv("LANG", raising=False)
    result = run(["env"], timeout=5)
    env = dict(line.split("=", 1) for line in result.output.splitlines())
    assert env == {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LC_ALL": "C.UTF-8",
        "SYSTEMD_COLORS": "0",
        "SYSTEMD_PAGER": "cat",
        "SYSTEMD_LOG_COLOR": "0",
        "TZ": "Europe/Berlin",
    }
    assert "sk-secret-do-not-leak" not in result.output
