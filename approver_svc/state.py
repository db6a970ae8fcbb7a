"""What the approver remembers between requests, in one root-only file.

``/var/lib/opsbot-approver/state.json`` (systemd's StateDirectory=opsbot-approver, mode
0700): the tokens it minted, each only as its sha256, with what it is for and whether it
was used; the plans it announced; and per approver the last TOTP timestep it accepted
(so a code works once) and the recent wrong codes (so guessing is bounded). It is written
atomically (the whole new file or the old one) and pruned of expired entries on each
write. Nothing here is secret enough to approve anything: a token's sha256 does not give
the token, and the TOTP secrets are systemd credentials, never in this file.
"""

from __future__ import annotations

import os
import stat
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

import structlog
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from approver_svc.errors import Refusal
from shared_io.files import read_bounded, write_atomic
from shared_schema.approver_socket import ApproverName, Decision, Pause, RuleDecision
from shared_schema.units import PlanId, Sha256Hex

__all__ = ["ApproverState", "StateFile"]

log = structlog.get_logger("opsbot.approver")

STATE_DIR = Path("/var/lib/opsbot-approver")
STATE_FILE = "state.json"
MAX_STATE_BYTES = 8 * 1024 * 1024
#: What the standing rules decided, per plan: the newest are kept, the oldest dropped
#: first (and counted), so a flood of plans cannot grow the file.
MAX_RULE_RECORDS = 2000
#: Source addresses whose wrong codes are remembered (a flood of addresses forgets the
#: oldest, never the file's limit).
MAX_SOURCES = 2000
#: Status links the news messages carried (approver_svc.news): past it, the soonest to
#: expire are forgotten.
MAX_WATCHES = 2000
#: Outcomes remembered as told (each for an hour): past it, the oldest are forgotten.
MAX_TOLD = 5000


class Model(BaseModel):
    """The state's records change in place (a token used, a code accepted), so unlike
    the wire's models they are not frozen; unknown keys are still errors."""

    model_config = ConfigDict(extra="forbid")


class TokenRecord(Model):
    """One minted token, known by its sha256: what it is for, until when, and its use."""

    plan_id: PlanId
    sha256: Sha256Hex
    approver: ApproverName
    decision: Decision
    expires_at: AwareDatetime
    #: sha256 of the token's sha256 and its confirmation ("" for a token minted before
    #: confirmations: it cannot decide anything).
    confirm_sha256: Sha256Hex | Literal[""] = ""
    used_at: AwareDatetime | None = None
    #: Why it no longer works: "used", "its other decision was used", "too many wrong codes".
    ended_by: str = ""
    failed_attempts: int = 0


class WatchRecord(Model):
    """A status link a news message carried: it shows where one plan is until it expires
    and decides nothing (kept apart from the tokens: the page looks a decision's token
    up only among those)."""

    plan_id: PlanId
    sha256: Sha256Hex
    expires_at: AwareDatetime


class ApproverMemory(Model):
    #: The TOTP timestep of the last code accepted: a code of it or before is refused.
    last_timestep: int = -1
    #: When each recent wrong code came (kept for the lock-out window only).
    failures: list[AwareDatetime] = Field(default_factory=list)


