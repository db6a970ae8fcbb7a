"""read_memory: whether the kernel killed a unit for memory, and how close it runs.

``Result=oom-kill`` says systemd saw an OOM kill end the unit; the cgroup's
``memory.events`` counts them (``oom_kill``) where the memory controller is there to
read (cgroup v2). Where it is not (a hybrid hierarchy with read-only controllers, as in
some containers), the tool says so rather than guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from diagnose_svc.tools._registry import ToolContext, ToolOutput, UnitToolArgs, read_tool
from diagnose_svc.tools._systemctl import parse_int, show

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROPERTIES = (
    "Id",
    "ActiveState",
    "Result",
    "NRestarts",
    "ControlGroup",
    "MemoryCurrent",
    "MemoryMax",
    "MemoryHigh",
)


class MemoryArgs(UnitToolArgs):
    gives = "memory"


class MemoryState(ToolOutput):
    """The unit's memory as systemd and its cgroup report it; OOM kills counted."""

    unit: str
    active_state: str
    result: str
    n_restarts: int
    memory_current: int | None
    memory_max: str
    memory_high: str
    events_available: bool
    oom: int = 0
    oom_kill: int = 0

    @property
    def killed_for_memory(self) -> bool:
        return self.result == "oom-kill" or self.oom_kill > 0

    def summary(self) -> str:
        events = (
            f"memory.events oom_kill={self.oom_kill}"
            if self.events_available
            else "memory.events not readable here"
        )
        current = f"{self.memory_current} bytes" if self.memory_current is not None else "unknown"
        return (
            f"{self.unit} is {self.active_state} (Result={self.result}); memory {current}, "
            f"MemoryMax={self.memory_max}; {events}"
        )


def parse_events(text: str) -> dict[str, int]:
    """``memory.events`` (``name count`` lines) as a dict."""
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[name] = int(value)
    return out


def memory_state(props: Mapping[str, str], events: dict[str, int] | None) -> MemoryState:
    current = props.get("MemoryCurrent", "")
    return MemoryState(
        unit=props.get("Id", ""),
        active_state=props.get("ActiveState", ""),
        result=props.get("Result", ""),
        n_restarts=parse_int(props.get("NRestarts", "")),
        memory_current=int(current) if current.isdigit() else None,
        memory_max=props.get("MemoryMax", ""),
        memory_high=props.get("MemoryHigh", ""),
        events_available=events is not None,
        oom=(events or {}).get("oom", 0),
        oom_kill=(events or {}).get("oom_kill", 0),
    )


@read_tool(MemoryArgs)
def read_memory(args: MemoryArgs, context: ToolContext) -> MemoryState:
    """Read one unit's memory state: how its last run ended (Result=oom-kill when the
    kernel killed it for memory), its restarts, current memory use against MemoryMax= and
    MemoryHigh=, and its cgroup's OOM counters (memory.events oom, oom_kill) where they
    can be read.
    """
    [props] = show([args.unit], PROPERTIES)
    events: dict[str, int] | None = None
    group = props.get("ControlGroup", "")
    for base in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        path = base / group.lstrip("/") / "memory.events"
        try:
            events = parse_events(path.read_text())
            break
        except OSError:
            continue
    return memory_state(props, events)
