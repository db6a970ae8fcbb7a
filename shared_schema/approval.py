"""An approval: a root-written file binding one plan id to one plan fingerprint, with expiry."""

from datetime import datetime
from typing import Any, Literal

from pydantic import (
    AwareDatetime,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from shared_schema._model import Model
from shared_schema.units import PlanId, Sha256Hex

__all__ = ["Approval"]


class Approval(Model):
    v: Literal[1] = 1
    plan_id: PlanId
    sha256: Sha256Hex
    #: The person who approved it; "" when a standing rule did (``approved_by_rule``).
    approver: str = Field(default="", max_length=64, pattern=r"^([A-Za-z0-9_.@-]+)?$")
    approved_at: AwareDatetime
    expires_at: AwareDatetime
    #: ``opsbot approve --now``: the plan runs at once, outside its apply window. Written
    #: only when true, so that every other approval keeps the bytes it always had.
    override_window: bool = False
    #: The standing rule ([[approve.rule]]) that approved it, and the sha256 of that rule
    #: as it stood: never in ``approver``, so a rule named like a person is not one.
    #: Written only for a rule's approval.
    approved_by_rule: str = Field(default="", max_length=48, pattern=r"^([a-z][a-z0-9-]*)?$")
    rule_sha256: Sha256Hex | Literal[""] = ""

    @model_serializer(mode="wrap")
    def _without_defaults(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for key in ("approver", "override_window", "approved_by_rule", "rule_sha256"):
                if not getattr(self, key):
                    data.pop(key, None)
        return data

    @model_validator(mode="after")
    def _expiry_after_approval(self) -> "Approval":
        if self.expires_at <= self.approved_at:
            raise ValueError("expires_at must be after approved_at")
        if bool(self.approver) == bool(self.approved_by_rule):
            raise ValueError("an approval names its approver or its rule (approved_by_rule), one")
        if bool(self.approved_by_rule) != bool(self.rule_sha256):
            raise ValueError("a rule's approval carries the rule's sha256 (rule_sha256)")
        if self.approved_by_rule and self.override_window:
            raise ValueError("a rule never overrides the apply windows")
        return self

    @property
    def by(self) -> str:
        """Who approved it, in words: the approver, or ``rule NAME``."""
        return self.approver or f"rule {self.approved_by_rule}"

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at
