"""An approval: a root-written file binding one plan id to one plan fingerprint, with expiry."""

from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, Field, model_validator

from shared_schema._model import Model
from shared_schema.units import PlanId, Sha256Hex


class Approval(Model):
    v: Literal[1] = 1
    plan_id: PlanId
    sha256: Sha256Hex
    approver: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@-]+$")
    approved_at: AwareDatetime
    expires_at: AwareDatetime

    @model_validator(mode="after")
    def _expiry_after_approval(self) -> "Approval":
        if self.expires_at <= self.approved_at:
            raise ValueError("expires_at must be after approved_at")
        return self

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at
