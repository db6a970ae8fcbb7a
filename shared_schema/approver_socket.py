"""The approver socket (/run/opsbot/approver.sock): how the units that hold no authority
(opsbot-notify, opsbot-web) ask root's opsbot-approver for the one thing each may ask.

One JSON line each way (shared_io.framing). Who may send which request is the peer's uid
(SO_PEERCRED), never anything in the message:

- ``announce`` (opsbot-notify's uid only): the PROPOSED plans not announced before, each
  with a fresh approve and reject token per approver; the approver marks them announced.
  With them, the news told once: plans a standing rule approved, plans that ended
  UNRESOLVED and incidents that ended (approver_svc.news), each with a status link.
- ``view`` (opsbot-web's uid only): what one token is for, for the page a GET shows; it
  changes nothing (a chat's link preview fetches every URL).
- ``decide`` (opsbot-web's uid only): a token, the approver's TOTP code and a reason; the
  approver checks the token first, then the code, then the plan, and only then writes
  the approval (or the rejection) ``opsbot approve`` (``reject``) writes.
- ``follow`` (opsbot-web's uid only): where the plan a used token decided, or a news
  message's status link shows, is now (its state, the last change's reason, what
  opsbot-verify saw), for the page's status view; it changes nothing, and a token that
  decided nothing is refused as ``token``. A status link is known to ``follow`` alone:
  ``view`` and ``decide`` refuse it as any token they do not know.

A token is 128 random bits, URL-safe base64 (22 characters), stored by the approver only
as its sha256; it is single-use and bound to one plan id, its sha256, one approver and one
decision, so that a relay seeing a reject link cannot make an approve of it.

Each link also has a **confirmation**: four characters the approver hands out with the
token, which the notification shows beside the link and never puts in the URL. The
human types it with the code, and a decide is refused unless it is the one of that
token: the page, which sees every link opened on it but no message, cannot pair a code
typed for one decision with another decision's token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

from pydantic import AwareDatetime, Field, TypeAdapter

from shared_schema._model import Model
from shared_schema.config_state import ConfigState
from shared_schema.states import PlanState
from shared_schema.units import PlanId, Sha256Hex

TOKEN_PATTERN = r"^[A-Za-z0-9_-]{22}$"
Token = Annotated[str, Field(pattern=TOKEN_PATTERN)]
TotpCode = Annotated[str, Field(pattern=r"^[0-9]{6}$")]
#: The confirmation's characters: no 0/O, 1/I to misread; typed in either case.
CONFIRM_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CONFIRM_LENGTH = 4
CONFIRM_PATTERN = rf"^[{CONFIRM_ALPHABET}]{{{CONFIRM_LENGTH}}}$"
Confirm = Annotated[str, Field(pattern=CONFIRM_PATTERN)]
ApproverName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
Decision = Literal["approve", "reject"]
MAX_APPROVER_MESSAGE_BYTES = 16 * 1024
MAX_APPROVER_REPLY_BYTES = 1024 * 1024
Line = Annotated[str, Field(max_length=2000)]

# -- requests ---------------------------------------------------------------------------


class Announce(Model):
    v: Literal[1] = 1
    op: Literal["announce"] = "announce"


class View(Model):
    v: Literal[1] = 1
    op: Literal["view"] = "view"
    token: Token
    #: The digest of the config the page runs with (check-config names a stale page).
    config_digest: Sha256Hex | None = None


class Decide(Model):
    v: Literal[1] = 1
    op: Literal["decide"] = "decide"
    token: Token
    code: TotpCode
    #: The confirmation beside the link in the approver's message (upper case).
    confirm: Confirm
    reason: Annotated[str, Field(max_length=500)] = ""
    #: The client's address as opsbot-web saw it (for the journal only; never trusted).
    source: Annotated[str, Field(max_length=100)] = ""
    #: The digest of the config the page runs with (check-config names a stale page).
    config_digest: Sha256Hex | None = None


class ConfigQuery(Model):
    """Root's ``opsbot check-config``: the config the approver has in force, and the one
    the page reported with its last relay."""

    v: Literal[1] = 1
    op: Literal["config"] = "config"


class Follow(Model):
    v: Literal[1] = 1
    op: Literal["follow"] = "follow"
    token: Token


class ApplyRules(Model):
    """Root's opsbot-rules.service (started by a plan stored): ask the standing rules
    about every PROPOSED plan they have not been asked about (the approver also does
    before each ``announce``, so no plan is announced before its rules decided)."""

    v: Literal[1] = 1
    op: Literal["rules"] = "rules"


class PolicyReport(Model):
    """Root's ``opsbot policy report``: what each rule did and would have done; with
    ``records_since``, also the records themselves of the plans decided since then
    (``opsbot replay --rules``), oldest first, after plan id ``after`` (a page each)."""

    v: Literal[1] = 1
    op: Literal["policy-report"] = "policy-report"
    records_since: AwareDatetime | None = None
    after: PlanId | Literal[""] = ""


class PolicySwitch(Model):
    """Root's ``opsbot policy pause`` / ``resume``: every rule at once."""

    v: Literal[1] = 1
    op: Literal["policy-switch"] = "policy-switch"
    paused: bool
    #: Who asked (the login name behind sudo), and why: for the journal and the report.
    by: Annotated[str, Field(min_length=1, max_length=64)]
    reason: Annotated[str, Field(max_length=500)] = ""


