"""The diagnosis scope: an operator may have diagnosed what opsbot may act on, the health
targets' units, and what they depend on (to depth 3), never sshd or opsbot itself; and a
diagnosis reads no journal outside it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from diagnose_svc.errors import ToolError
from diagnose_svc.scope import DEPTH, OutOfScope, UnitNotFound, build_scope
from diagnose_svc.tools import JournalArgs, ToolContext
from diagnose_svc.tools.tail_journal import tail_journal
from shared_io.errors import UnitStateError
from shared_io.exit_codes import REFUSED
from shared_schema import DiagnoseSettings, OpsbotConfig

#: What systemd would answer: each unit's dependencies, a chain six deep behind app.
GRAPH = {
    "web.service": {"Wants": "app.service"},
    "app.service": {
        "Requires": "cache.service sshd.service sysinit.target system.slice",
        "BindsTo": "db.service",
    },
    "sysinit.target": {"Wants": "payroll.service"},
    "system.slice": {"Wants": "payroll.service"},
    "db.service": {"Requires": "disk.mount"},
    "disk.mount": {"Requires": "deep.service"},
    "deep.service": {"Requires": "deeper.service"},
    "report.timer": {"Wants": "report.service"},
}


def show(units: Sequence[str], properties: Sequence[str]) -> list[dict[str, str]]:
    return [{p: GRAPH.get(u, {}).get(p, "") for p in properties} for u in units]


def systemd_knows(*units: str) -> Callable[[Sequence[str], Sequence[str]], list[dict[str, str]]]:
    """``systemctl show`` on a host with the graph's units and ``units``: any other
    unit's LoadState is not-found, as systemd says of a name it has no unit for."""
    loaded = set(GRAPH) | set(units)

    def show_load_state(names: Sequence[str], properties: Sequence[str]) -> list[dict[str, str]]:
        blocks = show(names, properties)
        for name, block in zip(names, blocks, strict=True):
            if "LoadState" in properties:
                block["LoadState"] = "loaded" if name in loaded else "not-found"
        return blocks

    return show_load_state


def config(**diagnose: object) -> OpsbotConfig:
    return OpsbotConfig.model_validate(
        {
            "executor": {"allow": {"restart_unit": ["app.service"]}},
            "diagnose": {
                "health": {"web": {"url": "http://127.0.0.1/", "unit": "web.service"}},
                **diagnose,
            },
        }
    )


def test_the_scope_reaches_three_dependencies_deep_from_what_is_configured() -> None:
    """web (a health target's unit) and app (allowlisted) are in scope, and what they
    depend on to depth 3; deeper is not, nor sshd, which app requires (denylisted)."""
    scope = build_scope(config(), show)
    assert DEPTH == 3
    for unit in ("web.service", "app.service", "db.service", "cache.service", "disk.mount"):
        assert scope.allows(unit), unit
    assert scope.allows("deep.service")  # app -> db -> disk.mount -> deep: depth 3
    assert not scope.allows("deeper.service")
    assert not scope.allows("sshd.service")
    assert not scope.allows("report.service")
    # Every service Requires= sysinit.target: targets and slices are not followed, or
    # the scope would be every unit on the host.
    assert not scope.allows("sysinit.target") and not scope.allows("payroll.service")


def test_an_instance_s_slice_quoted_by_systemctl_is_a_slice_and_its_name_unquoted() -> None:
    """An instance of a template sits in the template's slice, whose name has an escape
    (``system-web\\x2dapi.slice``): systemctl prints it quoted. It is read as the slice
    it is (never followed, like every slice), not as a unit named with quotes; a unit
    with an escape in its name is read by that name."""
    GRAPH["web-api@2.service"] = {
        "Requires": 'sysinit.target "system-web\\\\x2dapi.slice"',
        "Wants": '"srv-data\\\\x2dold.mount"',
    }
    try:
        widened = config(scope=["web-api@2.service"])
        scope = build_scope(widened, show)
    finally:
        del GRAPH["web-api@2.service"]
    assert scope.allows("web-api@2.service")
    assert not any('"' in unit for unit in scope.units), scope.units
    assert not any(unit.endswith(".slice") for unit in scope.units), scope.units
    assert scope.allows("srv-data\\x2dold.mount")