class ApproverState(Model):
    v: Literal[1] = 1
    #: sha256(token) -> the token's record.
    tokens: dict[Sha256Hex, TokenRecord] = Field(default_factory=dict)
    #: Plans announced, and when each expires (kept until then, so none is announced twice).
    announced: dict[PlanId, AwareDatetime] = Field(default_factory=dict)
    approvers: dict[ApproverName, ApproverMemory] = Field(default_factory=dict)
    #: Source address (as opsbot-web saw it) -> when each recent wrong code came from it.
    sources: dict[Annotated[str, Field(max_length=100)], list[AwareDatetime]] = Field(
        default_factory=dict
    )
    #: plan id -> what the standing rules decided about it (approver_svc.rules).
    ruled: dict[PlanId, RuleDecision] = Field(default_factory=dict)
    #: Records of ``ruled`` dropped to keep MAX_RULE_RECORDS.
    ruled_dropped: int = 0
    #: The newest plan whose record was dropped: the rules never ask about it or an older
    #: one again (such a plan waits for a human).
    ruled_floor: str = ""
    #: ``opsbot policy pause``/``resume``: the last switch (None: never paused).
    pause: Pause | None = None
    #: sha256(status link token) -> the plan it shows (approver_svc.news).
    watches: dict[Sha256Hex, WatchRecord] = Field(default_factory=dict)
    #: "PLAN_ID:kind" of each outcome the approvers were told -> when it may be forgotten
    #: (past it the outcome is too old to tell anyway).
    told: dict[Annotated[str, Field(max_length=64)], AwareDatetime] = Field(default_factory=dict)

    @property
    def paused(self) -> bool:
        return self.pause is not None and self.pause.paused

    def record_rule(self, decision: RuleDecision) -> None:
        """Remember ``decision``; past MAX_RULE_RECORDS, the oldest plan's is dropped,
        those no rule approved first (the approvals count against a rule's limit: a
        flood of other plans must not push them out)."""
        self.ruled[decision.plan_id] = decision
        self.shed_rules(MAX_RULE_RECORDS)

    def shed_rules(self, limit: int) -> int:
        """Keep at most ``limit`` rule records: the oldest go first, those no rule
        approved before any approval. How many were dropped (also counted)."""
        if len(self.ruled) <= limit:
            return 0
        order = sorted(self.ruled, key=lambda p: (self.ruled[p].outcome == "approved", p))
        drop = order[: len(self.ruled) - limit]
        self.ruled_dropped += len(drop)
        self.ruled_floor = max([self.ruled_floor, *drop])
        for plan_id in drop:
            del self.ruled[plan_id]
        return len(drop)

    def shed_facts(self) -> int:
        """Drop the facts of the oldest half of the rule records that hold them (their
        decisions stay); how many records lost them."""
        holding = sorted(p for p, d in self.ruled.items() if d.facts is not None)
        drop = holding[: len(holding) // 2 + 1]
        for plan_id in drop:
            self.ruled[plan_id] = self.ruled[plan_id].model_copy(update={"facts": None})
        return len(drop)

    def approved_by_rules(self, unit: str) -> dict[str, list[datetime]]:
        """When each rule approved a plan of ``unit``, by this approver's own record."""
        out: dict[str, list[datetime]] = {}
        for decision in self.ruled.values():
            if decision.outcome == "approved" and unit in decision.units:
                out.setdefault(decision.rule, []).append(decision.at)
        return out

    def live_tokens(self) -> int:
        return sum(t.used_at is None for t in self.tokens.values())

    def shed(self, limit: int) -> int:
        """Forget the least useful tokens until at most ``limit`` remain: used ones first,
        then those that expire soonest. How many were forgotten."""
        if len(self.tokens) <= limit:
            return 0
        order = sorted(
            self.tokens.items(), key=lambda kv: (kv[1].used_at is None, kv[1].expires_at)
        )
        dropped = len(self.tokens) - limit
        self.tokens = dict(order[dropped:])
        return dropped

    def watch(self, key: str, record: WatchRecord) -> None:
        """Remember a status link; past MAX_WATCHES the soonest to expire are forgotten."""
        self.watches[key] = record
        if len(self.watches) > MAX_WATCHES:
            order = sorted(self.watches.items(), key=lambda kv: kv[1].expires_at)
            self.watches = dict(order[len(self.watches) - MAX_WATCHES :])

    def mark_told(self, key: str, until: datetime) -> None:
        """Remember that outcome ``key`` was told, until ``until``; past MAX_TOLD the
        soonest forgotten go first."""
        self.told[key] = until
        if len(self.told) > MAX_TOLD:
            order = sorted(self.told.items(), key=lambda kv: kv[1])
            self.told = dict(order[len(self.told) - MAX_TOLD :])

    def memory(self, approver: str) -> ApproverMemory:
        return self.approvers.setdefault(approver, ApproverMemory())

    def failed_from(self, source: str, now: datetime) -> None:
        """A wrong code (or confirmation) came from ``source``; at most MAX_SOURCES are
        remembered, the ones that failed longest ago forgotten first."""
        self.sources.setdefault(source, []).append(now)
        if len(self.sources) > MAX_SOURCES:
            newest = sorted(self.sources.items(), key=lambda kv: max(kv[1]), reverse=True)
            self.sources = dict(newest[:MAX_SOURCES])

    def prune(self, now: datetime, keep_failures_seconds: float) -> None:
        """Drop expired tokens, plans past their expiry, and failures too old to count."""
        self.tokens = {d: t for d, t in self.tokens.items() if t.expires_at > now}
        self.announced = {p: at for p, at in self.announced.items() if at > now}
        self.watches = {d: w for d, w in self.watches.items() if w.expires_at > now}
        self.told = {key: at for key, at in self.told.items() if at > now}
        for memory in self.approvers.values():
            memory.failures = [
                at for at in memory.failures if (now - at).total_seconds() < keep_failures_seconds
            ]
        sources = {
            source: [at for at in times if (now - at).total_seconds() < keep_failures_seconds]
            for source, times in self.sources.items()
        }
        self.sources = {source: times for source, times in sources.items() if times}


class StateFile:
    """The state file in ``directory``, which must be root's (or this uid's) alone."""

    def __init__(self, directory: Path = STATE_DIR) -> None:
        self.directory = directory
        self.path = directory / STATE_FILE

    def _check_directory(self) -> None:
        try:
            st = os.stat(self.directory, follow_symlinks=False)
        except FileNotFoundError as exc:
            raise Refusal(
                "internal",
                f"the approver's state directory {self.directory} does not exist",
                hint="opsbot-approver.service has StateDirectory=opsbot-approver",
            ) from exc
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise Refusal(
                "internal",
                f"{self.directory} must be a directory of uid {os.geteuid()} with mode 0700 "
                f"(it is {stat.filemode(st.st_mode)} of uid {st.st_uid}); nothing was done",
            )

    def load(self) -> ApproverState:
        self._check_directory()
        try:
            data = read_bounded(self.path, MAX_STATE_BYTES)
        except FileNotFoundError:
            return ApproverState()
        try:
            return ApproverState.model_validate_json(data)
        except ValidationError as exc:
            raise Refusal(
                "internal",
                f"{self.path} is not a valid approver state ({exc.error_count()} errors); "
                "nothing was done",
                hint="move it away: the approver starts afresh (links sent so far stop working)",
            ) from exc

    def save(self, state: ApproverState) -> None:
        """Write ``state``, never past MAX_STATE_BYTES: it sheds tokens first (used ones,
        then the soonest to expire), so that the next load can always read it."""
        self._check_directory()
        data = state.model_dump_json().encode() + b"\n"
        while len(data) > MAX_STATE_BYTES and (state.watches or state.ruled or state.tokens):
            if any(d.facts is not None for d in state.ruled.values()):
                # A replay's facts go before anything a human or a rule's limit needs (the
                # diagnose user's plans decide how many there are, up to ~100 KB each).
                shed = state.shed_facts()
                log.warning(
                    "state.shed",
                    rule_facts=shed,
                    reason=f"the state would pass {MAX_STATE_BYTES} bytes; the oldest rule "
                    "records' facts dropped (`opsbot replay --rules` cannot replay them)",
                )
            elif state.watches:  # a status link shows; it goes before what decides
                shed = len(state.watches) // 4 + 1
                order = sorted(state.watches.items(), key=lambda kv: kv[1].expires_at)
                state.watches = dict(order[shed:])
                log.warning(
                    "state.shed",
                    status_links=shed,
                    reason=f"the state would pass {MAX_STATE_BYTES} bytes; status links forgotten",
                )
            elif state.ruled:  # the rules' history goes before any link a human needs
                shed = state.shed_rules(len(state.ruled) * 3 // 4)
                log.warning(
                    "state.shed",
                    rule_records=shed,
                    reason=f"the state would pass {MAX_STATE_BYTES} bytes; oldest rule "
                    "records dropped (counted in `opsbot policy report`)",
                )
            else:
                shed = state.shed(len(state.tokens) * 3 // 4)
                log.error(
                    "state.shed",
                    tokens=shed,
                    reason=f"the state would pass {MAX_STATE_BYTES} bytes; links forgotten",
                )
            data = state.model_dump_json().encode() + b"\n"
        write_atomic(self.path, data, mode=0o600)