if TYPE_CHECKING:
    ApproverRequest = (
        Announce | View | Decide | ConfigQuery | Follow | ApplyRules | PolicyReport | PolicySwitch
    )
else:
    ApproverRequest = Annotated[
        Union[  # noqa: UP007
            Announce, View, Decide, ConfigQuery, Follow, ApplyRules, PolicyReport, PolicySwitch
        ],
        Field(discriminator="op"),
    ]

# -- what a plan looks like to the page and the notification ------------------------------


class StepView(Model):
    unit: str
    #: The step exactly as it runs (no shell).
    argv: list[str]
    #: Its precondition in words ("app.service is failed"), or [] for none.
    precondition: list[Line] = []
    #: The unit's live state now, in words ("failed (failed)"), or why it is unknown.
    live: Line = ""
    reason: Line = ""


class PlanView(Model):
    plan_id: PlanId
    sha256: Sha256Hex
    host: str
    state: str
    goal: Line
    units: list[str]
    steps: list[StepView]
    #: Two lines at most: what diagnosis saw (the symptom, the evidence).
    evidence: list[Line] = []
    submitted_at: AwareDatetime
    #: When the plan itself expires (plan_ttl_seconds after it was submitted).
    plan_expires_at: AwareDatetime
    #: When an approval made now would expire (an apply window may make it later).
    approval_expires_at: AwareDatetime
    #: When it would run once approved ("at once", or the apply window that opens next).
    runs: Line = ""
    #: For a follow-up, which attempt it is and what the one before ran ("" otherwise).
    attempt: Line = ""


class PlanBrief(Model):
    """What a decision was about, for the pages after it: the goal, the units, each
    step's argv, on which host."""

    plan_id: PlanId
    sha256: Sha256Hex
    host: str
    goal: Line
    units: list[str]
    #: Each step exactly as it runs (no shell).
    argv: list[list[str]]


class Link(Model):
    approver: ApproverName
    decision: Decision
    token: Token
    #: Shown beside the link in the message, never in its URL; typed with the code.
    confirm: Confirm
    expires_at: AwareDatetime


class Notice(Model):
    plan: PlanView
    links: list[Link]


