"""A scripted system journal for the console's tests: the entries journald would return
(with the trusted fields it sets, ``_UID`` and ``_SYSTEMD_UNIT``), put in place of the one
function that reads the real journal (plans.witness.system_journal). The
trust rules and every decision built on them run for real."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from plans import PlanRecord, witness

#: The executor's user in these tests: a user every host has, so its uid resolves.
EXECUTOR_USER = "nobody"
EXECUTOR_UID = 65534


@dataclass
class ScriptedJournal:
    entries: list[dict[str, Any]] = field(default_factory=list)
    #: When its oldest entry was written: long before any plan of the tests.
    begins: datetime | None = datetime(2020, 1, 1, tzinfo=UTC)
    syncs: int = 0
    #: Entries that journald had not written yet: they appear on the first sync.
    pending: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, matches: Mapping[str, str]) -> tuple[list[dict[str, Any]], datetime | None]:
        found = [e for e in self.entries if all(str(e.get(k)) == v for k, v in matches.items())]
        return found, self.begins

    def sync(self) -> None:
        self.syncs += 1
        self.entries += self.pending
        self.pending = []

    def log(self, event: str, plan_id: str, *, uid: int, unit: str, **fields: str) -> None:
        self.entries.append(
            {"EVENT": event, "PLAN_ID": plan_id, "_UID": uid, "_SYSTEMD_UNIT": unit, **fields}
        )

    def accepted(
        self,
        record: PlanRecord,
        sha256: str | None = None,
        *,
        uid: int = EXECUTOR_UID,
        unit: str = witness.EXECUTOR_UNIT,
    ) -> None:
        """What opsbot-executor.service logs when it stores ``record``."""
        self.log(
            "plan.accepted",
            record.plan_id,
            uid=uid,
            unit=unit,
            PLAN_SHA256=sha256 or record.sha256,
        )


def install(monkeypatch: pytest.MonkeyPatch) -> ScriptedJournal:
    journal = ScriptedJournal()
    monkeypatch.setattr(witness, "system_journal", journal)
    monkeypatch.setattr(witness, "sync_journal", journal.sync)
    monkeypatch.setattr(witness, "EXECUTOR_USER", EXECUTOR_USER)
    return journal
