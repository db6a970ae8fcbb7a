"""One step of a plan as the console prints it, in one place: ``opsbot show`` and the
review ``opsbot approve`` asks on both print each step with :func:`lines`::

      1. app.service: failed -> restart
         run: systemctl restart --no-ask-password -- app.service
         precondition: app.service is failed now: as expected
         why: exited 1 after a config change

the unit, the state the plan expects it in and what the step does (a plan diff); the argv
it runs, folded between its words and never cut; each precondition said as the unit is
now, judged by plans.precondition_checks as the apply judges it (``not as expected``: the
apply would mark the plan STALE and run nothing); the reason on one line, folded to the
width. Steps are read as plain JSON (what ``show`` receives; approve dumps its model), so
that ``show`` builds no model.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from opsbot_cli.screen import WIDTH, printable
from plans import expect_words
from shared_schema.write_tools import WRITE_TOOLS_BY_NAME

if TYPE_CHECKING:
    from shared_io.unit_show import UnitState

__all__ = ["ReadState", "holds", "lines", "precondition_lines", "title"]

#: Reads one unit's live state, or says why it could not (opsbot_cli.live.read).
ReadState = Callable[[str], "UnitState | str"]
#: Where a step's own lines start, under its number.
INDENT = 5
#: A step's ``expect`` fields, in the order they are said.
FIELDS = ("active_state", "sub_state", "invocation_id")


def title(step: Mapping[str, Any]) -> str:
    """``app.service: failed -> restart``: the unit, the state the plan expects it in,
    and what the step does to it."""
    verb = WRITE_TOOLS_BY_NAME[step["tool"]].verb
    expected = (step.get("expect") or {}).get("active_state")
    before = f"{' or '.join(expected)} -> " if expected else ""
    return f"{step['args']['unit']}: {before}{verb}"


def _judged(expect: Mapping[str, Any], state: UnitState) -> list[tuple[str, bool]]:
    """Each field of ``expect``, and whether ``state`` meets it (plans' verdict, one
    field at a time)."""
    from plans import precondition_checks  # loaded with the state it checks

    judged = []
    for key in FIELDS:
        if expect.get(key) is not None:
            [check] = precondition_checks({key: expect[key]}, state)
            judged.append((key, check.holds))
    return judged


def _said(unit: str, key: str, wanted: Any, state: UnitState, held: bool) -> str:
    """One precondition as the unit is now: ``app.service is failed now: as expected``,
    or ``... is active now: not as expected (the plan expects failed)``."""
    if key == "invocation_id":
        then, now = wanted[:12] or "none", state.invocation_id[:12] or "none"
        if held:
            return f"{unit} has not been started again since diagnosis: as expected"
        moved = "started again" if state.invocation_id else "stopped"
        return (
            f"{unit} was {moved} since diagnosis: not as expected "
            f"(invocation {now} now, {then} at diagnosis)"
        )
    live = (state.active_state if key == "active_state" else state.sub_state) or "unknown"
    fact = (
        f"{unit} is {live} now" if key == "active_state" else f"{unit} is in sub state {live} now"
    )
    if held:
        return f"{fact}: as expected"
    return f"{fact}: not as expected (the plan expects {' or '.join(wanted)})"


def precondition_lines(
    unit: str, expect: Mapping[str, Any] | None, state: UnitState | str | None, final: str
) -> list[str]:
    """What is said of one step's precondition: each field as the unit is now (``state``),
    or why the live state is unknown (``state`` a str), or for a plan in a ``final``
    state (``state`` None) that it is not checked any more."""
    words = expect_words(unit, expect or {})
    if state is None:
        said = f"(not checked any more: the plan is {final})"
        return [f"precondition: {w} {said}" for w in words] or ["precondition: none"]
    if isinstance(state, str):
        unknown = [f"precondition: {w}: unknown" for w in words] or ["precondition: none"]
        return [*unknown, f"live state unknown: {state}"]
    if not expect:
        return [f"precondition: none ({unit} is {state.active_state or 'unknown'} now)"]
    return [
        f"precondition: {_said(unit, key, expect[key], state, held)}"
        for key, held in _judged(expect, state)
    ]


def holds(expect: Mapping[str, Any] | None, state: UnitState | str | None) -> bool:
    """Whether every precondition is met by the live ``state`` as far as it is known (a
    state that could not be read, or none read, contradicts nothing)."""
    if not expect or state is None or isinstance(state, str):
        return True
    return all(held for _, held in _judged(expect, state))


def lines(
    index: int,
    step: Mapping[str, Any],
    argv: list[str],
    *,
    state: UnitState | str | None,
    final: str = "",
    ran: str = "",
    width: int = WIDTH,
    full: bool = False,
) -> list[str]:
    """Step ``index`` of a plan (its JSON form, and the argv it runs) in lines of at most
    ``width`` columns, whole with ``full``: its title, argv, preconditions against the
    live ``state`` (see :func:`precondition_lines`; ``final``: the plan's state, when it
    is final), why, and what it did (``ran``, if it ran)."""
    said: list[str] = []

    def fold(text: str, indent: int, hang: int = 2) -> None:
        first = " " * indent
        if full:
            said.append(first + text)
            return
        folded = textwrap.wrap(
            text,
            width,
            initial_indent=first,
            subsequent_indent=" " * (indent + hang),
            break_on_hyphens=False,
        )
        said.extend(folded or [first.rstrip()])

    unit = step["args"]["unit"]
    fold(f"{index}. {printable(title(step))}", 2)
    fold(f"run: {printable(shlex.join(argv))}", INDENT, hang=len("run: "))
    for line in precondition_lines(unit, step.get("expect"), state, final):
        fold(printable(line), INDENT)
    if step.get("reason"):
        fold(f"why: {printable(' '.join(str(step['reason']).split()))}", INDENT)
    if ran:
        fold(f"ran: {printable(ran)}", INDENT)
    return said