class RuleNotice(Model):
    """A plan a standing rule approved: what each approver is told (no link: there is
    nothing left to decide, only to know, and to pause the rules if it is wrong)."""

    plan: PlanBrief
    rule: Annotated[str, Field(max_length=48)]
    rule_sha256: Sha256Hex
    #: What diagnosis saw, two lines at most (the plan's evidence).
    why: list[Line] = []
    approved_at: AwareDatetime
    #: When it runs ("at once", or when the apply window opens).
    runs: Line = ""
    approvers: list[ApproverName]
    #: A read-only link token to the plan's status view (``<link_base>/p/TOKEN/status``):
    #: it shows where the plan is and can decide nothing (the page refuses it for a
    #: decision). None: no status view (the approver minted none).
    watch: Token | None = None


OutcomeKind = Literal["unresolved", "ended"]


class OutcomeNotice(Model):
    """How a plan that ran turned out, told to every approver once: ``unresolved`` (its
    verification found the symptom still there) or ``ended`` (its incident is over: the
    plan VERIFIED, or it FAILED or was INTERRUPTED, and a human must look)."""

    kind: OutcomeKind
    plan: PlanBrief
    #: The plan's state now, since when, and the reason that change gave.
    state: PlanState
    at: AwareDatetime
    reason: Line = ""
    #: Two lines at most of what opsbot-verify saw.
    verification: list[Line] = []
    #: The incident (its first plan's id), how many plans it has had, since when.
    incident: PlanId
    plans: int = 1
    started_at: AwareDatetime
    #: Who approved the plan ("alice", "rule night-restarts", "root on the host").
    approved_by: Line = ""
    #: What comes next, in words ("a follow-up diagnosis runs", "a human must look").
    next: Line = ""
    approvers: list[ApproverName]
    #: As in :class:`RuleNotice`.
    watch: Token | None = None


# -- replies ----------------------------------------------------------------------------


class Announced(Model):
    v: Literal[1] = 1
    op: Literal["announced"] = "announced"
    notices: list[Notice]
    #: Plans a rule approved since the last announce.
    ruled: list[RuleNotice] = []
    #: Plans that ended UNRESOLVED, and incidents that ended, since the last announce.
    outcomes: list[OutcomeNotice] = []


RuleOutcome = Literal["approved", "would approve", "for humans", "failed"]
#: Approvals of a unit a record keeps: the newest, as many as a rule's max_per_unit may be
#: (shared_schema.standing), so a count against any rule's limit replays exactly.
MAX_APPROVALS_KEPT = 20
Word = Annotated[str, Field(max_length=64)]


class TargetRead(Model):
    """One of a unit's health targets as root probed it (plans.readings.TargetReading)."""

    name: Word
    outcome: Word
    error: Line = ""


class UnitRead(Model):
    """A unit as root read it when a rule was asked (plans.readings.UnitReading)."""

    unit: Annotated[str, Field(max_length=256)]
    active_state: Word = ""
    sub_state: Word = ""
    result: Word = ""
    invocation_id: Word = ""
    targets: Annotated[list[TargetRead], Field(max_length=8)] = []
    error: Line = ""


class UnitPast(Model):
    """A unit's history as the rules read it (plans.standing.UnitHistory): a plan of it
    in flight, how the newest that ran ended, when rules approved plans of it (the newest
    MAX_APPROVALS_KEPT); or why it could not be read."""

    unit: Annotated[str, Field(max_length=256)]
    in_flight: PlanId | None = None
    last_ran: PlanId | None = None
    last_ended: PlanState | None = None
    approved: Annotated[list[AwareDatetime], Field(max_length=MAX_APPROVALS_KEPT)] = []
    unreadable: Line = ""


class RuleFacts(Model):
    """What root knew of a plan when the rules were asked, each part only where a rule
    asked for it (``opsbot replay --rules`` decides again from it, never from the host):
    what opsbot's recent plans forbade it (None: not asked), each unit's history, and
    root's reading of its units (None: not read)."""

    recent: Annotated[list[Line], Field(max_length=16)] | None = None
    history: Annotated[list[UnitPast], Field(max_length=64)] = []
    reading: Annotated[list[UnitRead], Field(max_length=64)] | None = None


