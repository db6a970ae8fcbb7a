"""``opsbot polkit-rule --write`` as opsbot-polkit-rule.path runs it: a save of the config
that lands while the rule is being written starts no second run (systemd merges the
start into the running one), so the run itself must end with the rule of the config as
it is on disk, not as it was when the run began."""

import hashlib
from pathlib import Path

import pytest

import opsbot_cli.polkit_rule as polkit_rule
from opsbot_cli.errors import ConsoleError
from shared_io.errors import ConfigError
from shared_io.paths import Paths

WIDE = '[executor.allow]\nrestart_unit = ["web.service", "db.service"]\n'
NARROW = '[executor.allow]\nrestart_unit = ["db.service"]\n'


def _paths(tmp_path: Path, text: str) -> Paths:
    config = tmp_path / "opsbot.toml"
    config.write_text(text)
    config.chmod(0o644)
    tmp_path.chmod(0o755)
    return Paths.from_env({"OPSBOT_CONFIG": str(config), "OPSBOT_APPROVALS_DIR": str(tmp_path)})


def test_a_save_during_the_write_ends_in_the_rule_of_the_saved_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator narrows the allowlist while the run started by her previous save is
    writing the rule: the rule left in place allows only what the narrowed config does."""
    paths = _paths(tmp_path, WIDE)
    written: list[str] = []

    def write_rule(rule: str, path: Path) -> None:
        if not written:
            paths.config.write_text(NARROW)  # the save lands mid-run
        written.append(rule)

    monkeypatch.setattr(polkit_rule, "write_rule", write_rule)
    rule, _, digest = polkit_rule.write_following(paths)
    assert len(written) == 2
    assert '"web.service"' in written[0]
    assert '"web.service"' not in written[-1] and '"db.service"' in written[-1]
    assert rule == written[-1]
    assert digest == hashlib.sha256(NARROW.encode()).hexdigest()  # what --json reports


def test_a_save_right_after_the_write_is_taken_while_the_run_waits_for_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator saves, sees the rule change, and saves again at once (an edit undone):
    the run started by the first save is still winding down, so the second starts nothing;
    the unit's run waits for the file to stay quiet and writes the second save's rule."""
    paths = _paths(tmp_path, WIDE)
    written: list[str] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds
        if now[0] >= 1.0 and len(written) == 1:
            paths.config.write_text(NARROW)  # a second after the rule was written

    monkeypatch.setattr(polkit_rule, "write_rule", lambda rule, path: written.append(rule))
    rule, _, _ = polkit_rule.write_following(paths, 5.0, clock=lambda: now[0], sleep=sleep)
    assert len(written) == 2 and rule == written[-1]
    assert '"web.service"' not in rule and '"db.service"' in rule
    assert now[0] >= 6.0  # quiet for 5 s after the second write, then done


def test_a_config_that_never_settles_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config rewritten on every read is not chased for ever: the run fails, names the
    file, and says what to do, so the path unit's service shows failed in systemctl."""
    paths = _paths(tmp_path, WIDE)
    saves = iter(range(100))

    def write_rule(rule: str, path: Path) -> None:
        paths.config.write_text(WIDE + f"# save {next(saves)}\n")

    monkeypatch.setattr(polkit_rule, "write_rule", write_rule)
    with pytest.raises(ConsoleError) as caught:
        polkit_rule.write_following(paths)
    assert str(paths.config) in caught.value.message
    assert "polkit-rule --write" in (caught.value.hint or "")


def test_a_save_caught_half_written_is_waited_out_and_the_next_one_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the run waits for quiet, the watcher reads the file between an editor's two
    writes (it does not load); the run does not end there: the completed save that
    follows is written. Left broken, the run ends with the file's error and the rule
    stays the last good one's."""
    paths = _paths(tmp_path, WIDE)
    written: list[str] = []
    now = [0.0]
    saves = {1.0: "[executor.allow\n", 1.4: NARROW}

    def sleep(seconds: float) -> None:
        now[0] = round(now[0] + seconds, 1)
        if now[0] in saves:
            paths.config.write_text(saves[now[0]])

    monkeypatch.setattr(polkit_rule, "write_rule", lambda rule, path: written.append(rule))
    rule, _, _ = polkit_rule.write_following(paths, 5.0, clock=lambda: now[0], sleep=sleep)
    assert len(written) == 2 and '"web.service"' not in rule and '"db.service"' in rule
    written.clear()
    paths.config.write_text(WIDE)
    now[0], saves = 0.0, {1.0: "[executor.allow\n"}
    with pytest.raises(ConfigError):
        polkit_rule.write_following(paths, 5.0, clock=lambda: now[0], sleep=sleep)
    assert len(written) == 1 and '"web.service"' in written[0]  # the last good config's