def test_scope_in_the_config_widens_it_and_the_denylist_always_wins() -> None:
    """[diagnose] scope adds units (and their dependencies) an operator may diagnose
    without opsbot touching them; naming sshd there changes nothing."""
    scope = build_scope(config(scope=["report.timer", "sshd.service"]), show)
    assert scope.allows("report.timer") and scope.allows("report.service")
    assert not scope.allows("sshd.service")


def test_a_unit_outside_the_scope_is_refused_naming_the_key_that_widens_it() -> None:
    """A unit outside the scope (payroll) is refused, the hint naming [diagnose] scope in
    /etc/opsbot/opsbot.toml, which widens it; ssh is refused as never diagnosed through
    opsbot."""
    scope = build_scope(config(), show)
    with pytest.raises(OutOfScope) as refused:
        scope.require("payroll.service", systemd_knows("payroll.service"))
    assert refused.value.message.startswith("payroll.service is not in the diagnosis scope")
    assert "[diagnose] scope in /etc/opsbot/opsbot.toml" in (refused.value.hint or "")
    with pytest.raises(OutOfScope) as denied:
        scope.require("ssh.service", systemd_knows("ssh.service"))
    assert "never diagnosed through opsbot" in denied.value.message


def test_a_unit_systemd_does_not_know_is_not_found_rather_than_out_of_scope() -> None:
    """olivia types `opsbot diagnose nosuch`: systemd has no such unit, so she is told so
    in systemctl's words, not sent to widen [diagnose] scope with a typo; a near miss of a
    unit in scope names it. payroll exists and stays out of scope as before."""
    scope = build_scope(config(), show)
    with pytest.raises(UnitNotFound) as missing:
        scope.require("nosuch.service", systemd_knows("payroll.service"))
    assert missing.value.message == "Unit nosuch.service could not be found."
    assert missing.value.exit_status == REFUSED
    assert "[diagnose] scope" not in (missing.value.hint or "")
    with pytest.raises(UnitNotFound) as typo:
        scope.require("ap.service", systemd_knows())
    assert (typo.value.hint or "").startswith("did you mean app.service? ")
    with pytest.raises(OutOfScope) as refused:
        scope.require("payroll.service", systemd_knows("payroll.service"))
    assert not isinstance(refused.value, UnitNotFound)


def test_where_systemd_cannot_say_the_refusal_is_the_scope_s() -> None:
    """systemctl show failing (a bus away) says nothing of the unit: the refusal is the
    scope's, as before, not a guess that the unit is missing."""

    def failing(names: Sequence[str], properties: Sequence[str]) -> list[dict[str, str]]:
        raise UnitStateError("cannot read the state of nosuch.service: Failed to connect")

    with pytest.raises(OutOfScope) as refused:
        build_scope(config(), show).require("nosuch.service", failing)
    assert not isinstance(refused.value, UnitNotFound)
    assert refused.value.message == "nosuch.service is not in the diagnosis scope"


def test_no_journal_outside_the_scope_is_read() -> None:
    """However the run came to ask (a model told so by a journal line), tail_journal
    refuses a unit outside the scope before it opens the journal."""
    context = ToolContext(settings=DiagnoseSettings(), journal_scope=frozenset({"app.service"}))
    with pytest.raises(ToolError) as refused:
        tail_journal(JournalArgs(unit="sshd.service"), context)
    assert "outside the diagnosis scope" in refused.value.message


def test_a_denylisted_unit_is_not_read_even_when_a_run_adds_it_to_its_scope() -> None:
    """A follow-up or a root-started run adds its unit to the scope; if that unit is sshd
    (a plan's unit comes from the executor's answer), its journal is still not read."""
    context = ToolContext(settings=DiagnoseSettings(), journal_scope=frozenset({"sshd.service"}))
    with pytest.raises(ToolError, match="outside the diagnosis scope"):
        tail_journal(JournalArgs(unit="sshd.service"), context)
