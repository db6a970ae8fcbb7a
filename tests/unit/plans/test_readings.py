"""What root reads of a plan's units before a standing rule may approve it
(plans/readings.py): systemd's word on each, and the health targets root's config says a
running unit serves, probed by root. The plan's own words never enter it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from plans.readings import (
    MAX_TARGETS,
    ProbesSpent,
    Reading,
    RunProbes,
    TargetReading,
    UnitReading,
    read_units,
)
from shared_io.errors import UnitStateError
from shared_io.health import Probe
from shared_io.unit_show import UnitProperties
from shared_schema import HealthTarget


def systemd_says(**units: tuple[str, str, str]) -> object:
    """``systemctl show`` answering (ActiveState, SubState, Result) per unit (by the name
    before the dot; a unit not named is not found); the units it was asked about."""
    asked: list[list[str]] = []

    def show(names: Sequence[str], properties: Sequence[str]) -> list[UnitProperties]:
        asked.append(list(names))
        assert set(properties) >= {"LoadState", "ActiveState", "SubState", "Result"}
        said = []
        for name in names:
            known = units.get(name.split(".")[0])
            if known is None:
                said.append(UnitProperties(name, {"LoadState": "not-found"}))
                continue
            active, sub, result = known
            values = {"LoadState": "loaded", "ActiveState": active, "SubState": sub}
            said.append(UnitProperties(name, {**values, "Result": result, "InvocationID": "ab"}))
        return said

    show.asked = asked  # type: ignore[attr-defined]
    return show


class Prober:
    """Answers each target's probe with the outcome scripted for its port."""

    def __init__(self, **outcomes: str) -> None:
        self.outcomes = outcomes
        self.probed: list[str] = []

    def __call__(self, target: HealthTarget) -> Probe:
        port = str(target.url.port)
        self.probed.append(port)
        outcome = self.outcomes[f"p{port}"]
        return Probe(outcome, error="EPERM" if outcome == "connection_error" else None)  # type: ignore[arg-type]


def target(port: int, unit: str | None) -> HealthTarget:
    return HealthTarget.model_validate({"url": f"http://127.0.0.1:{port}/", "unit": unit})


def test_a_failed_unit_is_read_as_failing_and_nothing_is_probed() -> None:
    """systemd says app.service failed (killed): a failure root sees; its health target
    is not probed (a unit that is down needs no probe)."""
    probe = Prober()
    read = read_units(
        ["app.service"],
        {"app": target(8001, "app.service")},
        read=systemd_says(app=("failed", "failed", "signal")),  # type: ignore[arg-type]
        prober=probe,
    )
    app = read.of("app.service")
    assert (app.down, app.shows_failure, app.result, app.invocation_id) == (
        True,
        True,
        "signal",
        "ab",
    )
    assert probe.probed == [] and app.targets == ()
    assert app.words() == "app.service is failed/failed (Result=signal)"
    # What the executor's precondition check would read: the same state and invocation.
    assert app.state().describe() == "app.service is failed/failed (load: loaded)"
    assert app.state().invocation_id == "ab"


@pytest.mark.parametrize(
    ("active", "sub", "result", "down"),
    [
        ("failed", "failed", "exit-code", True),
        ("activating", "auto-restart", "exit-code", True),
        ("inactive", "dead", "exit-code", True),
        ("activating", "start", "timeout", True),
        ("deactivating", "stop-sigterm", "watchdog", True),
        ("inactive", "dead", "success", False),  # stopped by an operator
        ("active", "running", "success", False),
        ("active", "running", "exit-code", False),  # running again: not down
        ("reloading", "reload", "exit-code", False),
        ("inactive", "dead", "", False),
    ],
)
def test_down_is_what_systemd_says_of_a_unit_that_ended_badly(
    active: str, sub: str, result: str, down: bool
) -> None:
    """Failed, waiting to restart, or stopped or starting after a Result= other than
    success: down. Stopped cleanly, running (whatever its last Result=), reloading: not."""
    reading = UnitReading("app.service", active, sub, result)
    assert reading.down is down
    assert reading.shows_failure is down


def test_a_running_unit_is_probed_through_its_own_targets_only() -> None:
    """app.service runs. Root probes the targets its config says app serves, in name
    order, and stops at the first that fails; a target of another unit, or of none, is
    not probed."""
    probe = Prober(p8001="ok", p8002="unexpected_status", p8003="ok")
    targets = {
        "b-api": target(8002, "app.service"),
        "a-home": target(8001, "app.service"),
        "c-late": target(8003, "app.service"),
        "db": target(9000, "db.service"),
        "anyone": target(9001, None),
    }
    read = read_units(
        ["app.service"],
        targets,
        read=systemd_says(app=("active", "running", "success")),  # type: ignore[arg-type]
        prober=probe,
    )
    app = read.of("app.service")
    assert probe.probed == ["8001", "8002"]
    assert [(t.name, t.outcome) for t in app.targets] == [
        ("a-home", "ok"),
        ("b-api", "unexpected_status"),
    ]
    assert not app.down and app.shows_failure
    assert app.words() == (
        "app.service is active/running (Result=success), health target a-home: ok, "
        "health target b-api: unexpected_status"
    )


