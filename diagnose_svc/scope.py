"""Which units a diagnosis may be asked about, and whose journals it may read.

The diagnose user reads the journal, which an operator may not: asking `opsbot diagnose
sshd` would otherwise hand anyone in opsbot-operators the newest lines of any unit
("Accepted password for ...", other services' secrets). So a diagnosis is of a unit in
the configured scope, and its journal reads stay there:

* the units opsbot may act on (``[executor.allow]``), the units the health targets
  belong to (``[diagnose.health.*] unit``), ``[diagnose] watch``, and ``[diagnose] scope``
  (units an operator may have diagnosed though opsbot may not touch them);
* their dependencies (Requires=, Requisite=, BindsTo=, Wants=, PartOf=), to depth
  :data:`DEPTH`, as systemd reports them now, but not through targets and slices (every
  service Requires= sysinit.target: through it, the scope would be every unit);
* never a unit of the builtin denylist (opsbot's own, systemd's daemons, dbus, polkit,
  ssh, getty), whatever the config says.

A unit outside the scope that systemd does not know (``LoadState=not-found``, asked
through ``systemctl show`` like every read) is refused as systemctl refuses it, "Unit
nosuch.service could not be found.", not with advice to widen the scope by a typo.

Unit status stays readable for every unit (``systemctl show`` answers any local user);
what the scope guards is the journal, and what is quoted from it is redacted.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from diagnose_svc.errors import CommandFailed, UsageError
from diagnose_svc.tools._systemctl import parse_units, show
from shared_io.exit_codes import REFUSED
from shared_schema import OpsbotConfig
from shared_schema.units import denied_reason

#: How far along dependencies the scope reaches from the configured units.
DEPTH = 3
#: Properties whose units count as dependencies.
EDGES = ("Requires", "Requisite", "BindsTo", "Wants", "PartOf")
#: Grouping units, never followed: every service with default dependencies Requires=
#: sysinit.target and sits in a slice, so through them the scope would be every unit.
GROUPS = (".target", ".slice")
#: At most this many units in a scope: a bound on the systemctl calls it takes.
MAX_UNITS = 512
WIDEN = (
    "add it to [diagnose] scope in /etc/opsbot/opsbot.toml (units opsbot may diagnose "
    "but not touch) or to [executor.allow]"
)
#: What the scope holds, for the hint of a refusal.
HOLDS = (
    "the scope: the units opsbot may act on, the health targets' units, [diagnose] scope, "
    f"and their dependencies to depth {DEPTH}"
)

Show = Callable[[Sequence[str], Sequence[str]], Sequence[Mapping[str, str]]]


class OutOfScope(UsageError):
    """The unit is outside the diagnosis scope; the hint says which key widens it."""

    exit_status = REFUSED


class UnitNotFound(OutOfScope):
    """systemd knows no unit of that name: the name is wrong, and no key would help."""


def configured_units(config: OpsbotConfig) -> set[str]:
    units: set[str] = set(config.diagnose.scope) | set(config.diagnose.watch)
    for allowed in config.executor.allow.values():
        units.update(allowed)
    units.update(t.unit for t in config.diagnose.health.values() if t.unit)
    return units


def _denied(unit: str) -> bool:
    return denied_reason(unit) is not None


@dataclass(frozen=True)
class Scope:
    """The units a diagnosis may be of, and whose journals it may read."""

    units: frozenset[str]
    configured: frozenset[str]

    def allows(self, unit: str) -> bool:
        return unit in self.units and not _denied(unit)

    def require(self, unit: str, show_units: Show = show) -> None:
        """OutOfScope unless ``unit`` may be diagnosed; UnitNotFound where systemd
        (asked through ``show_units``) says it has no such unit."""
        if self.allows(unit):
            return
        if _denied(unit):
            raise OutOfScope(
                f"{unit} is never diagnosed through opsbot (its builtin denylist)",
                hint="its journal may hold what operators must not read; as root, read it "
                f"yourself: journalctl -u {unit}",
            )
        if _not_found(unit, show_units):
            near = self.nearest(unit)
            listed = "`systemctl list-unit-files` lists the units this host has"
            raise UnitNotFound(
                f"Unit {unit} could not be found.",
                hint=f"did you mean {near}? ({listed})" if near else listed,
            )
        raise OutOfScope(
            f"{unit} is not in the diagnosis scope", hint=f"to diagnose it, {WIDEN}; {HOLDS}"
        )

    def nearest(self, unit: str) -> str | None:
        """The unit in scope of the same type whose name ``unit`` most likely misspells
        (names compared without their type: every service ends in .service)."""
        stem, _, kind = unit.rpartition(".")
        names = {
            u.rpartition(".")[0]: u
            for u in self.units
            if u.rpartition(".")[2] == kind and denied_reason(u) is None  # never suggested
        }
        close = difflib.get_close_matches(stem, sorted(names), n=1)
        return names[close[0]] if close else None


def _not_found(unit: str, show_units: Show) -> bool:
    """Whether systemd says it has no unit ``unit`` (``LoadState=not-found``); False
    where it cannot say."""
    try:
        blocks = show_units([unit], ("LoadState",))
    except CommandFailed:
        return False
    return len(blocks) == 1 and blocks[0].get("LoadState", "") == "not-found"


def _names(value: str) -> Iterable[str]:
    return iter(parse_units(value))


def build_scope(config: OpsbotConfig, show_units: Show = show) -> Scope:
    """The scope as systemd's dependencies stand now (a few ``systemctl show`` calls)."""
    configured = frozenset(u for u in configured_units(config) if not _denied(u))
    seen: set[str] = set(configured)
    frontier = sorted(configured)
    for _ in range(DEPTH):
        if not frontier or len(seen) >= MAX_UNITS:
            break
        try:
            blocks = show_units(frontier, EDGES)
        except CommandFailed:
            break  # what is configured stays in scope; its dependencies cannot be read
        found: list[str] = []
        for block in blocks:
            for prop in EDGES:
                for name in _names(block.get(prop, "")):
                    if name in seen or _denied(name) or name.endswith(GROUPS):
                        continue
                    if len(seen) < MAX_UNITS:
                        seen.add(name)
                        found.append(name)
        frontier = sorted(found)
    return Scope(units=frozenset(seen), configured=configured)