class RuleDecision(Model):
    """What the standing rules decided about one plan (root's approver's record)."""

    plan_id: PlanId
    sha256: Sha256Hex
    at: AwareDatetime
    units: list[Annotated[str, Field(max_length=256)]]
    tools: list[Annotated[str, Field(max_length=32)]]
    #: ``approved`` (an enforce rule wrote the approval), ``would approve`` (a shadow
    #: rule would have), ``for humans`` (no rule approves), ``failed`` (a rule approved
    #: and writing the approval failed: it waits for a human).
    outcome: RuleOutcome
    #: The rule that approved or would have ("" for none).
    rule: Annotated[str, Field(max_length=48)] = ""
    rule_sha256: Sha256Hex | Literal[""] = ""
    #: A shadow rule that would also have approved it, where an enforce rule did not.
    shadow_rule: Annotated[str, Field(max_length=48)] = ""
    #: Each rule that did not approve it, with its first reason ("rule: reason").
    refused: Annotated[list[Line], Field(max_length=64)] = []
    #: What root read of each unit when a rule was asked (plans.readings), where it read:
    #: the facts a rule acted on, never the plan's words.
    read: Annotated[list[Line], Field(max_length=64)] = []
    #: The approvers were told of it (announce), for an approved one.
    told: bool = False
    #: What the rules decided on (None: a record of an older opsbot, or none was asked).
    facts: RuleFacts | None = None


class RulesApplied(Model):
    v: Literal[1] = 1
    op: Literal["rules-applied"] = "rules-applied"
    #: The plans decided by this request (not those decided before).
    decided: list[RuleDecision]
    paused: bool = False


class RuleSummary(Model):
    """One rule in ``opsbot policy report``."""

    name: Annotated[str, Field(max_length=48)]
    mode: Literal["shadow", "enforce", "removed"]
    approved: int = 0
    would_approve: int = 0
    #: For the plans it would have approved, how each ended where a human approved it
    #: (its state now: VERIFIED, UNRESOLVED, REJECTED, EXPIRED...).
    ended: dict[Annotated[str, Field(max_length=32)], int] = {}
    #: Why it did not approve, each reason with how many plans.
    refused: dict[Annotated[str, Field(max_length=2000)], int] = {}


class Pause(Model):
    paused: bool
    by: Annotated[str, Field(max_length=64)]
    at: AwareDatetime
    reason: Annotated[str, Field(max_length=500)] = ""


class PolicyReported(Model):
    v: Literal[1] = 1
    op: Literal["policy-reported"] = "policy-reported"
    rules: list[RuleSummary]
    #: Plans decided, in the bounded record; records dropped to keep the bound (oldest
    #: first).
    records: int
    dropped: int
    #: The newest decisions (at most 50), newest first.
    recent: list[RuleDecision]
    pause: Pause | None = None
    #: With ``records_since``: the records of that period after ``after``, oldest first,
    #: as many as fit a reply; ``more``: ask again after the last one.
    records_sent: list[RuleDecision] = []
    more: bool = False


class PolicySwitched(Model):
    v: Literal[1] = 1
    op: Literal["policy-switched"] = "policy-switched"
    pause: Pause


class Viewed(Model):
    v: Literal[1] = 1
    op: Literal["viewed"] = "viewed"
    plan: PlanView
    approver: ApproverName
    decision: Decision
    expires_at: AwareDatetime


class Decided(Model):
    v: Literal[1] = 1
    op: Literal["decided"] = "decided"
    decision: Decision
    plan_id: PlanId
    sha256: Sha256Hex
    approver: ApproverName
    #: The approval's expiry (approve), or None (reject).
    approval_expires_at: AwareDatetime | None = None
    #: What will apply it, as systemd says now (approve), or "" (reject).
    applies: Line = ""
    #: What was approved (approve), or None (reject: its record may not even verify).
    plan: PlanBrief | None = None


