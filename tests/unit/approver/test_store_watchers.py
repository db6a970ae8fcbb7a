"""The units that watch the plan store: opsbot-notify.path (the approvers are told) and
opsbot-rules.path (the standing rules are asked). Each stored plan is several changes of
the store's directory (a temp file written, linked, removed), and a path unit starts its
unit at the first change it sees after that unit ended: started directly, a oneshot ran
again and again for as long as a burst of plans lasted, a Python process on one of the
host's cores. So each path unit starts a timer instead, which starts the oneshot once,
a moment after the burst began; tests/integration/test_approval_from_anywhere.py shows a
burst told and ruled by one run of each."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared_schema.timespan import parse_timespan

UNITS = Path(__file__).resolve().parents[3] / "units"


def settings(name: str) -> dict[str, list[str]]:
    """``Section.Key`` -> its values, in order, of units/NAME (comments left out)."""
    found: dict[str, list[str]] = {}
    section = ""
    for line in (UNITS / name).read_text().splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            found.setdefault(f"{section}.{key}", []).append(value)
    return found


@pytest.mark.parametrize(
    ("watcher", "service", "most_seconds"),
    [("opsbot-notify", "opsbot-notify.service", 10), ("opsbot-rules", "opsbot-rules.service", 1)],
)
def test_a_path_unit_on_the_store_starts_its_service_once_a_burst(
    watcher: str, service: str, most_seconds: float
) -> None:
    """The path unit watching plans/ triggers a timer, not the service; the timer starts
    the service once, at most ``most_seconds`` after the burst's first change (the
    rules' sooner: a standing rule's fix waits on it), stops when that run ended so that
    the next change arms it again (RemainAfterElapse=no), and is never start-limited (a
    refused start would leave the path unit failed, watching nothing)."""
    path = settings(f"{watcher}.path")
    assert "/var/lib/opsbot/plans" in path["Path.PathChanged"]
    [timer] = path["Path.Unit"]
    assert timer.endswith(".timer"), timer
    said = settings(timer)
    assert said["Timer.Unit"] == [service]
    [delay] = said["Timer.OnActiveSec"]
    seconds = parse_timespan(delay)
    assert seconds is not None and 0 < seconds <= most_seconds
    assert said["Timer.RemainAfterElapse"] == ["no"]
    assert said["Unit.StartLimitIntervalSec"] == ["0"]
    [accuracy] = said["Timer.AccuracySec"]
    assert (parse_timespan(accuracy) or 60) <= 0.1, accuracy  # not systemd's minute
    assert "Install.WantedBy" not in said  # started by its path unit alone
