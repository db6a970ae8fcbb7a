"""The executor's own argv is fixed: ``systemctl VERB --no-ask-password -- UNIT`` and
nothing else, for every write tool, whatever the unit is called.

polkit authorises a unit and a verb, not the job mode: a subverted executor could run
``systemctl restart --job-mode=flush -- app.service`` (or ``replace-irreversibly``,
``isolate``) and cancel other units' queued jobs, and the rule would allow it. opsbot's own
code never passes such an option: these tests pin that no argv built from a plan (the
tool's function, ``step_argv``, and what the applier really hands to the runner) holds
``--job-mode`` or any option outside the fixed list, for every tool in the table and for
unit names chosen to look like options.
"""

from pathlib import Path

import pytest
from hypothesis import given, strategies as st
from pydantic import ValidationError

from executor_svc.apply import Applier
from plans import TOOLS, PlanStore, step_argv
from shared_schema import WRITE_TOOL_TABLE, ExecutorPolicy, UnitArgs, is_valid_unit_name

from .helpers import Clock, Systemctl, approved, plan_of, step, submitted, unit_in

#: Every option opsbot's argv may hold, and the end of options before the unit.
FIXED_OPTIONS = ("--no-ask-password",)
#: Names systemd and opsbot accept that read like options or job modes.
HOSTILE_UNITS = (
    "x--job-mode:flush.service",
    "app@--job-mode.service",
    "app@--job-mode:replace-irreversibly.service",
    "a--no-block.service",
    "x--.service",
    "worker@-i.service",
    "nginx.service",
)
#: Names the schema refuses, so no step can carry them at all.
REFUSED_UNITS = (
    "--job-mode=flush",
    "--job-mode=flush.service",
    "-i.service",
    "nginx.service --job-mode=flush",
    "nginx.service\n--job-mode=flush",
    "nginx.service\x00--job-mode=flush",
    "--job-mode",
)


def assert_fixed(argv: list[str], verb: str, unit: str) -> None:
    """``argv`` is exactly the fixed shape: the options before ``--`` are the fixed list,
    the unit is the one operand after it, and nothing says ``--job-mode``."""
    assert argv == ["systemctl", verb, *FIXED_OPTIONS, "--", unit]
    options = argv[: argv.index("--")]
    assert not any(a.startswith("--job-mode") or a == "-j" for a in options), argv
    assert [a for a in options if a.startswith("-")] == list(FIXED_OPTIONS)


@pytest.mark.parametrize("unit", HOSTILE_UNITS)
@pytest.mark.parametrize("tool", [t.name for t in WRITE_TOOL_TABLE])
def test_each_tools_argv_is_the_fixed_one(tool: str, unit: str) -> None:
    """For each write tool and each option-like unit name: the tool's argv, and the
    plan's ``step_argv``, are ``systemctl VERB --no-ask-password -- UNIT``."""
    assert is_valid_unit_name(unit)
    verb = TOOLS[tool].verb
    assert_fixed(TOOLS[tool].argv(UnitArgs(unit=unit).unit), verb, unit)
    [argv] = step_argv(plan_of(step(tool, unit)))
    assert_fixed(argv, verb, unit)


def test_every_tool_in_the_table_has_the_fixed_verb() -> None:
    """The verb in each argv is the one the table declares (what polkit sees), so the
    executor's table is the whole list of what it can ask systemd."""
    for declared in WRITE_TOOL_TABLE:
        assert TOOLS[declared.name].argv("a.service")[1] == declared.verb


@pytest.mark.parametrize("unit", REFUSED_UNITS)
def test_a_unit_name_that_is_an_option_cannot_be_a_step(unit: str) -> None:
    """A leading ``-``, a space, a newline, a NUL or a missing suffix: refused by the
    schema, so no argv is ever built from it."""
    with pytest.raises(ValidationError):
        UnitArgs(unit=unit)


@given(
    unit=st.from_regex(r"[A-Za-z0-9:_.\-]{1,40}(@[A-Za-z0-9:_.\-]{0,20})?\.service", fullmatch=True)
)
def test_any_accepted_unit_name_gives_the_fixed_argv(unit: str) -> None:
    """Property: for every unit name the schema accepts, every tool's argv is the fixed
    one, the name appearing once, after ``--``."""
    if not is_valid_unit_name(unit):
        with pytest.raises(ValidationError):
            UnitArgs(unit=unit)
        return
    for declared in WRITE_TOOL_TABLE:
        assert_fixed(TOOLS[declared.name].argv(UnitArgs(unit=unit).unit), declared.verb, unit)


def test_what_the_applier_runs_is_the_fixed_argv(store: PlanStore, approvals_dir: Path) -> None:
    """An approved plan using every tool on an option-like unit: the argv the applier
    hands to the runner, step by step, is the fixed one (no job mode, no other option)."""
    unit = "x--job-mode:flush.service"
    policy = ExecutorPolicy(allow={t.name: [unit] for t in WRITE_TOOL_TABLE})
    plan = plan_of(*(step(t.name, unit) for t in WRITE_TOOL_TABLE), stop_on_error=False)
    clock = Clock()
    record = submitted(store, plan, at=clock())
    approved(store, approvals_dir, record, at=clock())
    systemctl = Systemctl()
    applier = Applier(
        store,
        approvals_dir,
        policy,
        actor="opsbot-executor",
        now=clock,
        read_state=unit_in("failed"),
        run_step=systemctl,
    )
    [outcome] = applier.apply_all()
    assert outcome.ran, outcome
    assert len(systemctl.calls) == len(WRITE_TOOL_TABLE)
    for declared, argv in zip(WRITE_TOOL_TABLE, systemctl.calls, strict=True):
        assert_fixed(argv, declared.verb, unit)