class Followed(Model):
    """Where the plan a used token decided is now: what it is, who decided it with this
    link and when, its state since when and why, and what opsbot-verify saw."""

    v: Literal[1] = 1
    op: Literal["followed"] = "followed"
    plan: PlanBrief
    #: None for a status link a message carried (it decided nothing: see ``approved_by``).
    decision: Decision | None = None
    approver: ApproverName | None = None
    decided_at: AwareDatetime | None = None
    #: Who approved the plan, and when ("" and None: not approved), for a status link.
    approved_by: Line = ""
    approved_at: AwareDatetime | None = None
    state: PlanState
    #: When the plan last changed state, and the reason that change gave ("" for none).
    since: AwareDatetime | None = None
    reason: Line = ""
    #: Two lines at most of what opsbot-verify saw (VERIFIED, UNRESOLVED), else [].
    verification: list[Line] = []
    #: An APPROVED plan outside its apply window: when the window opens, if known.
    window_opens_at: AwareDatetime | None = None


class ConfigShown(ConfigState):
    v: Literal[1] = 1
    op: Literal["config"] = "config"
    #: The digest the page sent with its last relay, and when (None: none since start).
    web_digest: Sha256Hex | None = None
    web_seen_at: AwareDatetime | None = None


RefusalKind = Literal["request", "token", "code", "confirm", "limit", "plan", "internal"]


class Refused(Model):
    """``kind``: ``request`` malformed or not allowed for this uid; ``token`` unknown,
    used, expired or for another plan; ``code`` a wrong or reused TOTP code; ``confirm``
    a right code with a confirmation that is not this link's (the code is spent);
    ``limit`` too many attempts; ``plan`` the plan changed, ended or cannot be approved
    now; ``internal`` the approver failed (its journal says why)."""

    v: Literal[1] = 1
    op: Literal["refused"] = "refused"
    kind: RefusalKind
    reason: Line


if TYPE_CHECKING:
    ApproverReply = (
        Announced
        | Viewed
        | Decided
        | Refused
        | ConfigShown
        | Followed
        | RulesApplied
        | PolicyReported
        | PolicySwitched
    )
else:
    ApproverReply = Annotated[
        Union[  # noqa: UP007
            Announced,
            Viewed,
            Decided,
            Refused,
            ConfigShown,
            Followed,
            RulesApplied,
            PolicyReported,
            PolicySwitched,
        ],
        Field(discriminator="op"),
    ]

_REQUESTS: TypeAdapter[Any] = TypeAdapter(ApproverRequest)
_REPLIES: TypeAdapter[Any] = TypeAdapter(ApproverReply)


def parse_approver_request(data: bytes) -> ApproverRequest:
    """A request line, or pydantic's ValidationError."""
    value: ApproverRequest = _REQUESTS.validate_json(data)
    return value


_AnyReply = (
    Announced
    | Viewed
    | Decided
    | Refused
    | ConfigShown
    | Followed
    | RulesApplied
    | PolicyReported
    | PolicySwitched
)


def parse_approver_reply(data: bytes) -> _AnyReply:
    value: _AnyReply = _REPLIES.validate_json(data)
    return value


__all__ = [
    "Announce",
    "Announced",
    "ApplyRules",
    "ApproverName",
    "ApproverReply",
    "ApproverRequest",
    "Pause",
    "PolicyReport",
    "PolicyReported",
    "PolicySwitch",
    "PolicySwitched",
    "RuleDecision",
    "RuleFacts",
    "RuleNotice",
    "RuleOutcome",
    "RuleSummary",
    "RulesApplied",
    "ConfigQuery",
    "ConfigShown",
    "Decide",
    "Decided",
    "Decision",
    "Follow",
    "Followed",
    "Link",
    "Notice",
    "PlanBrief",
    "PlanView",
    "Refused",
    "StepView",
    "TargetRead",
    "UnitPast",
    "UnitRead",
    "Token",
    "View",
    "Viewed",
    "parse_approver_reply",
    "parse_approver_request",
]