def test_at_most_four_targets_are_probed_and_an_unreachable_one_shows_nothing() -> None:
    """Six targets, each unreachable from root's approver (a filter, no route): at most
    four are probed, each said with why, and none of them shows a failure."""
    probe = Prober(**{f"p{8000 + n}": "connection_error" for n in range(6)})
    targets = {f"t{n}": target(8000 + n, "app.service") for n in range(6)}
    read = read_units(
        ["app.service"],
        targets,
        read=systemd_says(app=("active", "running", "success")),  # type: ignore[arg-type]
        prober=probe,
    )
    app = read.of("app.service")
    assert len(probe.probed) == MAX_TARGETS == 4
    assert not app.shows_failure
    assert "health target t0: connection_error (EPERM)" in app.words()


@pytest.mark.parametrize(
    ("outcome", "failing"),
    [
        ("ok", False),
        ("unexpected_status", True),
        ("timeout", True),
        ("connection_refused", True),
        ("connection_error", False),
    ],
)
def test_a_target_fails_when_it_answers_wrong_late_or_refuses(outcome: str, failing: bool) -> None:
    """A wrong status, no answer in time, or a refused connection is a failure of a unit
    that runs; a target root could not reach says nothing."""
    assert TargetReading("api", outcome).failing is failing
    running = UnitReading("app.service", "active", "running", "success")
    with_target = UnitReading(**{**running.__dict__, "targets": (TargetReading("api", outcome),)})
    assert with_target.shows_failure is failing


def test_a_unit_systemd_does_not_know_or_cannot_say_shows_no_failure() -> None:
    """A unit not loaded, one systemctl cannot read, and one not asked about are each
    said as unknown, never as failing; a read that fails says systemctl's words."""
    read = read_units(
        ["gone.service", "app.service"],
        {},
        read=systemd_says(app=("failed", "failed", "signal")),  # type: ignore[arg-type]
        prober=Prober(),
    )
    gone = read.of("gone.service")
    assert gone.error == "LoadState=not-found" and not gone.shows_failure and not gone.down
    assert gone.words() == "gone.service: live state unknown (LoadState=not-found)"
    assert read.of("app.service").shows_failure
    assert read.of("other.service").error == "not read"
    assert read.of("other.service").unit == "other.service"
    assert not Reading().of("app.service").shows_failure

    def broken(names: Sequence[str], properties: Sequence[str]) -> list[UnitProperties]:
        raise UnitStateError("cannot read the state of app.service: Failed to connect to bus")

    failed = read_units(["app.service"], {}, read=broken, prober=Prober())
    app = failed.of("app.service")
    assert not app.shows_failure and "Failed to connect to bus" in app.error
    assert app.unit == "app.service"


def test_a_unit_that_runs_without_a_target_says_so() -> None:
    """app.service runs and no target of root's config is its own: the words say so (a
    rule then has nothing of root's to act on)."""
    read = read_units(
        ["app.service"],
        {"db": target(9000, "db.service")},
        read=systemd_says(app=("active", "running", "success")),  # type: ignore[arg-type]
        prober=Prober(),
    )
    assert read.of("app.service").words() == (
        "app.service is active/running (Result=success), no health target of its own"
    )


@pytest.mark.parametrize(
    ("active", "sub"), [("inactive", "dead"), ("activating", "start"), ("deactivating", "stop")]
)
def test_a_unit_stopped_or_starting_is_not_probed_so_a_refusal_says_nothing(
    active: str, sub: str
) -> None:
    """An operator stopped app.service (Result=success), or it is still starting: nothing
    listens on its port, and a refused probe would read as a failure. Root does not probe
    it, and it shows no failure."""
    probe = Prober(p8001="connection_refused")
    read = read_units(
        ["app.service"],
        {"app": target(8001, "app.service")},
        read=systemd_says(app=(active, sub, "success")),  # type: ignore[arg-type]
        prober=probe,
    )
    assert probe.probed == [] and not read.of("app.service").shows_failure


def test_a_unit_the_caller_finds_not_worth_it_is_not_probed() -> None:
    """The caller's precondition does not hold (the plan would go STALE): no probe."""
    probe = Prober(p8001="timeout")
    read = read_units(
        ["app.service"],
        {"app": target(8001, "app.service")},
        read=systemd_says(app=("active", "running", "success")),  # type: ignore[arg-type]
        prober=probe,
        worth_probing=lambda reading: reading.sub_state != "running",
    )
    assert probe.probed == [] and not read.of("app.service").shows_failure


def test_a_run_probes_each_target_once_and_stops_when_its_time_is_spent() -> None:
    """Fifty plans of one unit cost one probe of its target; once the run's seconds of
    probing are spent, a new target is not probed (ProbesSpent: asked next run)."""
    seconds = [0.0]
    probe = Prober(p8001="timeout", p8002="ok")

    def slow(target: HealthTarget) -> Probe:
        seconds[0] += 6.0
        return probe(target)

    probes = RunProbes(prober=slow, budget=10.0, clock=lambda: seconds[0])
    first = target(8001, "app.service")
    assert [probes(first).outcome for _ in range(50)] == ["timeout"] * 50
    assert probe.probed == ["8001"] and probes.spent == 6.0
    assert probes(target(8002, "db.service")).outcome == "ok"
    with pytest.raises(ProbesSpent, match="12.0 s of probes spent"):
        probes(target(8003, "web.service"))
    assert probes(first).outcome == "timeout"  # known already: no time needed
