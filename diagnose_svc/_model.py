"""The base of the diagnosis service's own models: unknown keys are errors, values frozen."""

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
