"""Reading opsbot.toml, the same for every unit: defaults when missing, errors that name
the file and the key path."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from shared_io.config import HINT, load_config
from shared_io.errors import ConfigError
from shared_io.live_config import LiveConfig
from shared_io.paths import config_path
from shared_schema import OpsbotConfig

GOOD = """
[executor]
allow = { restart_unit = ["nginx.service", "app.service"] }

[diagnose]
max_steps = 8
redact_patterns = ['CUST-\\d+']

[diagnose.health.web]
url = "http://127.0.0.1/"
unit = "nginx.service"
timeout = 1.5
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "opsbot.toml"
    path.write_text(text)
    return path


def test_missing_file_gives_the_defaults(tmp_path: Path) -> None:
    """No configuration file: every setting has its default."""
    assert load_config(tmp_path / "absent.toml") == OpsbotConfig()


def test_path_comes_from_opsbot_config_or_etc() -> None:
    """OPSBOT_CONFIG overrides /etc/opsbot/opsbot.toml."""
    assert config_path({}) == Path("/etc/opsbot/opsbot.toml")
    assert config_path({"OPSBOT_CONFIG": "/tmp/x.toml"}) == Path("/tmp/x.toml")


def test_load_config_reads_opsbot_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_config() without a path reads the file $OPSBOT_CONFIG names."""
    path = write(tmp_path, GOOD.replace("timeout = 1.5\n", "timeout_seconds = 1.5\n"))
    monkeypatch.setenv("OPSBOT_CONFIG", str(path))
    config = load_config()
    assert config.diagnose.max_steps == 8
    assert config.diagnose.health["web"].unit == "nginx.service"
    assert config.diagnose.health["web"].timeout_seconds == 1.5
    assert config.executor.allow["restart_unit"] == ["nginx.service", "app.service"]


def test_unknown_key_is_named_by_its_line_and_path(tmp_path: Path) -> None:
    """A key the schema does not know is an error naming the file, its line (12) and
    diagnose.health.web.timeout, the key it most likely meant, and a hint where every key
    is listed."""
    path = write(tmp_path, GOOD)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.message == (
        f"{path}:12: diagnose.health.web.timeout: unknown key (did you mean timeout_seconds?)"
    )
    assert caught.value.hint == HINT
    assert caught.value.exit_status == 78


def test_bad_value_is_named_by_its_path(tmp_path: Path) -> None:
    """A value that does not validate names its key path."""
    text = '[diagnose.health.web]\nurl = "not a url"\n'
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=rf"^{path}:2: diagnose\.health\.web\.url: "):
        load_config(path)


def test_every_bad_key_is_listed(tmp_path: Path) -> None:
    """Several bad keys are all listed, each with its line and path, in the order of
    the file (pydantic names watch first, the schema's order)."""
    text = '[diagnose]\nmax_steps = 0\nwatch = ["not a unit"]\n'
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.message.startswith(
        f"{path}:2: diagnose.max_steps: Input should be greater than or equal to 1; "
        "line 3: diagnose.watch.0: "
    )


def test_bad_toml_is_a_config_error_with_its_line(tmp_path: Path) -> None:
    """A file that is not TOML is a ConfigError saying where."""
    with pytest.raises(ConfigError, match=r"opsbot.toml: not valid TOML: .*line 2"):
        load_config(write(tmp_path, "[diagnose]\nmax_steps = = 3\n"))


def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    """A path that cannot be read (here: a directory) is a ConfigError, not an OSError."""
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path)


SMALL = "[diagnose]\nmax_steps = 8\n"


def test_a_config_others_may_write_is_refused_naming_the_file_and_the_fix(
    tmp_path: Path,
) -> None:
    """A config an operator could edit would widen the allowlist (and the polkit rule
    generated from it): group- or world-writable, it is refused in one line saying how
    to fix it, and the same file at 0644 loads."""
    path = write(tmp_path, SMALL)
    path.chmod(0o666)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.message == (
        f"{path} is writable by group or others (mode 0666); opsbot refuses a file others "
        f"can change (fix: chown root:root {path} && chmod 0644 {path})"
    )
    path.chmod(0o664)
    with pytest.raises(ConfigError, match="mode 0664"):
        load_config(path)
    path.chmod(0o644)
    assert load_config(path).diagnose.max_steps == 8


def test_a_config_in_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    """Whoever may write the directory may put another file in the config's place."""
    path = write(tmp_path, SMALL)
    tmp_path.chmod(0o777)
    try:
        with pytest.raises(ConfigError) as caught:
            load_config(path)
    finally:
        tmp_path.chmod(0o700)
    assert caught.value.message.startswith(f"{tmp_path} is writable by group or others")
    assert f"chmod 0755 {tmp_path}" in caught.value.message


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file away")
def test_a_config_owned_by_an_operator_is_refused_by_root(tmp_path: Path) -> None:
    """Root (polkit-rule --write, approve) trusts only a config root owns: one owned by
    an operator's uid, even at 0644, is refused, naming the owner."""
    path = write(tmp_path, SMALL)
    os.chown(path, 4321, 4321)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.message.startswith(f"{path} is owned by uid 4321, not root;")


