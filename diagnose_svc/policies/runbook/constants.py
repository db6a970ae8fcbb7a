"""The runbook's thresholds and state groups, shared by what it reads and how it decides."""

from __future__ import annotations

#: Journal lines asked for: a few attempts' story, within the observation limit.
JOURNAL_LINES = 40
RUNNING = ("active", "reloading")
DOWN = ("failed", "inactive")
#: A program that exits with an error within this many seconds of its start failed
#: starting (it read something it cannot use); one that ran longer failed running.
START_GRACE = 5.0
#: How many of its own last lines before it failed starting may name its cause.
LAST_WORDS = 3
#: A dependent that went down within this many seconds after a unit it depends on
#: stopped was stopped with it (systemd's default stop timeout is 90 s).
STOPPED_WITH = 90.0
#: Dependencies read per failing unit at most (fan-out wider than this is rare).
MAX_DEPENDENCIES = 4
