"""What every fault injector does (testbed/faults.py on the scenario stack,
testbed/graph_faults.py on generated graphs): run and write in the container, recording
each action; wait, bounded, until the fault is what an operator would see, or raise
:class:`InjectionError` saying what did not hold and how things stood.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable

from testbed.container import BootedSystemd
from testbed.observe import UNIT_STATE, unit_properties

#: How long an injector waits, by default, for its fault to become observable.
INJECT_TIMEOUT = 20.0


class InjectionError(RuntimeError):
    """The fault's observable state did not hold in time; the message says what was missing."""


class Injector:
    """Runs and records an injector's actions; waits for the fault's observable state.
    Subclasses say where they are (``label``) and how things stand (``now``) for the
    error when a wait runs out."""

    timeout = INJECT_TIMEOUT

    def __init__(self, ct: BootedSystemd) -> None:
        self.ct = ct
        self.actions: list[str] = []
        self.observed: dict[str, str] = {}

    def label(self) -> str:
        raise NotImplementedError

    def now(self) -> str:
        raise NotImplementedError

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        self.actions.append(shlex.join(argv))
        return self.ct.run(list(argv), check=check)

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        self.actions.append(f"write {path}")
        self.ct.write_file(path, text, mode)

    def wait(
        self, what: str, predicate: Callable[[], object], timeout: float | None = None
    ) -> None:
        limit = self.timeout if timeout is None else timeout
        try:
            self.ct.wait_for(predicate, timeout=limit, interval=0.1, what=what)
        except TimeoutError:
            raise InjectionError(
                f"{self.label()}: {what} did not hold within {limit:g}s; now {self.now()}"
            ) from None

    def unit_is(self, unit: str, **want: str) -> Callable[[], bool]:
        """A predicate: ``unit``'s properties have the ``want`` values (and records them)."""

        def check() -> bool:
            props = unit_properties(self.ct, unit, (*UNIT_STATE, *want))
            self.observed.update({f"{unit} {k}": v for k, v in props.items()})
            return all(props.get(k) == v for k, v in want.items())

        return check