def test_a_link_to_a_config_in_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    """The link's own directory is root's, but the file it points at lies where anyone may
    replace it: refused, naming that directory."""
    loose = tmp_path / "loose"
    loose.mkdir()
    target = write(loose, SMALL)
    loose.chmod(0o777)
    safe = tmp_path / "etc"
    safe.mkdir()
    (safe / "opsbot.toml").symlink_to(target)
    try:
        with pytest.raises(ConfigError) as caught:
            load_config(safe / "opsbot.toml")
    finally:
        loose.chmod(0o700)
    assert caught.value.message.startswith(f"{loose} is writable by group or others")


VALID = GOOD.replace("timeout = 1.5\n", "timeout_seconds = 1.5\n")


def test_a_daemon_takes_an_edited_config_before_its_next_answer(tmp_path: Path) -> None:
    """An operator adds a unit to the allowlist: the daemon's next answer uses it, with
    no restart; an unchanged file is not read again."""
    path = write(tmp_path, VALID)
    live = LiveConfig(path)
    first = live.current()
    assert live.current() is first  # unchanged: the same object, no read
    path.write_text(VALID.replace('"app.service"]', '"app.service", "api.service"]'))
    with capture_logs() as logs:
        changed = live.current()
    assert changed.executor.allow["restart_unit"][-1] == "api.service"
    assert [e["event"] for e in logs] == ["config.reloaded"]


def test_a_broken_edit_keeps_the_config_in_force_and_says_so_once(tmp_path: Path) -> None:
    """A typo saved mid-edit: the configuration read before stays in force, the journal
    names the key once, and the fixed file is taken at the next answer."""
    path = write(tmp_path, VALID)
    live = LiveConfig(path)
    path.write_text(VALID.replace("max_steps = 8", "max_stpes = 8"))
    with capture_logs() as logs:
        assert live.current().diagnose.max_steps == 8
        assert live.current().diagnose.max_steps == 8
    assert [e["event"] for e in logs] == ["config.reload_failed"]
    assert "max_stpes" in logs[0]["error"]
    path.write_text(VALID.replace("max_steps = 8", "max_steps = 6"))
    assert live.current().diagnose.max_steps == 6


def test_a_file_caught_half_written_is_not_taken(tmp_path: Path) -> None:
    """An editor truncates the file and writes it again: a daemon asking between the two
    writes sees a valid prefix (here, the config without its last lines). It waits until
    the file has been still for a moment, so only the whole file is ever in force."""
    path = write(tmp_path, VALID)
    whole = VALID.replace("max_steps = 8", "max_steps = 6")
    waited: list[float] = []

    def sleep(seconds: float) -> None:
        if not waited:
            path.write_text(whole)  # the editor's second write lands while the daemon waits
        waited.append(seconds)

    live = LiveConfig(path, sleep=sleep)
    path.write_text(whole[: whole.index("max_steps")])  # the first write, still fresh
    assert live.current().diagnose.max_steps == 6
    assert waited == [0.2, 0.2]  # changed across the first wait, still across the second


def test_a_file_that_never_stays_still_or_is_dated_ahead_is_not_trusted(tmp_path: Path) -> None:
    """A file rewritten at every look keeps the configuration read before in force (and
    says so); a file whose time is in the future is watched by the daemon's own waiting,
    not believed old."""
    path = write(tmp_path, VALID)
    prefix = VALID[: VALID.index("max_steps")]
    writes = iter(range(100))

    def busy(seconds: float) -> None:
        path.write_text(prefix + f"# save {next(writes)}\n")

    live = LiveConfig(path, sleep=busy)
    path.write_text(prefix)
    with capture_logs() as logs:
        assert live.current().diagnose.max_steps == 8
    assert "config.unsettled" in [e["event"] for e in logs]
    waited: list[float] = []
    live = LiveConfig(path, sleep=waited.append)
    path.write_text(VALID.replace("max_steps = 8", "max_steps = 7"))
    ahead = time.time() + 3600
    os.utime(path, (ahead, ahead))
    assert live.current().diagnose.max_steps == 7 and waited == [0.2]


def test_reload_reads_now_and_a_broken_edit_is_remembered_until_fixed(tmp_path: Path) -> None:
    """``systemctl reload`` reads the file whether or not its stamp changed; the error of
    a broken edit is kept for check-config to show, with the digest the daemon started
    from, until a good file loads."""
    path = write(tmp_path, VALID)
    live = LiveConfig(path, sleep=lambda s: None)
    started = live.digest
    path.write_text(VALID.replace("max_steps = 8", "max_stpes = 8"))
    live.reload()
    assert "max_stpes" in live.error and live.digest == started
    path.write_text(VALID.replace("max_steps = 8", "max_steps = 5"))
    assert live.reload().diagnose.max_steps == 5
    assert live.error == "" and live.digest != started and live.started_digest == started
