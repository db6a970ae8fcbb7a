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


class Approval(Model):
    v: Literal[1] = 1
    plan_id: PlanId
    sha256: Sha256Hex
    approver: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.@-]+$")
    approved_at: AwareDatetime
    expires_at: AwareDatetime
    #: ``opsbot approve --now``: the plan runs at once, outside its apply window. Written
    #: only when true, so that every other approval keeps the bytes it always had.
    override_window: bool = False

    @model_serializer(mode="wrap")
    def _without_default_override(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not self.override_window:
            data.pop("override_window", None)
        return data

    @model_validator(mode="after")
    def _expiry_after_approval(self) -> "Approval":
        if self.expires_at <= self.approved_at:
            raise ValueError("expires_at must be after approved_at")
        return self

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at
